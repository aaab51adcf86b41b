"""An OpenEnv server for any aem env id, built from ``openenv-core``'s own server.

:class:`GymTextEnvironment` adapts one Gymnasium text env to OpenEnv's ``Environment``;
:func:`build_app` hands a factory of them to OpenEnv's ``HTTPEnvServer``, whose WebSocket
endpoint ``/ws`` gives every connection its own env (one env per session), refuses
connections beyond ``max_sessions``, closes sessions idle past ``idle_timeout`` and calls
``env.close()`` whenever a session ends, so no container or browser outlives its session.

OpenEnv's HTTP ``/reset`` and ``/step`` are stateless (a fresh env per request, closed after
it): episodes are played over ``/ws``. aem adds two things to OpenEnv's app: ``GET
/sessions`` (OpenEnv's ``ServerCapacityStatus``: live sessions and the cap) and 4xx replies
with a one-line message for requests the env rejects.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from collections.abc import Callable
from typing import Any

import gymnasium as gym
from gymnasium.error import ResetNeeded

from aem_envs.core.errors import AEMError, require
from aem_envs.core.io import jsonable
from aem_envs.remote.protocol import TextAction, TextEnvState, TextObservation, space_spec

_FEATURE = "aem serve"
_server = require("scale", "openenv.core.env_server", feature=_FEATURE)

#: Defaults of ``aem serve``: enough sessions for a GRPO batch, and an idle limit long
#: enough for a slow policy's turn yet short enough that a crashed trainer frees its envs.
DEFAULT_MAX_SESSIONS = 64
DEFAULT_IDLE_TIMEOUT = 600.0


class SessionClosedError(AEMError):
    """A message arrived for a session the server already closed (idle timeout, shutdown)."""


class GymTextEnvironment(_server.Environment):  # type: ignore[name-defined]
    """One OpenEnv session: a Gymnasium text env made when the session opens.

    Why concurrent sessions are safe: each session holds its own env instance, and aem envs
    share only read-only data (bundled games, catalogs) between instances.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, make: Callable[[], gym.Env[str, str]], env_id: str) -> None:
        super().__init__()
        self._env = make()
        self._env_id = env_id
        self._episode_id: str | None = None
        self._steps = 0
        self._closed = False

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> TextObservation:
        self._check_open()
        text, info = self._env.reset(seed=seed, options=options)
        self._episode_id = episode_id or uuid.uuid4().hex
        self._steps = 0
        return TextObservation(text=text, info=jsonable(info))

    def step(self, action: TextAction, timeout_s: float | None = None) -> TextObservation:
        self._check_open()
        text, reward, terminated, truncated, info = self._env.step(action.text)
        self._steps += 1
        return TextObservation(
            text=text,
            reward=float(reward),
            done=bool(terminated or truncated),
            terminated=bool(terminated),
            truncated=bool(truncated),
            info=jsonable(info),
        )

    @property
    def state(self) -> TextEnvState:
        return TextEnvState(
            episode_id=self._episode_id,
            step_count=self._steps,
            env_id=self._env_id,
            observation_space=space_spec(self._env.observation_space),
            action_space=space_spec(self._env.action_space),
        )

    def get_metadata(self) -> Any:
        return _server.EnvironmentMetadata(
            name=self._env_id,
            description=f"aem {self._env_id}: text observations, text actions",
        )

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._env.close()

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(
                f"the server closed this {self._env_id} session (idle past its timeout, or "
                "shutting down); open a new session"
            )


def check_servable(env: gym.Env[Any, Any]) -> None:
    """Raise one line unless ``env``'s spaces are text, the only kind the protocol carries."""
    space_spec(env.observation_space)
    space_spec(env.action_space)


def build_app(
    make: Callable[[], gym.Env[str, str]],
    env_id: str,
    *,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
) -> Any:
    """OpenEnv's FastAPI app serving ``make()`` envs, one per WebSocket session.

    ``idle_timeout`` is in seconds (``None``: never); OpenEnv's reaper checks every
    ``max(idle_timeout / 4, 5)`` seconds, so an idle session lives up to that much longer.
    """
    fastapi = require("scale", "fastapi", feature=_FEATURE)
    server = _server.HTTPEnvServer(
        # A partial of the class, not a closure: OpenEnv reads SUPPORTS_CONCURRENT_SESSIONS
        # off the class instead of making a throwaway env to ask it.
        functools.partial(GymTextEnvironment, make, env_id),
        TextAction,
        TextObservation,
        concurrency_config=_server.ConcurrencyConfig(
            max_concurrent_envs=max_sessions, session_timeout=idle_timeout
        ),
    )
    app = fastapi.FastAPI(title=f"aem {env_id}", description="An aem env over OpenEnv")
    server.register_routes(app)
    app.get("/sessions", response_model=_server.ServerCapacityStatus, tags=["Health"])(
        server.get_capacity_status
    )
    app.add_middleware(_QuietDisconnect)
    app.add_exception_handler(AEMError, _client_error(400))
    app.add_exception_handler(ResetNeeded, _client_error(409, _STATELESS_STEP))
    return app


_STATELESS_STEP = (
    "OpenEnv's HTTP /step runs on a fresh env (no session, no episode); play episodes over "
    "the WebSocket session at /ws: openenv's EnvClient, or "
    "gym.make('aem_envs:aem/Remote-v0', url=...)"
)


class _QuietDisconnect:
    """Drops the ``WebSocketDisconnect`` of OpenEnv's last ``websocket.close()`` in ``/ws``.

    Why: when the client closed first, that second close raises after the session (and its
    env) is already gone, and uvicorn would log a traceback for every such session.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        websockets = require("scale", "starlette.websockets", feature=_FEATURE)
        with contextlib.suppress(websockets.WebSocketDisconnect):
            await self.app(scope, receive, send)


def _client_error(status: int, message: str | None = None) -> Callable[..., Any]:
    """An exception handler answering ``status`` with ``{"detail": message or the error}``."""
    responses = require("scale", "fastapi.responses", feature=_FEATURE)

    async def handler(request: Any, exc: Exception) -> Any:
        return responses.JSONResponse({"detail": message or str(exc)}, status_code=status)

    return handler


def serve(app: Any, *, host: str, port: int) -> None:
    """Run ``app`` until interrupted; on shutdown uvicorn closes every session's env."""
    uvicorn = require("scale", "uvicorn", feature=_FEATURE)
    uvicorn.run(app, host=host, port=port, log_level="warning")
