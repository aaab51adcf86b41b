"""The wrapper: replies parsed into actions, and the invalid path for bad replies."""

from __future__ import annotations

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aem_envs.wrappers import LLMActionWrapper, ReplyFormat
from tests.fixtures.corridor import FIXTURE_ID, CorridorEnv, register_fixture


def test_wrapper_steps_parsed_actions_and_penalises_bad_replies() -> None:
    env = LLMActionWrapper(CorridorEnv())
    env.reset(seed=0)
    obs, reward, _, _, info = env.step("<think>hm</think><action>look</action>")
    assert info["action_valid"] and info["parsed_action"] == "look" and info["think"] == "hm"
    obs, reward, _, _, info = env.step("just chatting")
    assert not info["action_valid"] and reward == pytest.approx(-0.1)
    assert "no <action>" in obs and info["parsed_action"] is None


@settings(max_examples=50, deadline=None)
@given(reply=st.text(max_size=300))
def test_any_reply_is_a_step_never_an_exception(reply: str) -> None:
    env = LLMActionWrapper(CorridorEnv())
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(reply)
    assert isinstance(obs, str) and "action_valid" in info


def test_wrapper_records_its_constructor_arguments() -> None:
    register_fixture()
    reply_format = ReplyFormat(require_think=True)
    env = LLMActionWrapper(gym.make(FIXTURE_ID), reply_format=reply_format)
    recorded = env.spec.additional_wrappers[-1]
    assert recorded.name == "LLMActionWrapper"
    assert recorded.kwargs == {"reply_format": reply_format}
    again = gym.make(env.spec)
    assert isinstance(again, LLMActionWrapper) and again.reply_format == reply_format
    again.close()
    env.close()


def test_wrapper_reads_the_reply_format_it_is_given() -> None:
    env = LLMActionWrapper(CorridorEnv(), ReplyFormat(action_tag="act"))
    env.reset(seed=0)
    _, _, _, _, info = env.step("<act>look</act>")
    assert info["action_valid"] and info["parsed_action"] == "look"
    obs, _, _, _, info = env.step("<action>look</action>")
    assert not info["action_valid"] and "no <act>...</act>" in obs
