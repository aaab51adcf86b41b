"""TextEnv's contract mechanics on the corridor fixture: rewards, limits, invalid actions."""

from __future__ import annotations

import pytest
from gymnasium.error import ResetNeeded

from aem_envs import RewardScheme
from aem_envs.core.outcome import Outcome
from tests.fixtures.corridor import CorridorEnv


def _play_expert(env: CorridorEnv) -> tuple[float, dict]:
    total, done, info = 0.0, False, {}
    while not done:
        _, reward, terminated, truncated, info = env.step(env.expert_action())
        total += reward
        done = terminated or truncated
    return total, info


def test_expert_win_pays_the_paper_reward_and_terminates() -> None:
    env = CorridorEnv()
    env.reset(seed=0)
    total, info = _play_expert(env)
    assert info["won"] and info["score"] == 1.0
    assert total == pytest.approx(10.0)


def test_invalid_action_is_penalised_never_raised_and_explained() -> None:
    env = CorridorEnv()
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("fly to the moon")
    assert obs == "Nothing happens." and reward == pytest.approx(-0.1)
    assert not info["action_valid"] and not terminated and not truncated
    obs, reward, *_ = env.step(123)  # type: ignore[arg-type]
    assert "expected a string" in obs and reward == pytest.approx(-0.1)


def test_step_limit_truncates_with_failure_reward() -> None:
    env = CorridorEnv(max_steps=3)
    env.reset(seed=0)
    results = [env.step("look") for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True]
    assert not any(r[2] for r in results)
    obs, reward, terminated, truncated, info = env.step("look")
    assert "episode is over" in obs and reward == 0.0 and not info["action_valid"]


def test_end_reason_names_what_ended_the_episode() -> None:
    env = CorridorEnv(max_steps=3)
    env.reset(seed=0)
    _, _, _, _, info = env.step("look")
    assert "end_reason" not in info  # only the last step carries it
    env.step("look")
    *_, terminated, truncated, info = env.step("look")
    assert (terminated, truncated, info["end_reason"]) == (False, True, "step_limit")
    assert env.step("look")[4]["end_reason"] == "step_limit"  # the after-end step repeats it
    env = CorridorEnv()
    env.reset(seed=0)
    assert _play_expert(env)[1]["end_reason"] == "done"


class _GradedCorridor(CorridorEnv):
    """A corridor that grades its state at the step limit, as SWE grades the working tree."""

    def _grade_at_limit(self) -> Outcome:
        return Outcome("Graded at the limit.", done=True, won=True, score=1.0)


def test_an_episode_graded_at_the_limit_is_terminated_and_truncated_with_its_reward() -> None:
    env = _GradedCorridor(max_steps=2)
    env.reset(seed=0)
    env.step("look")
    obs, reward, terminated, truncated, info = env.step("look")
    assert terminated and truncated and info["end_reason"] == "step_limit_graded"
    assert reward == pytest.approx(10.0) and info["won"] and "Graded at the limit." in obs
    assert env.step("look")[2:4] == (True, True)


def test_native_scheme_pays_the_score_and_custom_schemes_validate() -> None:
    env = CorridorEnv(reward_scheme="native")
    env.reset(seed=0)
    assert _play_expert(env)[0] == pytest.approx(1.0)
    scheme = RewardScheme.coerce({"success": 1.0, "invalid_action": -1.0})
    assert scheme.reward(valid=False, done=False, won=False, score=0.0) == -1.0
    with pytest.raises(ValueError, match="unknown reward_scheme keys"):
        RewardScheme.coerce({"bonus": 3})
    with pytest.raises(ValueError, match="not understood"):
        CorridorEnv(reward_scheme="generous")


def test_reject_counts_as_an_invalid_step() -> None:
    env = CorridorEnv(max_steps=2)
    env.reset(seed=0)
    obs, reward, _, truncated, info = env.reject("no action tag")
    assert obs == "no action tag" and reward == pytest.approx(-0.1) and info["step"] == 1
    assert env.reject("again")[3] is True and not truncated


def test_step_before_reset_and_bad_options_fail_clearly() -> None:
    env = CorridorEnv()
    with pytest.raises(ResetNeeded):
        env.step("look")
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"difficulty": "hard"})
    with pytest.raises(ValueError, match="max_steps"):
        CorridorEnv(max_steps=0)


def test_long_observations_are_clipped_into_the_space() -> None:
    env = CorridorEnv()
    env.reset(seed=0)
    clipped = env._clip("a" * 10_000)
    assert len(clipped) == env.max_observation_length
    assert "characters clipped" in clipped
    assert env.observation_space.contains(clipped)
