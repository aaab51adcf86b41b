"""Reaching Ray and talking to env actors: what the vector env and the single-env proxy share.

Ray is optional (the ``scale`` extra), so it is imported here, on first use, with an
install hint instead of a traceback when it is missing. An address is checked before
``ray.init`` sees it, because ``ray.init`` retries an unreachable address for minutes.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from aem_envs.core.errors import AEMError, require
from aem_envs.vector.worker import EnvWorker
from sandboxes.errors import exception_line
from sandboxes.lifetime import take_ownership

#: Per-actor resources unless the caller says otherwise. A text env's process idles while
#: the policy thinks, so a quarter CPU each lets a 2-core machine hold 8 envs; an env whose
#: step is heavy (a browser, tests in a container) should ask for a whole core or more.
DEFAULT_ACTOR_OPTIONS: dict[str, Any] = {"num_cpus": 0.25}

#: Seconds one call to an actor (make, reset, step, close) may take before the actor is
#: treated as dead. Generous: an SWE step runs a test suite.
DEFAULT_CALL_TIMEOUT_S = 600.0

#: The address that means "a private Ray on this machine, on loopback" (as ``None`` does).
LOCAL = "local"

#: Seconds to wait for a TCP answer from a cluster's address before giving up on it.
PROBE_TIMEOUT_S = 5.0

#: How to fix an address that does not work, in every such error.
ADDRESS_HINT = (
    "start a head there (`ray start --head`) or give 'local' (`--ray` alone) for a local Ray "
    "on loopback"
)


class RayActorFailed(AEMError):
    """An env actor died, or did not answer in time, where no episode can absorb it (making
    the env, resetting it, or any call of a single-env proxy)."""


class RayConnectError(AEMError):
    """No Ray cluster answers at the address given."""


def ray_module() -> ModuleType:
    """The ``ray`` package, or one line saying how to install it."""
    return require("scale", "ray", feature="Ray env workers (aem_envs.vector, --ray)")


def connect(address: str | None) -> bool:
    """Make sure this process is a Ray driver; whether this call started Ray.

    ``address=None`` or ``"local"`` starts a private local Ray on loopback (no dashboard)
    unless this process is already connected; any other address (``"auto"``,
    ``"HOST:6379"``, ``"ray://HOST:10001"``) joins that cluster, or raises
    :class:`RayConnectError` in one line. The caller that started Ray is the one that shuts
    it down.
    """
    ray = ray_module()
    if ray.is_initialized():
        return False
    if address is None or address == LOCAL:
        take_ownership()  # a SIGKILLed driver would leave Ray's agents (and their envs') behind
        ray.init(address="local", include_dashboard=False, _node_ip_address="127.0.0.1")
        return True
    if address != "auto":
        check_address(address)
    try:
        ray.init(address=address)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise RayConnectError(
            f"cannot join the Ray cluster at {address!r}: {exception_line(exc)}; {ADDRESS_HINT}"
        ) from exc
    return True


@contextlib.contextmanager
def session(address: str | None) -> Iterator[None]:
    """Ray for the ``with`` block: joined or started as :func:`connect` does (nothing for
    ``None``: the envs then run without Ray), and stopped after it if this started it."""
    started = connect(address) if address is not None else False
    try:
        yield
    finally:
        if started:
            ray_module().shutdown()


def check_address(address: str) -> None:
    """Raise :class:`RayConnectError` unless ``address`` is ``[ray://]HOST:PORT`` and something
    accepts TCP there (``ray.init`` would retry an unreachable address for minutes)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise RayConnectError(
            f"Ray address {address!r} is not 'local', 'auto', 'HOST:PORT' or "
            f"'ray://HOST:PORT'; {ADDRESS_HINT}"
        )
    try:
        socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S).close()
    except OSError as exc:
        raise RayConnectError(
            f"no Ray cluster answers at {address!r} ({exception_line(exc)}); {ADDRESS_HINT}"
        ) from exc


def spawn(
    env_id: str,
    env_kwargs: dict[str, Any],
    actor_options: dict[str, Any] | None,
    *,
    autoreset: bool,
) -> Any:
    """A new actor holding ``gym.make(env_id, **env_kwargs)`` (it starts in the background)."""
    ray = ray_module()
    options = {**DEFAULT_ACTOR_OPTIONS, **(actor_options or {})}
    return ray.remote(EnvWorker).options(**options).remote(env_id, env_kwargs, autoreset)


def failure_types() -> tuple[type[BaseException], ...]:
    """The errors that mean "this actor is gone or stuck", as opposed to an env's own error
    (which is raised to the caller, as ``AsyncVectorEnv`` raises a worker's error)."""
    ray = ray_module()
    return (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError)


def results(refs: list[Any], timeout_s: float) -> list[Any]:
    """Each call's value, or the actor failure in its place (an env's own error is
    raised, unwrapped from Ray's ``RayTaskError``). One deadline for the whole batch: the
    calls run in parallel."""
    ray = ray_module()
    deadline = time.monotonic() + timeout_s
    out: list[Any] = []
    for ref in refs:
        try:
            out.append(ray.get(ref, timeout=max(0.0, deadline - time.monotonic())))
        except failure_types() as exc:
            out.append(exc)
        except ray.exceptions.RayTaskError as exc:
            # The env's own error, raised as itself: same type and message as a local env's.
            cause = getattr(exc, "cause", None)
            if isinstance(cause, Exception):
                raise cause from None
            raise
    return out


def failure_line(exc: BaseException, timeout_s: float) -> str:
    """Why an actor failed, in one line (a timeout says which limit it ran past)."""
    if isinstance(exc, ray_module().exceptions.GetTimeoutError):
        return f"no reply within call_timeout_s={timeout_s:g} s; actor killed"
    return exception_line(exc)


def strict(refs: list[Any], timeout_s: float, what: str) -> list[Any]:
    """Like :func:`results`, where an actor failure has no episode to fail: it raises
    :class:`RayActorFailed` with ``what`` (e.g. "make failed in a Ray actor of ID")."""
    values = results(refs, timeout_s)
    failed = next((v for v in values if isinstance(v, BaseException)), None)
    if failed is not None:
        raise RayActorFailed(f"{what}: {failure_line(failed, timeout_s)}")
    return values


def close_all(actors: list[Any], timeout_s: float) -> None:
    """Close every actor's env (one bounded wait for all), then kill the actors."""
    if not actors:
        return
    closing = [actor.close.remote() for actor in actors]
    ray_module().wait(closing, num_returns=len(closing), timeout=timeout_s)
    for actor in actors:
        kill(actor)


def kill(actor: Any) -> None:
    """Stop ``actor`` for good (no restart); an actor that is already gone is fine."""
    ray = ray_module()
    with contextlib.suppress(ray.exceptions.RayError):
        ray.kill(actor, no_restart=True)
