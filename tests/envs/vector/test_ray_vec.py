"""``make_ray_vec``: the same run as ``gym.make_vec(..., "async")``, a killed or stuck actor
replaced with the batch going on, and nothing left after ``close()``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
import psutil
import pytest

from aem_envs.core.errors import AEMError, ArgumentError, MissingDependencyError
from aem_envs.registration import entry_by_id
from aem_envs.vector import RayVectorEnv, make_ray_vec

pytestmark = pytest.mark.ray

#: The ids whose envs start in about a second (SWE needs a container, the browser Chromium).
CHEAP_IDS = [entry_by_id("aem/ALFWorld-v0").id, entry_by_id("aem/WebShop-v0").id]
#: Short episodes, so a run of STEPS crosses several autoresets.
MAX_STEPS = 3
STEPS = 8


def _same_infos(ours: dict[str, Any], theirs: dict[str, Any], where: str) -> None:
    assert sorted(ours) == sorted(theirs), where
    for key, value in theirs.items():
        if isinstance(value, dict):
            _same_infos(ours[key], value, f"{where}.{key}")
        else:
            assert ours[key].dtype == value.dtype, f"{where}.{key}"
            assert ours[key].tolist() == value.tolist(), f"{where}.{key}"


def _actions(infos: dict[str, Any], rng: np.random.Generator) -> tuple[str, ...]:
    """A random admissible action per sub-env ("look" where none is listed: an episode end)."""
    return tuple(str(rng.choice(c)) if c else "look" for c in infos["admissible_actions"])


def _pids(ray: ModuleType, env: RayVectorEnv) -> list[int]:
    return [d["pid"] for d in ray.get([a.describe.remote() for a in env.actors])]


@pytest.mark.parametrize("env_id", CHEAP_IDS)
def test_a_seeded_run_equals_the_async_vector_env(ray_cluster: ModuleType, env_id: str) -> None:
    theirs = gym.make_vec(
        f"aem_envs:{env_id}", 2, vectorization_mode="async", max_episode_steps=MAX_STEPS
    )
    ours = make_ray_vec(env_id, 2, max_episode_steps=MAX_STEPS)
    try:
        assert ours.single_observation_space == theirs.single_observation_space
        assert ours.single_action_space == theirs.single_action_space
        assert ours.metadata == theirs.metadata
        first, second = ours.reset(seed=7), theirs.reset(seed=7)
        assert tuple(first[0]) == tuple(second[0])
        _same_infos(first[1], second[1], "reset")
        rng, infos, ended = np.random.default_rng(0), second[1], 0
        for step in range(STEPS):
            actions = _actions(infos, rng)
            mine, (obs, rewards, terminated, truncated, infos) = (
                ours.step(actions),
                theirs.step(actions),
            )
            assert tuple(mine[0]) == tuple(obs), step
            for got, want in zip(mine[1:4], (rewards, terminated, truncated), strict=True):
                np.testing.assert_array_equal(got, want)
                assert got.dtype == want.dtype
            _same_infos(mine[4], infos, f"step {step}")
            ended += int((terminated | truncated).sum())
        assert ended >= 2  # the run crossed autoresets
        mask = {"reset_mask": np.array([False, True])}
        first, second = (
            ours.reset(seed=[None, 3], options=mask),
            theirs.reset(seed=[None, 3], options=dict(mask)),
        )
        assert tuple(first[0]) == tuple(second[0])
        _same_infos(first[1], second[1], "masked reset")
    finally:
        ours.close()
        theirs.close()


def test_a_killed_actor_is_replaced_and_its_episode_reported_failed(
    kill_actor: Callable[[Any], None],
) -> None:
    env = make_ray_vec("aem/ALFWorld-v0", 2)
    try:
        obs, infos = env.reset(seed=1)
        obs, *_, infos = env.step(("look", "look"))
        killed = env.actors[0]
        kill_actor(killed)
        after, rewards, terminated, truncated, infos = env.step(("look", "look"))
        assert env.actors[0] is not killed
        assert truncated.tolist() == [True, False] and not terminated.any()
        assert infos["actor_failed"].tolist() == [True, False]
        assert infos["_actor_failed"].tolist() == [True, False]
        assert "killed by `ray.kill`" in infos["actor_error"][0]
        assert after[0] == obs[0] and rewards[0] == 0.0
        assert infos["step"][1] == 2 and infos["_step"].tolist() == [False, True]
        # The next step starts a fresh episode on the new actor, as after any episode end.
        fresh, rewards, terminated, truncated, infos = env.step(("look", "look"))
        assert infos["step"].tolist() == [0, 3] and not (terminated | truncated).any()
        assert "Welcome" in fresh[0] and "actor_failed" not in infos
    finally:
        env.close()


def test_a_stuck_actor_times_out_and_the_batch_goes_on(ray_cluster: ModuleType) -> None:
    env = make_ray_vec("aem/ALFWorld-v0", 2, call_timeout_s=5)
    try:
        env.reset(seed=1)
        stuck = env.actors[1]
        ray_cluster.get(stuck.set_attr.remote("step", lambda action: time.sleep(120)))
        tic = time.monotonic()
        _, _, _, truncated, infos = env.step(("look", "look"))
        assert time.monotonic() - tic < 60  # did not wait for the stuck call
        assert truncated.tolist() == [False, True]
        assert "no reply within call_timeout_s=5 s" in infos["actor_error"][1]
        assert env.actors[1] is not stuck
        *_, infos = env.step(("look", "look"))
        assert infos["step"].tolist() == [2, 0]
    finally:
        env.close()


def test_close_ends_every_actor_and_its_env(ray_cluster: ModuleType) -> None:
    env = make_ray_vec("aem/WebShop-v0", 2, actor_options={"num_cpus": 0.5})
    pids = _pids(ray_cluster, env)
    env.reset(seed=0)
    env.close()
    _, alive = psutil.wait_procs([psutil.Process(pid) for pid in pids], timeout=30)
    assert not alive
    assert env.closed and env.actors == ()
    env.close()  # twice is fine


def test_without_an_address_it_starts_ray_and_close_stops_it(tmp_path) -> None:
    """In a fresh interpreter (this one's Ray is the session's): no Ray process survives."""
    script = textwrap.dedent(
        """
        import psutil, ray
        from aem_envs.vector import make_ray_vec
        from sandboxes.lifetime import is_keeper
        env = make_ray_vec("aem/ALFWorld-v0", 1)
        env.reset(seed=0)
        # the lifetime keeper lives as long as this process, by design
        started = [p for p in psutil.Process().children(recursive=True) if not is_keeper(p.pid)]
        env.close()
        assert not ray.is_initialized()
        _, alive = psutil.wait_procs(started, timeout=30)
        print("left:", [p.name() for p in alive])
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "left: []" in proc.stdout


def test_bad_input_names_the_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ArgumentError, match="num_envs must be a positive integer, got 0"):
        make_ray_vec("aem/ALFWorld-v0", 0)
    with pytest.raises(AEMError, match="unknown environment id 'aem/Nope-v0'"):
        make_ray_vec("aem/Nope-v0", 2)
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'aem\[scale\]'"):
        make_ray_vec("aem/ALFWorld-v0", 2)
