"""Many SWE envs at once, in worker processes, under the host-wide sandbox bound."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from sandboxes.docker_engine import client_session
from sandboxes.owner import LABEL_PREFIX

N = 8


@pytest.mark.docker
@pytest.mark.slow
def test_eight_async_envs_play_the_bundled_tasks_to_the_end(docker_engine: None) -> None:
    envs = gym.make_vec(
        "aem_envs:aem/SWE-v0", num_envs=N, vectorization_mode="async", backend="docker"
    )
    workers = [process.pid for process in envs.processes]
    graded = np.zeros(N, dtype=bool)
    ended = np.zeros(N, dtype=bool)
    won = np.zeros(N, dtype=bool)
    errors: list[object] = []
    try:
        envs.reset(seed=list(range(N)))
        for _ in range(10):
            _, _, terminated, truncated, info = envs.step(envs.call("expert_action"))
            if "infra_error" in info:
                errors += list(info["infra_error"][info["_infra_error"]])
            done = (terminated | truncated) & ~ended
            graded[done] = info.get("_eval_seconds", np.zeros(N, dtype=bool))[done]
            won[done] = info["won"][done]
            ended |= done
            if ended.all():
                break
    finally:
        envs.close()
    # Every episode ended graded, none on an engine error, and every gold patch resolved: a
    # command's output lost under load (an empty diff, a log without the guard's verdict)
    # would show here as an unresolved gold episode.
    assert errors == [] and ended.all() and graded.all() and won.all(), (errors, graded, won)
    with client_session() as client:
        for pid in workers:
            label = f"{LABEL_PREFIX}.owner.pid={pid}"
            assert client.containers.list(all=True, filters={"label": label}) == []
