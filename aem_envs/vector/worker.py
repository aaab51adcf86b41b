"""The body of one Ray actor: one environment, stepped by calls from the driver.

Why the autoreset lives here and not in the driver: one step is then one round trip, as in
``AsyncVectorEnv``'s worker process, whose next-step autoreset this copies (a step after
the end of an episode resets the env, ignores the action and reports reward 0, both flags
false and the reset's info). The class is plain Python; :mod:`aem_envs.vector.cluster`
wraps it with ``ray.remote`` only when an actor is made, so importing it needs no Ray.
"""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym

#: What a step returns: observation, reward, terminated, truncated, info.
StepResult = tuple[Any, float, bool, bool, dict[str, Any]]


class EnvWorker:
    """``gym.make(env_id, **env_kwargs)``, with next-step autoreset when ``autoreset``.

    Without ``autoreset`` a step is the env's own step (the single-env proxy,
    :class:`aem_envs.vector.ray_env.RayEnv`, whose caller decides when to reset).
    """

    def __init__(self, env_id: str, env_kwargs: dict[str, Any], autoreset: bool) -> None:
        import aem_envs  # noqa: F401  (registers the aem ids in this worker process)

        self.env = gym.make(env_id, **env_kwargs)
        self.autoreset = autoreset
        self._needs_reset = False

    def describe(self) -> dict[str, Any]:
        """What the driver's env copies: spaces, metadata, render mode, spec, process id."""
        return {
            "spec": self.env.spec,
            "observation_space": self.env.observation_space,
            "action_space": self.env.action_space,
            "metadata": dict(self.env.metadata),
            "render_mode": self.env.render_mode,
            "pid": os.getpid(),
        }

    def reset(self, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict]:
        self._needs_reset = False
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> StepResult:
        if self._needs_reset:
            obs, info = self.reset(None, None)
            return obs, 0.0, False, False, info
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._needs_reset = self.autoreset and bool(terminated or truncated)
        return obs, float(reward), bool(terminated), bool(truncated), info

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The env's attribute ``name`` (through wrappers); a method is called with the args."""
        attr = self.env.get_wrapper_attr(name)
        return attr(*args, **kwargs) if callable(attr) else attr

    def lookup(self, name: str) -> tuple[str, Any]:
        """``("value", v)`` for a plain attribute, ``("method", None)`` for a callable one
        (the proxy then calls it through :meth:`call`), ``("missing", None)`` without one."""
        try:
            attr = self.env.get_wrapper_attr(name)
        except AttributeError:
            return "missing", None
        return ("method", None) if callable(attr) else ("value", attr)

    def set_attr(self, name: str, value: Any) -> None:
        self.env.set_wrapper_attr(name, value)

    def close(self) -> None:
        """Close the env (its browser, container or engine goes with it)."""
        self.env.close()
