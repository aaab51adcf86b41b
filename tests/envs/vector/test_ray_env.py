"""``make_ray_env``: one env in a Ray actor behaves as the same env made here, wrappers and
``unwrapped`` attributes included; a dead actor fails one call, and the next reset recovers."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import gymnasium as gym
import pytest

from aem_envs.core.errors import ArgumentError
from aem_envs.policies import ExpertPolicy, RandomPolicy
from aem_envs.vector import RayActorFailed, RayConnectError, make_ray_env
from aem_envs.vector.cluster import check_address
from aem_envs.wrappers import LLMActionWrapper

pytestmark = pytest.mark.ray


def _play(env: gym.Env) -> list[Any]:
    """A seeded episode with a rejected reply, the expert's moves and the env's attributes."""
    wrapped = LLMActionWrapper(env)
    seen: list[Any] = [wrapped.reset(seed=3), env.unwrapped.max_steps, env.spec.id]
    seen.append(wrapped.step("no action in this reply"))
    for _ in range(3):
        seen.append(env.unwrapped.admissible_actions)
        seen.append(wrapped.step(f"<action>{env.unwrapped.expert_action()}</action>"))
    return seen


def test_an_episode_equals_the_local_envs(ray_cluster: ModuleType) -> None:
    local = gym.make("aem_envs:aem/ALFWorld-v0", max_steps=6)
    remote = make_ray_env("aem_envs:aem/ALFWorld-v0", max_steps=6)
    try:
        assert remote.observation_space == local.observation_space
        assert remote.metadata == local.metadata
        mine, theirs = _play(remote), _play(local)
        assert mine == theirs
        assert mine[3][4]["action_valid"] is False  # the rejection went through `reject`
        with pytest.raises(ArgumentError, match="split='nope' does not exist"):
            remote.reset(seed=0, options={"split": "nope"})  # the env's own error, as itself
        with pytest.raises(AttributeError, match="has no attribute 'nope'"):
            _ = remote.unwrapped.nope
    finally:
        remote.close()
        local.close()


def test_a_killed_actor_fails_the_step_and_the_next_reset_starts_a_fresh_one(
    kill_actor: Callable[[Any], None],
) -> None:
    env = make_ray_env("aem/ALFWorld-v0")
    try:
        first, _ = env.reset(seed=1)
        killed = env.actor
        kill_actor(killed)
        with pytest.raises(RayActorFailed, match="step failed in the Ray actor of aem/ALFWorld"):
            env.step("look")
        assert env.actor is None
        again, _ = env.reset(seed=1)
        assert again == first and env.actor is not killed
    finally:
        env.close()
    assert env.actor is None
    env.close()  # twice is fine


@pytest.mark.parametrize(
    ("address", "message"),
    [
        ("127.0.0.1:1", r"no Ray cluster answers at '127\.0\.0\.1:1' \(.*\); start a head there"),
        ("ray://127.0.0.1:1", r"no Ray cluster answers at 'ray://127\.0\.0\.1:1'"),
        ("nowhere", r"'nowhere' is not 'local', 'auto', 'HOST:PORT' or 'ray://HOST:PORT'"),
    ],
)
def test_a_bad_address_is_one_line_naming_the_fix(address: str, message: str) -> None:
    """Checked before ``ray.init`` sees it, which would retry for minutes."""
    with pytest.raises(RayConnectError, match=message) as caught:
        check_address(address)
    assert "\n" not in str(caught.value) and "`ray start --head`" in str(caught.value)


def test_the_env_policies_play_an_env_in_an_actor_as_a_local_one(
    ray_cluster: ModuleType,
) -> None:
    """They read the env through ``get_wrapper_attr``, which the proxy forwards."""
    local = LLMActionWrapper(gym.make("aem_envs:aem/ALFWorld-v0", max_steps=6))
    remote = LLMActionWrapper(make_ray_env("aem_envs:aem/ALFWorld-v0", max_steps=6))
    try:
        played = []
        for env in (remote, local):
            env.reset(seed=2)
            expert, random = ExpertPolicy(), RandomPolicy(seed=0)
            played.append([(expert.act(env), random.act(env)) for _ in range(2)])
        assert played[0] == played[1]
    finally:
        remote.close()
        local.close()
