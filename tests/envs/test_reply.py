"""The reply format: what is written is what is parsed, and bad replies give a reason."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aem_envs.reply import REPLY_FORMAT, ReplyFormat


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
def test_parse_extracts_action_and_think(reply: str, action: str, think: str | None) -> None:
    parsed = ReplyFormat().parse(reply)
    assert (parsed.action, parsed.think, parsed.error) == (action, think, None)


@pytest.mark.parametrize(
    ("reply_format", "reply", "error"),
    [
        (ReplyFormat(), "I would go east.", "no <action>"),
        (ReplyFormat(), "<action>  </action>", "empty"),
        (ReplyFormat(require_think=True), "<action>look</action>", "no <think>"),
        (ReplyFormat(last=False), "<action>a</action><action>b</action>", "2 actions"),
        (ReplyFormat(allow_json=False), '{"action": "look"}', "no <action>"),
        (ReplyFormat(max_action_length=3), "<action>look</action>", "longer"),
    ],
)
def test_parse_rejects_replies_without_one_usable_action(
    reply_format: ReplyFormat, reply: str, error: str
) -> None:
    parsed = reply_format.parse(reply)
    assert parsed.action is None and error in parsed.error


def test_format_writes_the_tags_the_parser_reads() -> None:
    assert REPLY_FORMAT.format("go east") == "<action>go east</action>"
    assert REPLY_FORMAT.format("go east", "why") == "<think>why</think><action>go east</action>"
    custom = ReplyFormat(action_tag="act", think_tag="plan")
    assert custom.format("look", "first") == "<plan>first</plan><act>look</act>"
    assert custom.parse(custom.format("look", "first")).action == "look"
    error = REPLY_FORMAT.parse("no tags").error
    assert error is not None and error.endswith("answer with <action>your action</action>")


@given(
    action=st.text(min_size=1, max_size=80).filter(lambda a: a.strip() and "<" not in a),
    think=st.none() | st.text(max_size=80).filter(lambda t: "<" not in t),
)
def test_any_formatted_reply_parses_back(action: str, think: str | None) -> None:
    parsed = ReplyFormat(require_think=think is not None).parse(REPLY_FORMAT.format(action, think))
    assert parsed.action == action.strip()
    assert parsed.think == (None if think is None else think.strip())


@pytest.mark.parametrize(
    ("reply", "text"),
    [
        ("<think>t</think><action>take x</action>", "take x"),
        ("take x</action>", "take x"),  # the opening tag was a pre-filled reply prefix
        ("<action>go to shelf", "go to shelf"),  # cut off before the closing tag
        ("", ""),
    ],
)
def test_action_text_reads_a_reply_without_its_opening_or_closing_tag(
    reply: str, text: str
) -> None:
    assert REPLY_FORMAT.action_text(reply) == text
