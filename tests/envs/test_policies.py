"""The env's own agents: they read the env through its wrappers, and name a non-aem env."""

from __future__ import annotations

import gymnasium as gym
import pytest

from aem_envs.policies import POLICIES, ExpertPolicy, RandomPolicy
from aem_envs.wrappers import LLMActionWrapper
from tests.fixtures.corridor import FIXTURE_ID, register_fixture


def test_policies_play_a_wrapped_env_as_the_bare_one() -> None:
    register_fixture()
    wrapped = LLMActionWrapper(gym.make(FIXTURE_ID))
    wrapped.reset(seed=1)
    bare = wrapped.unwrapped
    assert ExpertPolicy().act(wrapped) == bare.expert_action()
    draws = [RandomPolicy(seed=4).act(env) for env in (wrapped, bare)]
    assert draws[0] == draws[1] and draws[0] in bare.admissible_actions
    wrapped.close()


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_a_non_aem_env_is_one_clear_error(name: str) -> None:
    env = gym.make("CartPole-v1")
    with pytest.raises(TypeError, match=r"expected an aem environment .* got CartPoleEnv"):
        POLICIES[name]().act(env)
    env.close()
