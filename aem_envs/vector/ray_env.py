"""One env in a Ray actor, played through a local ``gymnasium.Env``: :func:`make_ray_env`.

Why a single-env proxy beside :class:`~aem_envs.vector.RayVectorEnv`: the rollout of
``aem train`` and the episode driver of ``aem bench`` keep pools of single envs and wrap
each one locally (the reply parser, the trajectory recorder, which writes on this machine),
so they need an env that *is* a ``gym.Env`` while its engine, browser or container runs in an
actor, on this machine or on another node of a Ray cluster. The actor is the vector env's
(:class:`~aem_envs.vector.worker.EnvWorker`, without autoreset: the caller resets).

The proxy's reset, step and close are the env's own; any other public attribute is looked
up in the actor, through the env's wrappers as ``get_wrapper_attr`` does, so ``unwrapped``
code keeps working (``env.unwrapped.admissible_actions``, ``expert_action()``, ``reject``):
a plain value comes back as a copy, a method becomes a local function that calls it there.
An actor that dies or does not answer within ``call_timeout_s`` raises
:class:`~aem_envs.vector.cluster.RayActorFailed` (the caller's episode fails, as with a
local env that crashed); the next reset starts a fresh actor.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym

from aem_envs.core.errors import ArgumentError
from aem_envs.vector import cluster


class RayEnv(gym.Env[Any, Any]):
    """``gym.make(env_id, **env_kwargs)`` in a Ray actor; see the module docstring."""

    def __init__(
        self,
        env_id: str,
        *,
        env_kwargs: dict[str, Any] | None = None,
        actor_options: dict[str, Any] | None = None,
        ray_address: str | None = None,
        call_timeout_s: float = cluster.DEFAULT_CALL_TIMEOUT_S,
    ) -> None:
        if call_timeout_s <= 0:
            raise ArgumentError(f"call_timeout_s must be positive, got {call_timeout_s!r}")
        self._actor: Any = None
        self._owns_ray = False
        #: Attribute names known to be methods in the actor: one round trip fewer each call.
        self._methods: set[str] = set()
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self.actor_options = dict(actor_options or {})
        self.call_timeout_s = float(call_timeout_s)
        self._owns_ray = cluster.connect(ray_address)
        try:
            first = self._start()
        except BaseException:
            self.close()
            raise
        self.observation_space = first["observation_space"]
        self.action_space = first["action_space"]
        self.metadata = first["metadata"]
        self.render_mode = first["render_mode"]
        self.spec = first["spec"]

    @property
    def actor(self) -> Any:
        """The live actor handle (None after a failure until the next reset, or after close)."""
        return self._actor

    # ------------------------------------------------------------------ Gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        if self._actor is None:
            self._start()
        try:
            return self._get(self._actor.reset.remote(seed, options), "reset")
        except cluster.RayActorFailed:  # no episode to fail yet: one more try on a fresh actor
            self._start()
            return self._get(self._actor.reset.remote(seed, options), "reset")

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        return self._get(self._live().step.remote(action), "step")

    def render(self) -> Any:
        return self._call("render")

    def close(self) -> None:
        """Close the env in its actor (bounded wait), kill the actor, and stop Ray if this env
        started it. Twice is fine."""
        if self._actor is not None:
            cluster.close_all([self._actor], self.call_timeout_s)
            self._actor = None
        if self._owns_ray:
            cluster.ray_module().shutdown()
            self._owns_ray = False

    def set_wrapper_attr(self, name: str, value: Any, *, force: bool = True) -> bool:
        """Set ``name`` on the env in the actor (through its wrappers)."""
        self._get(self._live().set_attr.remote(name, value), f"set {name!r}")
        return True

    def __getattr__(self, name: str) -> Any:
        """A public attribute of the env in the actor (only reached when the proxy has none)."""
        if name.startswith("_") or self.__dict__.get("_actor") is None:
            raise AttributeError(name)
        if name not in self._methods:
            kind, value = self._get(self._actor.lookup.remote(name), f"get {name!r}")
            if kind == "missing":
                raise AttributeError(f"{self.env_id} (in a Ray actor) has no attribute {name!r}")
            if kind == "value":
                return value
            self._methods.add(name)
        return functools.partial(self._call, name)

    # ------------------------------------------------------------------ internals
    def _start(self) -> dict[str, Any]:
        """A fresh actor in place of the old one (killed); what it describes."""
        if self._actor is not None:
            cluster.kill(self._actor)
        self._actor = cluster.spawn(
            self.env_id, self.env_kwargs, self.actor_options, autoreset=False
        )
        description: dict[str, Any] = self._get(self._actor.describe.remote(), "make")
        return description

    def _live(self) -> Any:
        if self._actor is None:
            raise cluster.RayActorFailed(
                f"the Ray actor of {self.env_id} failed or was closed; reset() starts a new one"
            )
        return self._actor

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self._get(self._live().call.remote(name, args, kwargs), f"call {name!r}")

    def _get(self, ref: Any, what: str) -> Any:
        """The value of one call; an actor failure kills the actor and raises."""
        try:
            return cluster.strict(
                [ref], self.call_timeout_s, f"{what} failed in the Ray actor of {self.env_id}"
            )[0]
        except cluster.RayActorFailed:
            if self._actor is not None:
                cluster.kill(self._actor)
                self._actor = None
            raise


def make_ray_env(
    env_id: str,
    ray_address: str | None = None,
    *,
    actor_options: dict[str, Any] | None = None,
    call_timeout_s: float = cluster.DEFAULT_CALL_TIMEOUT_S,
    **env_kwargs: Any,
) -> RayEnv:
    """``gym.make(env_id, **env_kwargs)`` in a Ray actor, as a local ``gym.Env``.

    ``env_id`` is what ``gym.make`` takes (the actor imports ``aem_envs`` first, and a
    ``module:`` prefix there). ``ray_address`` as for :func:`~aem_envs.vector.make_ray_vec`:
    ``None`` or ``"local"`` starts a local Ray on loopback (stopped by ``close()``) unless
    this process is connected already.
    """
    return RayEnv(
        env_id,
        env_kwargs=env_kwargs,
        actor_options=actor_options,
        ray_address=ray_address,
        call_timeout_s=call_timeout_s,
    )
