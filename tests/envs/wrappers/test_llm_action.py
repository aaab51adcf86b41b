"""Parsing free-form LLM replies into actions, and the invalid path for bad replies."""

from __future__ import annotations

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aem_envs.wrappers import LLMActionWrapper, ReplyParser
from tests.fixtures.corridor import FIXTURE_ID, CorridorEnv, register_fixture


@pytest.mark.parametrize(
    ("reply", "action", "think"),
    [
        ("<think>go</think><action>go east</action>", "go east", "go"),
        ("<ACTION> look </ACTION>", "look", None),
        ("<action>a</action> then <action>b</action>", "b", None),
        ('{"action": "look"}', "look", None),
        ('call {"name": "act", "arguments": {"action": "go west"}}', "go west", None),
    ],
)
def test_parser_extracts_action_and_think(reply: str, action: str, think: str | None) -> None:
    parsed = ReplyParser().parse(reply)
    assert (parsed.action, parsed.think, parsed.error) == (action, think, None)


@pytest.mark.parametrize(
    ("parser", "reply", "error"),
    [
        (ReplyParser(), "I would go east.", "no <action>"),
        (ReplyParser(), "<action>  </action>", "empty"),
        (ReplyParser(require_think=True), "<action>look</action>", "no <think>"),
        (ReplyParser(last=False), "<action>a</action><action>b</action>", "2 actions"),
        (ReplyParser(allow_json=False), '{"action": "look"}', "no <action>"),
        (ReplyParser(max_action_length=3), "<action>look</action>", "longer"),
    ],
)
def test_parser_rejects_replies_without_one_usable_action(
    parser: ReplyParser, reply: str, error: str
) -> None:
    parsed = parser.parse(reply)
    assert parsed.action is None and error in parsed.error


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
    parser = ReplyParser(require_think=True)
    env = LLMActionWrapper(gym.make(FIXTURE_ID), parser=parser)
    recorded = env.spec.additional_wrappers[-1]
    assert recorded.name == "LLMActionWrapper" and recorded.kwargs == {"parser": parser}
    again = gym.make(env.spec)
    assert isinstance(again, LLMActionWrapper) and again.parser == parser
    again.close()
    env.close()
