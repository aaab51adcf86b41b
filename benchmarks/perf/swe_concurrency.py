"""SWE episodes at concurrency: N async envs (worker processes) under the host's sandbox slots.

For N = 1, 2, 4, 8, 16 envs of ``gym.make_vec("aem_envs:aem/SWE-v0", num_envs=N,
vectorization_mode="async")`` (Docker backend), each env plays the gold patch through the
env's own actions on the bundled tasks until the batch has finished ``max(4, N)`` episodes.
Each row gives episodes per minute beside the same measurement at N = 1, run in the same
session (``ratio`` = ours ÷ N = 1: the speed-up from concurrency), and in its note the
vector step's latency (p50 / p95, one step of all N envs), the episodes that ended on an
infrastructure error (an engine error would show there) and the containers left behind.
Timing starts at the first reset: worker start-up (imports) is not counted.
Run ``python -m benchmarks.perf.swe_concurrency [--quick]``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

from benchmarks.perf import perf_main, perf_row

BENCHMARK = "swe concurrency"
SIZES = (1, 2, 4, 8, 16)
QUICK_SIZES = (1, 2, 4)


def play(num_envs: int, episodes: int) -> dict[str, Any]:
    """Play ``episodes`` gold episodes on ``num_envs`` async envs; timings and what went wrong."""
    import gymnasium as gym
    import numpy as np

    from sandboxes.docker_engine import client_session
    from sandboxes.owner import LABEL_PREFIX

    envs = gym.make_vec(
        "aem_envs:aem/SWE-v0", num_envs=num_envs, vectorization_mode="async", backend="docker"
    )
    assert isinstance(envs, gym.vector.AsyncVectorEnv)
    workers = [process.pid for process in envs.processes]
    latencies: list[float] = []
    finished = won = infra_errors = 0
    grading = 0.0
    unresolved: list[str] = []
    try:
        start = time.perf_counter()
        envs.reset(seed=list(range(num_envs)))
        while finished < episodes:
            tic = time.perf_counter()
            _, _, terminated, truncated, info = envs.step(envs.call("expert_action"))
            latencies.append(time.perf_counter() - tic)
            done = terminated | truncated
            finished += int(done.sum())
            won += int((info["won"] & done).sum())
            unresolved += [str(task) for task in info["task_id"][done & ~info["won"]]]
            if "eval_seconds" in info:
                grading = max(grading, float(info["eval_seconds"][done].max(initial=0.0)))
            infra_errors += int(np.sum(info.get("_infra_error", np.zeros(num_envs, bool))))
        seconds = time.perf_counter() - start
    finally:
        envs.close()
    with client_session() as client:
        left = sum(
            len(
                client.containers.list(
                    all=True, filters={"label": f"{LABEL_PREFIX}.owner.pid={pid}"}
                )
            )
            for pid in workers
        )
    latencies.sort()
    return {
        "per_minute": finished / seconds * 60,
        "p50": statistics.median(latencies),
        "p95": latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))],
        "finished": finished,
        "won": won,
        "infra_errors": infra_errors,
        "grading": grading,
        "unresolved": unresolved,
        "left": left,
    }


def measure(quick: bool = False) -> list[dict[str, Any]]:
    """Rows for ``aem bench perf``; ``quick`` stops at N = 4."""
    from aem_envs.swe.env import SWEEnv
    from sandboxes.slots import slot_count

    env = SWEEnv(backend="docker")
    try:  # build every bundled image first: building is not what is measured
        for instance in env.instances().values():
            env.image_for(instance)
    finally:
        env.close()
    runs = {n: play(n, max(4, n)) for n in (QUICK_SIZES if quick else SIZES)}
    base = runs[1]["per_minute"]
    rows = []
    for n, run in runs.items():
        note = (
            f"vector step p50 {run['p50']:.2f} s, p95 {run['p95']:.2f} s, longest grading "
            f"{run['grading']:.1f} s; "
            f"{run['won']}/{run['finished']} resolved"
            + (f" (not: {', '.join(run['unresolved'])})" if run["unresolved"] else "")
            + f", {run['infra_errors']} infra errors, "
            f"{run['left']} containers left; {slot_count()} sandbox slots; baseline: N = 1"
        )
        rows.append(
            perf_row(
                BENCHMARK,
                f"{n} async envs: gold episodes / min",
                run["per_minute"],
                base,
                "ep/min",
                note,
                ratio=run["per_minute"] / base,
                digits=2,
            )
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    return perf_main(measure, __doc__, "N = 1, 2, 4 only", argv)


if __name__ == "__main__":
    raise SystemExit(main())
