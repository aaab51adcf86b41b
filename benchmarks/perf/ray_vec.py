"""Ray env workers: steps/s of N Ray actors beside N async processes and one plain env.

For ALFWorld and WebShop, the same seeded run (a random admissible action per sub-env and
step, episodes cut at ``MAX_STEPS``, autoreset) is played through
``aem_envs.vector.make_ray_vec(id, N)`` and ``gym.make_vec(id, N, vectorization_mode="async")``,
and as many steps through one ``gym.make(id)`` in a loop, in one run on the same cores. A text
env's step takes well under a millisecond, so these rows measure what a vector env costs per
step (a Ray actor call against a pipe to a process); Ray pays off where a step is long (a
browser, a container) or where the envs need more machines than one. The start row is Ray's
own start (a local head on loopback) plus making the N actors, against starting N processes.

Run ``python -m benchmarks.perf.ray_vec [--quick]``; ``aem bench perf`` gathers the rows.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from aem_envs.vector import cluster, make_ray_vec
from benchmarks.perf import perf_main, perf_row

BENCHMARK = "ray vec"
ENV_IDS = ("aem/ALFWorld-v0", "aem/WebShop-v0")
NUM_ENVS = 8
MAX_STEPS = 20


def _choose(choices: Any, rng: np.random.Generator) -> str:
    """A random admissible action ("look" where none is listed: the step after an end)."""
    return str(rng.choice(choices)) if choices else "look"


def _vector_rate(envs: gym.vector.VectorEnv, steps: int) -> float:
    """Sub-env steps per second over ``steps`` batch steps of a seeded random run."""
    rng = np.random.default_rng(0)
    _, infos = envs.reset(seed=0)
    tic = time.perf_counter()
    for _ in range(steps):
        actions = tuple(_choose(c, rng) for c in infos["admissible_actions"])
        *_, infos = envs.step(actions)
    return envs.num_envs * steps / (time.perf_counter() - tic)


def _single_rate(env_id: str, steps: int) -> float:
    """Steps per second of one env played alone, resetting after each episode's end."""
    env = gym.make(f"aem_envs:{env_id}", max_episode_steps=MAX_STEPS)
    rng = np.random.default_rng(0)
    try:
        _, info = env.reset(seed=0)
        tic = time.perf_counter()
        for _ in range(steps):
            _, _, terminated, truncated, info = env.step(_choose(info["admissible_actions"], rng))
            if terminated or truncated:
                _, info = env.reset()
        return steps / (time.perf_counter() - tic)
    finally:
        env.close()


def _start_and_rate(
    make: Callable[..., gym.vector.VectorEnv], env_id: str, steps: int, **vector: Any
) -> tuple[float, float]:
    """Seconds from ``make`` to its first reset's end (async's processes make their envs
    after the constructor returns), then sub-env steps/s; the env is closed after."""
    tic = time.perf_counter()
    envs = make(env_id, NUM_ENVS, max_episode_steps=MAX_STEPS, **vector)
    try:
        envs.reset(seed=0)
        start = time.perf_counter() - tic
        return start, _vector_rate(envs, steps)
    finally:
        envs.close()


def measure(quick: bool = False) -> list[dict[str, Any]]:
    """Rows per env id: Ray steps/s vs async and vs one env; and the start of each."""
    steps = 50 if quick else 300
    tic = time.perf_counter()
    cluster.connect(None)
    ray_start = time.perf_counter() - tic
    rows = []
    try:
        for env_id in ENV_IDS:
            ours_start, ray_rate = _start_and_rate(make_ray_vec, env_id, steps)
            theirs_start, async_rate = _start_and_rate(
                gym.make_vec, f"aem_envs:{env_id}", steps, vectorization_mode="async"
            )
            single = _single_rate(env_id, NUM_ENVS * steps)
            note = (
                f"{env_id}, {steps} batch steps × {NUM_ENVS} envs of a seeded random run, "
                f"episodes ≤ {MAX_STEPS} steps; one env alone: {single:,.0f} steps/s; "
                f"{os.cpu_count()} cores, 0.25 CPU per actor"
            )
            name = env_id.split("/")[1].removesuffix("-v0")
            for metric, baseline in (
                (f"{name} steps/s, {NUM_ENVS} actors vs {NUM_ENVS} async", async_rate),
                (f"{name} steps/s, {NUM_ENVS} actors vs 1 env", single),
            ):
                rows.append(
                    perf_row(
                        BENCHMARK, metric, ray_rate, baseline, "steps/s", note,
                        ratio=ray_rate / baseline,
                    )
                )  # fmt: skip
            start_note = (
                f"making {NUM_ENVS} {env_id} actors and a reset (Ray's local head, started once "
                f"before: "
                f"{ray_start:.1f} s); baseline: gym.make_vec async, {NUM_ENVS} processes, a reset"
            )
            rows.append(
                perf_row(BENCHMARK, f"{name} start", ours_start, theirs_start, "s", start_note)
            )
    finally:
        cluster.ray_module().shutdown()
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    return perf_main(measure, __doc__, "50 batch steps instead of 300", argv)


if __name__ == "__main__":
    raise SystemExit(main())
