"""The environment contract, checked on every registered id (as MiniGrid's suite does).

Each id is exercised through ``gym.make`` exactly as a user would call it. The test-only
corridor env runs the suite even where no real environment is installed.
"""

from __future__ import annotations

import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aem_envs.core.base import INFO_KEYS
from aem_envs.policies import RandomPolicy
from aem_envs.registration import landed_entries
from tests.fixtures.corridor import FIXTURE_ID

ENV_PARAMS = [pytest.param(FIXTURE_ID, id=FIXTURE_ID)] + [
    pytest.param(
        f"aem_envs:{item.id}",
        id=item.id,
        marks=[getattr(pytest.mark, r) for r in item.resources],
    )
    for item in landed_entries()
]
ROLLOUT_STEPS = 4


@pytest.fixture(scope="session", autouse=True)
def _register_fixture_env() -> None:
    if FIXTURE_ID not in gym.registry:
        gym.register(FIXTURE_ID, entry_point="tests.fixtures.corridor:CorridorEnv")


def _make(env_id: str, **kwargs) -> gym.Env:
    return gym.make(env_id, **kwargs)


def _assert_step_contract(env: gym.Env, result: tuple) -> None:
    obs, reward, terminated, truncated, info = result
    assert env.observation_space.contains(obs), f"observation outside the space: {obs!r:.200}"
    assert isinstance(reward, float)
    assert isinstance(terminated, bool) and isinstance(truncated, bool)
    missing = [key for key in INFO_KEYS if key not in info]
    assert not missing, f"info lacks {missing}"
    assert 0.0 <= info["score"] <= 1.0
    assert info["admissible_actions"] is None or all(
        isinstance(a, str) for a in info["admissible_actions"]
    )


def _rollout(env: gym.Env, seed: int, steps: int = ROLLOUT_STEPS) -> tuple[list[str], list]:
    """Play ``steps`` random admissible actions; return the actions and everything seen."""
    policy = RandomPolicy(seed=seed)
    obs, info = env.reset(seed=seed)
    seen: list = [(obs, info["task_id"])]
    actions = []
    for _ in range(steps):
        action = policy.act(env)
        actions.append(action)
        obs, reward, terminated, truncated, info = env.step(action)
        seen.append((obs, reward, terminated, truncated, info["won"], info["action_valid"]))
        if terminated or truncated:
            break
    return actions, seen


@pytest.mark.parametrize("env_id", ENV_PARAMS)
def test_check_env_passes_without_warnings(env_id: str) -> None:
    env = _make(env_id)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            check_env(env.unwrapped, skip_render_check=False)
    finally:
        env.close()


@pytest.mark.parametrize("env_id", ENV_PARAMS)
def test_reset_info_and_spaces(env_id: str) -> None:
    env = _make(env_id)
    try:
        obs, info = env.reset(seed=0)
        assert env.observation_space.contains(obs)
        assert not [key for key in INFO_KEYS if key not in info]
        assert info["won"] is False and info["instruction"]
        _assert_step_contract(env, env.step(env.action_space.sample()))
    finally:
        env.close()


@pytest.mark.parametrize("env_id", ENV_PARAMS)
def test_same_seed_gives_same_trajectory(env_id: str) -> None:
    first, second = _make(env_id), _make(env_id)
    try:
        actions, seen = _rollout(first, seed=7)
        obs, info = second.reset(seed=7)
        replay: list = [(obs, info["task_id"])]
        for action in actions:
            obs, reward, terminated, truncated, info = second.step(action)
            replay.append((obs, reward, terminated, truncated, info["won"], info["action_valid"]))
        assert replay == seen
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize("env_id", ENV_PARAMS)
def test_options_pick_task_and_split(env_id: str) -> None:
    env = _make(env_id)
    try:
        base = env.unwrapped
        split = base.splits[-1]
        task_id = base.task_ids(split)[0]
        _, info = env.reset(seed=1, options={"split": split, "task_id": task_id})
        assert info["task_id"] == task_id
        with pytest.raises(ValueError, match="split"):
            env.reset(options={"split": "no-such-split"})
        with pytest.raises(ValueError, match="task_id"):
            env.reset(options={"split": split, "task_id": "no-such-task"})
    finally:
        env.close()


GARBAGE = st.one_of(
    st.text(max_size=200),
    st.just(""),
    st.just("x" * 100_000),
    st.text(alphabet=st.characters(codec=None, categories=["Cc", "Cs", "Co"]), max_size=50),
    st.binary(max_size=64).map(lambda b: b.decode("latin-1")),
)


@pytest.mark.parametrize("env_id", ENV_PARAMS)
def test_garbage_actions_never_raise(env_id: str) -> None:
    env = _make(env_id)
    env.reset(seed=3)

    @settings(
        max_examples=15,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(action=GARBAGE)
    def check(action: str) -> None:
        result = env.step(action)
        _assert_step_contract(env, result)
        if result[2] or result[3]:
            env.reset(seed=3)

    try:
        check()
        _, reward, *_, info = env.step("x" * 100_000)
        assert info["action_valid"] is False and reward <= 0
    finally:
        env.close()


@pytest.mark.parametrize("env_id", ENV_PARAMS)
def test_pickle_round_trip_continues_identically(env_id: str) -> None:
    env = _make(env_id)
    clone = None
    try:
        _rollout(env.unwrapped, seed=11, steps=2)
        clone = pickle.loads(pickle.dumps(env.unwrapped))
        assert clone.task == env.unwrapped.task
        assert clone.admissible_actions == env.unwrapped.admissible_actions
        action = (env.unwrapped.admissible_actions or ["look"])[0]
        assert clone.step(action)[:4] == env.unwrapped.step(action)[:4]
    finally:
        env.close()
        if clone is not None:
            clone.close()


@pytest.mark.parametrize("env_id", ENV_PARAMS)
def test_async_vector_env_matches_sync(env_id: str) -> None:
    """The default async call must carry text observations intact (see TOOLCHAIN.md)."""
    async_env = gym.make_vec(env_id, num_envs=2, vectorization_mode="async")
    sync_env = gym.make_vec(env_id, num_envs=2, vectorization_mode="sync")
    try:
        a_obs, a_info = async_env.reset(seed=[5, 6])
        s_obs, s_info = sync_env.reset(seed=[5, 6])
        assert tuple(a_obs) == tuple(s_obs)
        assert list(a_info["task_id"]) == list(s_info["task_id"])
        assert all(len(o) > 0 for o in a_obs)
        for _ in range(2):
            admissible = s_info["admissible_actions"]
            actions = tuple((choices[0] if choices else "look") for choices in admissible)
            a_obs, a_rew, *_ = async_env.step(actions)
            s_obs, s_rew, _, _, s_info = sync_env.step(actions)
            assert tuple(a_obs) == tuple(s_obs)
            np.testing.assert_array_equal(a_rew, s_rew)
    finally:
        async_env.close()
        sync_env.close()
