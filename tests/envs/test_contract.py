"""The environment contract, checked on every registered id (as MiniGrid's suite does).

Each id is exercised through ``gym.make`` exactly as a user would call it. The test-only
corridor env runs the suite even where no real environment is installed.
"""

from __future__ import annotations

import importlib
import inspect
import pickle
import re
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aem_cli.envs import task_listing
from aem_envs.core.errors import ArgumentError, EnvClosedError
from aem_envs.core.outcome import INFO_KEYS
from aem_envs.policies import ExpertPolicy, RandomPolicy
from aem_envs.registration import ENTRIES, EnvEntry, entry
from tests.fixtures.corridor import FIXTURE_ID, register_fixture

ENV_PARAMS = [pytest.param(FIXTURE_ID, id=FIXTURE_ID)] + [
    pytest.param(
        f"aem_envs:{item.id}",
        id=item.id,
        marks=[getattr(pytest.mark, r) for r in item.resources],
    )
    for item in ENTRIES
]
ROLLOUT_STEPS = 4


@pytest.fixture(scope="session", autouse=True)
def _register_fixture_env() -> None:
    register_fixture()


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
    """The default async call must carry text observations intact (see docs/envs.md)."""
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


# ------------------------------------------------------------------ episode semantics
#: Never a valid command of any env (a shell runs it and reports "command not found").
NO_OP = "?"


def _assert_outcome_repeats(env: gym.Env, final: tuple) -> None:
    """Steps after the end run nothing: same flags and outcome, zero reward."""
    _, _, terminated, truncated, info = final
    for _ in range(2):
        obs, reward, again_term, again_trunc, again = env.step(NO_OP)
        assert (again_term, again_trunc) == (terminated, truncated)
        assert reward == 0.0 and "episode is over" in obs
        assert (again["won"], again["score"], again["task_id"]) == (
            info["won"],
            info["score"],
            info["task_id"],
        )
        assert again["action_valid"] is False


@pytest.mark.parametrize("env_id", ENV_PARAMS)
def test_steps_after_the_end_repeat_the_outcome(env_id: str) -> None:
    env = _make(env_id, max_episode_steps=2)
    try:
        env.reset(seed=0)
        env.step(NO_OP)
        final = env.step(NO_OP)
        graded = final[4]["end_reason"] == "step_limit_graded"  # SWE grades at the limit
        assert final[3] and final[2] == graded
        _assert_outcome_repeats(env, final)
        env.reset(seed=0)
        policy, final = ExpertPolicy(), None
        for _ in range(2):
            final = env.step(policy.act(env))
            if final[2] or final[3]:
                break
        _assert_outcome_repeats(env, final)
    finally:
        env.close()


@pytest.mark.parametrize("env_id", ENV_PARAMS)
def test_max_episode_steps_is_the_one_step_limit(env_id: str) -> None:
    """gym.make's limit holds exactly, above the env's own default as well as below it."""
    default = gym.spec(env_id.split(":", 1)[-1]).make().unwrapped.default_max_steps
    for limit in (default + 2, 1):
        env = _make(env_id, max_episode_steps=limit)
        try:
            assert env.unwrapped.max_steps == limit
            env.reset(seed=0)
            flags = [env.step(NO_OP)[2:4] for _ in range(limit)]
            assert flags[-1][1] and not any(trunc for _, trunc in flags[:-1])
        finally:
            env.close()
    with pytest.raises(ArgumentError, match="disagree"):
        _make(env_id, max_steps=3, max_episode_steps=4)


@pytest.mark.parametrize("env_id", ENV_PARAMS)
def test_reset_without_a_split_uses_the_training_split(env_id: str) -> None:
    env = _make(env_id)
    try:
        base = env.unwrapped
        expected = "train" if "train" in base.splits else base.splits[0]
        assert base.default_split() == expected
        ids = set(base.task_ids(expected))
        assert all(env.reset(seed=seed)[1]["task_id"] in ids for seed in range(3))
    finally:
        env.close()


@pytest.mark.parametrize("env_id", ENV_PARAMS)
def test_a_closed_env_says_so(env_id: str) -> None:
    env = _make(env_id)
    env.reset(seed=0)
    env.close()
    for call in (lambda: env.step(NO_OP), lambda: env.reset(seed=0)):
        with pytest.raises(EnvClosedError) as caught:
            call()
        message = str(caught.value)
        assert "\n" not in message and "closed" in message and "gym.make(" in message


# ------------------------------------------------------------------ bad input, one line each
def _one_line(error: pytest.ExceptionInfo, *needles: str) -> str:
    message = str(error.value)
    assert "\n" not in message, message
    for needle in needles:
        assert needle in message, (needle, message)
    return message


@pytest.mark.parametrize("env_id", ENV_PARAMS)
def test_bad_reset_options_and_limits_are_one_line(env_id: str) -> None:
    env = _make(env_id)
    try:
        for options in ("train", ["split"], 3):
            with pytest.raises(ArgumentError) as caught:
                env.reset(options=options)
            _one_line(caught, "options must be a dict", "options={'split'")
        with pytest.raises(ArgumentError) as caught:
            env.reset(options={"level": 3})
        _one_line(caught, "'level'", "supported: task_id, split")
    finally:
        env.close()
    for value in ("x", 2.5, True, 0):
        with pytest.raises(ArgumentError) as caught:
            _make(env_id, max_steps=value)
        _one_line(caught, f"max_steps={value!r}", "positive int")


@pytest.mark.parametrize("env_id", ENV_PARAMS)
def test_an_unknown_task_id_names_the_command_that_lists_them(env_id: str) -> None:
    env = _make(env_id)
    try:
        base = env.unwrapped
        split = base.default_split()
        with pytest.raises(ArgumentError) as caught:
            env.reset(options={"split": split, "task_id": "no-such-task"})
        bare = env_id.split(":", 1)[-1]
        _one_line(caught, "'no-such-task'", f"`aem envs {bare} --tasks --split {split}`")
        item = entry(bare)
        if item is not None:  # the command lists exactly the split's ids
            listed = [task_id for _, task_id in task_listing(item, split)]
            assert listed == list(base.task_ids(split))
        here = set(base.task_ids(split))
        elsewhere = [
            (other, task_id)
            for other in base.splits
            if other != split
            for task_id in base.task_ids(other)
            if task_id not in here
        ]
        if elsewhere:  # an id of another split: the message says which split holds it
            other, task_id = elsewhere[0]
            with pytest.raises(ArgumentError) as caught:
                env.reset(options={"split": split, "task_id": task_id})
            _one_line(caught, f"is in split {other!r}", f"'split': {other!r}")
    finally:
        env.close()


#: The files every env package has, one per role (docs/envs.md, "Package layout").
ROLE_FILES = (
    "__init__.py", "env.py", "tasks.py", "grading.py", "expert.py", "generate/__main__.py", "data",
)  # fmt: skip
#: MiniGrid's docstring headings, in its order, as every env class's docstring has them.
DOC_HEADINGS = (
    "Description", "Action space", "Observation", "Rewards", "Termination", "Registered ids",
)  # fmt: skip
ENTRY_PARAMS = [pytest.param(item, id=item.id) for item in ENTRIES]


def _package_folder(item: EnvEntry) -> Path:
    package = importlib.import_module(item.module.rpartition(".")[0])
    assert package.__file__ is not None
    return Path(package.__file__).parent


@pytest.mark.parametrize("item", ENTRY_PARAMS)
def test_every_env_package_has_the_role_files_and_exports_its_class(item: EnvEntry) -> None:
    folder = _package_folder(item)
    assert [name for name in ROLE_FILES if not (folder / name).exists()] == []
    package = importlib.import_module(item.module.rpartition(".")[0])
    assert getattr(package, item.entry_point.split(":")[1]) is item.env_class()


@pytest.mark.parametrize("item", ENTRY_PARAMS)
def test_every_env_docstring_has_minigrids_headings(item: EnvEntry) -> None:
    doc = inspect.getdoc(item.env_class()) or ""
    assert tuple(re.findall(r"^## (.+)$", doc, re.MULTILINE)) == DOC_HEADINGS
    assert f"``{item.id}``" in doc.split("## Registered ids")[1]
