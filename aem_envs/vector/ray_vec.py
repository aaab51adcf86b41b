"""A Gymnasium vector env whose sub-envs are Ray actors, one env per actor.

Why Ray: it is what verl-agent and SkyRL run env workers on, so the actors can sit on other
machines of a cluster (``ray_address``) with resources of their own (``actor_options``),
while the training loop sees a plain ``gymnasium.vector.VectorEnv``.

Same contract as ``gym.make_vec(env_id, n, vectorization_mode="async")``: next-step
autoreset, seeds ``seed + i`` for an int seed, ``options["reset_mask"]``, info dicts stacked
with their ``_key`` masks, the observations of a text space as a tuple of strings (a tests
compares full seeded runs of both). One addition: a sub-env whose actor dies (or does not
answer within ``call_timeout_s``) mid-episode is replaced by a fresh actor, and its step is
reported as a failed episode instead of an exception: ``truncated`` true, reward 0, the
previous observation, and ``info["actor_failed"]`` true with ``info["actor_error"]`` saying
why. Its next step, like any step after an episode's end, resets the fresh env (unseeded).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from aem_envs.core.errors import ArgumentError
from aem_envs.registration import resolve_env_id
from aem_envs.vector import cluster


class RayVectorEnv(VectorEnv):
    """``num_envs`` copies of ``env_id``, each in its own Ray actor; see the module docstring."""

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        *,
        env_kwargs: dict[str, Any] | None = None,
        actor_options: dict[str, Any] | None = None,
        ray_address: str | None = None,
        call_timeout_s: float = cluster.DEFAULT_CALL_TIMEOUT_S,
    ) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ArgumentError(f"num_envs must be a positive integer, got {num_envs!r}")
        if call_timeout_s <= 0:
            raise ArgumentError(f"call_timeout_s must be positive, got {call_timeout_s!r}")
        self.env_id = resolve_env_id(env_id)
        self.env_kwargs = dict(env_kwargs or {})
        self.actor_options = dict(actor_options or {})
        self.call_timeout_s = float(call_timeout_s)
        self.num_envs = num_envs
        self._ray = cluster.ray_module()
        self._actors: list[Any] = []
        self._owns_ray = cluster.connect(ray_address)
        try:
            self._actors = [self._spawn() for _ in range(num_envs)]
            first = self._strict([actor.describe.remote() for actor in self._actors], "make")[0]
        except BaseException:
            self.close()
            raise
        self.single_observation_space = first["observation_space"]
        self.single_action_space = first["action_space"]
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.metadata = {**first["metadata"], "autoreset_mode": AutoresetMode.NEXT_STEP}
        self.render_mode = first["render_mode"]
        self.spec = copy.deepcopy(gym.spec(self.env_id.split(":", 1)[-1]))
        self.spec.kwargs = {**self.spec.kwargs, **self.env_kwargs, "num_envs": num_envs}
        self._observations: list[Any] = [None] * num_envs
        #: Sub-envs whose actor was replaced mid-episode: their next step is a reset.
        self._fresh = [False] * num_envs

    @property
    def actors(self) -> tuple[Any, ...]:
        """The live actor handles, one per sub-env (to read their logs, or kill one in a test)."""
        return tuple(self._actors)

    # ------------------------------------------------------------------ Gymnasium API
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        seeds = self._seeds(seed)
        options = dict(options) if options is not None else None
        mask = self._reset_mask(options.pop("reset_mask", None) if options else None)
        chosen = [i for i in range(self.num_envs) if mask[i]]
        refs = [self._actors[i].reset.remote(seeds[i], options) for i in chosen]
        infos: dict[str, Any] = {}
        for i, result in zip(chosen, self._results(refs), strict=True):
            if isinstance(result, BaseException):  # no episode to fail: one more try
                self._replace(i)
                result = self._strict([self._actors[i].reset.remote(seeds[i], options)], "reset")
                result = result[0]
            self._observations[i], info = result
            self._fresh[i] = False
            infos = self._add_info(infos, info, i)
        return self._batch(), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        actions = list(iterate(self.action_space, actions))
        if len(actions) != self.num_envs:
            raise ArgumentError(f"step() needs {self.num_envs} actions, got {len(actions)}")
        refs = [
            actor.reset.remote(None, None) if fresh else actor.step.remote(action)
            for actor, fresh, action in zip(self._actors, self._fresh, actions, strict=True)
        ]
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=np.bool_)
        truncations = np.zeros(self.num_envs, dtype=np.bool_)
        infos: dict[str, Any] = {}
        for i, result in enumerate(self._results(refs)):
            if isinstance(result, BaseException):
                self._replace(i)
                self._fresh[i] = True
                truncations[i] = True
                info = {"actor_failed": True, "actor_error": self._failure_line(result)}
            elif self._fresh[i]:
                self._observations[i], info = result
                self._fresh[i] = False
            else:
                self._observations[i], rewards[i], terminations[i], truncations[i], info = result
            infos = self._add_info(infos, info, i)
        return self._batch(), rewards, terminations, truncations, infos

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Each sub-env's attribute ``name``, called with the arguments when callable."""
        refs = [actor.call.remote(name, args, kwargs) for actor in self._actors]
        return tuple(self._strict(refs, f"call {name!r}"))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return self.call(name)

    def set_attr(self, name: str, values: Any) -> None:
        """Set ``name`` on every sub-env: one value each (a list or tuple) or the same one."""
        if not isinstance(values, list | tuple):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ArgumentError(f"set_attr needs {self.num_envs} values, got {len(values)}")
        refs = [a.set_attr.remote(name, v) for a, v in zip(self._actors, values, strict=True)]
        self._strict(refs, f"set {name!r}")

    def close_extras(self, **kwargs: Any) -> None:
        """Close every env in its actor (bounded wait), kill the actors, and stop Ray if this
        env started it."""
        cluster.close_all(self._actors, self.call_timeout_s)
        self._actors = []
        if self._owns_ray:
            self._ray.shutdown()
            self._owns_ray = False

    # ------------------------------------------------------------------ internals
    def _spawn(self) -> Any:
        return cluster.spawn(self.env_id, self.env_kwargs, self.actor_options, autoreset=True)

    def _results(self, refs: list[Any]) -> list[Any]:
        return cluster.results(refs, self.call_timeout_s)

    def _failure_line(self, exc: BaseException) -> str:
        return cluster.failure_line(exc, self.call_timeout_s)

    def _strict(self, refs: list[Any], what: str) -> list[Any]:
        """Like :meth:`_results`, where an actor failure has no episode to fail: it raises."""
        return cluster.strict(
            refs, self.call_timeout_s, f"{what} failed in a Ray actor of {self.env_id}"
        )

    def _replace(self, index: int) -> None:
        """A fresh actor in slot ``index``, ready before the batch goes on (a broken env
        that cannot be made again raises here rather than failing every later step)."""
        cluster.kill(self._actors[index])
        self._actors[index] = self._spawn()
        self._strict([self._actors[index].describe.remote()], "remake")

    def _batch(self) -> Any:
        """A fresh batch of the last observations, shaped as ``AsyncVectorEnv`` returns it (a
        tuple of strings for a text space, an array for a box)."""
        space = self.single_observation_space
        empty: Any = create_empty_array(space, self.num_envs)  # None for a text space
        return concatenate(space, self._observations, empty)

    def _seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, int | np.integer):
            return [int(seed) + i for i in range(self.num_envs)]
        seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ArgumentError(f"reset() needs {self.num_envs} seeds, got {len(seeds)}")
        return seeds

    def _reset_mask(self, mask: Any) -> np.ndarray:
        if mask is None:
            return np.ones(self.num_envs, dtype=np.bool_)
        if not isinstance(mask, np.ndarray) or mask.shape != (self.num_envs,):
            raise ArgumentError(f"options['reset_mask'] must be a ({self.num_envs},) array")
        if mask.dtype != np.bool_ or not mask.any():
            raise ArgumentError("options['reset_mask'] must be booleans, at least one true")
        return mask


def make_ray_vec(
    env_id: str,
    num_envs: int,
    ray_address: str | None = None,
    *,
    actor_options: dict[str, Any] | None = None,
    call_timeout_s: float = cluster.DEFAULT_CALL_TIMEOUT_S,
    **env_kwargs: Any,
) -> RayVectorEnv:
    """``num_envs`` copies of ``env_id`` in Ray actors, as ``gym.make_vec(..., "async")``
    makes them in processes; ``env_kwargs`` go to each ``gym.make``.

    ``ray_address=None`` (or ``"local"``) starts a local Ray on loopback (shut down by
    ``close()``) unless this process is connected already; ``actor_options`` go to each actor's
    ``.options(...)`` (default ``{"num_cpus": 0.25}``).
    """
    return RayVectorEnv(
        env_id,
        num_envs,
        env_kwargs=env_kwargs,
        actor_options=actor_options,
        ray_address=ray_address,
        call_timeout_s=call_timeout_s,
    )
