"""``aem serve``: one env id over OpenEnv's HTTP/WebSocket protocol, one env per session."""

from __future__ import annotations

import argparse
import functools
import socket

from aem_cli.arguments import non_negative_float, port, positive_int
from aem_cli.env_kwargs import add_env_kwargs_flag
from aem_cli.play import make_env
from aem_envs.core.errors import ArgumentError
from aem_envs.registration import resolve_env_id
from sandboxes.lifetime import take_ownership


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve", help="serve an env id over OpenEnv (WebSocket sessions at /ws)"
    )
    parser.add_argument("env_id", help="an id from `aem envs`, e.g. aem/ALFWorld-v0")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=port, default=8000, help="TCP port (default: 8000)")
    parser.add_argument(
        "--max-sessions", type=positive_int, default=None, help="concurrent sessions (envs) at most"
    )
    parser.add_argument(
        "--idle-timeout",
        type=non_negative_float,
        default=None,
        help="seconds a session may sit idle before its env is closed; 0: never",
    )
    parser.add_argument("--max-steps", type=positive_int, help="episode step limit")
    add_env_kwargs_flag(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from aem_envs.remote import server

    max_sessions = server.DEFAULT_MAX_SESSIONS if args.max_sessions is None else args.max_sessions
    resolve_env_id(args.env_id)  # an unknown id first: it is the likelier typo
    check_can_listen(args.host, args.port)
    idle = server.DEFAULT_IDLE_TIMEOUT if args.idle_timeout is None else args.idle_timeout
    take_ownership()  # what the sessions' envs start ends with this process
    make = functools.partial(make_env, args)
    # Make one env first: an unknown id, a bad keyword or a missing engine fails here, in one
    # line, instead of in every session.
    try:
        probe = make()
    except TypeError as exc:  # what gym.make raises for a keyword the env does not take
        raise ArgumentError(f"--env-kwargs: {exc}") from exc
    try:
        env_id = probe.spec.id if probe.spec else args.env_id
        server.check_servable(probe)
    finally:
        probe.close()
    app = server.build_app(make, env_id, max_sessions=max_sessions, idle_timeout=idle or None)
    print(
        f"aem serve: {env_id} at ws://{args.host}:{args.port}/ws (OpenEnv), up to "
        f"{max_sessions} sessions, idle timeout {f'{idle:g} s' if idle else 'none'}",
        flush=True,
    )
    server.serve(app, host=args.host, port=args.port)
    return 0


def check_can_listen(host: str, port: int) -> None:
    """Bind ``host:port`` once and let go, so a taken port or a foreign address is one line
    before any env is made (the server itself would fail only after start-up)."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ArgumentError(
            f"cannot listen on {host}:{port} ({reason}); choose another --port or --host"
        ) from None
