"""``aem/Remote-v0``: a Gymnasium env that plays an env served by ``aem serve``.

It is OpenEnv's own WebSocket client (``EnvClient``, run synchronously by its
``SyncEnvClient``) behind the Gymnasium API: one instance is one server session, hence one
env on the server; ``close()`` ends the session and the server closes that env. Spaces are
the remote env's, read from the session state when the env is made.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

import gymnasium as gym

from aem_envs.core.errors import AEMError, ArgumentError, EnvClosedError, require
from aem_envs.remote.protocol import TextEnvState, TextObservation, space_from_spec

_FEATURE = "aem/Remote-v0"
_core = require("scale", "openenv.core", feature=_FEATURE)
_client_types = require("scale", "openenv.core.client_types", feature=_FEATURE)
_exceptions = require("scale", "websockets.exceptions", feature=_FEATURE)

T = TypeVar("T")


class RemoteEnvError(AEMError):
    """The server refused a request or could not be reached; the message says which."""


class _TextEnvClient(_core.EnvClient):  # type: ignore[name-defined]
    """OpenEnv's client specialised to :mod:`aem_envs.remote.protocol`'s messages."""

    async def _send(self, message: dict[str, Any]) -> None:
        # A server refusing a session (at capacity) says why and closes at once, maybe
        # before this send: the reason is still the next message to read, and OpenEnv's
        # _send_and_receive reads it next (a connection closed silently raises there).
        with contextlib.suppress(_exceptions.ConnectionClosed):
            await super()._send(message)

    def _step_payload(self, action: str) -> dict[str, Any]:
        return {"text": action}

    def _parse_result(self, payload: dict[str, Any]) -> Any:
        observation = TextObservation(
            **payload.get("observation", {}),
            reward=payload.get("reward"),
            done=payload.get("done", False),
        )
        return _client_types.StepResult(observation, observation.reward, observation.done)

    def _parse_state(self, payload: dict[str, Any]) -> TextEnvState:
        return TextEnvState.model_validate(payload)


class RemoteEnv(gym.Env[str, str]):
    """A Gymnasium env whose episodes run on an ``aem serve`` server at ``url``.

    ``url`` is the server's base address (``http://host:port`` or ``ws://host:port``).
    ``message_timeout_s`` bounds the wait for one reply (an SWE step may run tests).
    Actions must be ``str`` (a local aem env treats others as invalid actions; here they
    raise, as they cannot cross the wire as text).
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"]}  # noqa: RUF012

    def __init__(
        self,
        url: str,
        *,
        connect_timeout_s: float = 30.0,
        message_timeout_s: float = 600.0,
        render_mode: str | None = None,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ArgumentError(f"render_mode={render_mode!r} is not supported; use 'ansi'")
        self.render_mode = render_mode
        self.url = url
        self._client = _TextEnvClient(
            base_url=url, connect_timeout_s=connect_timeout_s, message_timeout_s=message_timeout_s
        ).sync()
        self._closed = False
        self._last_text = ""
        try:
            state: TextEnvState = self._call(self._client.state)
        except BaseException:
            self.close()
            raise
        self.remote_id = state.env_id
        self.observation_space = space_from_spec(state.observation_space)
        self.action_space = space_from_spec(state.action_space)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        self._check_open("reset")
        super().reset(seed=seed)
        data = {k: v for k, v in (("seed", seed), ("options", options)) if v is not None}
        result = self._call(self._client.reset, **data)
        self._last_text = result.observation.text
        return result.observation.text, result.observation.info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._check_open("step")
        if not isinstance(action, str):
            raise ArgumentError(
                f"{self.remote_id} over aem/Remote-v0 takes str actions, got "
                f"{type(action).__name__}"
            )
        obs: TextObservation = self._call(self._client.step, action).observation
        self._last_text = obs.text
        return obs.text, float(obs.reward or 0.0), obs.terminated, obs.truncated, obs.info

    def render(self) -> str | None:
        return self._last_text

    def close(self) -> None:
        """End the session: the server closes its env. Safe to call more than once."""
        if not self._closed:
            self._closed = True
            # Best effort by design: the server closes the env when the connection drops.
            with contextlib.suppress(OSError, RuntimeError, _exceptions.WebSocketException):
                self._client.close()
        super().close()

    def _check_open(self, method: str) -> None:
        if self._closed:
            raise EnvClosedError(f"{method}() on a closed aem/Remote-v0 env; make a new one")

    def _call(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``method(...)`` with the client's errors turned into one-line aem errors."""
        try:
            return method(*args, **kwargs)
        except ConnectionError as exc:
            raise RemoteEnvError(
                f"cannot reach an aem server at {self.url} ({exc}); start one with "
                "`aem serve ENV_ID --port PORT`"
            ) from exc
        except _exceptions.ConnectionClosed as exc:
            raise RemoteEnvError(
                f"the server at {self.url} closed the session ({exc}); make a new env"
            ) from exc
        except TimeoutError as exc:
            raise RemoteEnvError(
                f"no reply from {self.url} in time; raise message_timeout_s"
            ) from exc
        except RuntimeError as exc:
            # OpenEnv's client raises RuntimeError("Server error: ... (code: ...)").
            raise RemoteEnvError(f"{self.url}: {exc}") from exc
