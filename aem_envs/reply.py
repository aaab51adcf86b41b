"""The reply format: how an LLM agent's reply carries its action.

A reply is an optional ``<think>…</think>`` block, then ``<action>…</action>``; a tool-call
JSON object (``{"action": ...}`` or ``{"name": ..., "arguments": {"action": ...}}``) is read
too. :data:`REPLY_FORMAT` is the one definition: :class:`~aem_envs.wrappers.LLMActionWrapper`
parses with it, the prompts of :mod:`aem_agent.prompts` spell its tags from it, and the
scripted policies, the SFT demonstrations and the learning harness's warm-up write their
replies with :meth:`ReplyFormat.format`, so the text a model is trained to write is the
text the parser reads by construction. A reply with no usable action parses to an error,
never an exception: the env's invalid-action path handles it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class ParsedReply:
    """The parts of a reply; ``action`` is None when the reply holds no usable action."""

    action: str | None
    think: str | None
    error: str | None = None


@dataclass(frozen=True)
class ReplyFormat:
    """The tags of a reply, how a reply is written and how it is read.

    ``require_think`` makes a reply without a think block invalid (some recipes reward the
    format); ``allow_json`` also accepts ``{"action": "..."}`` or a tool call
    ``{"name": ..., "arguments": {"action": "..."}}``; ``last`` takes the last action tag
    when a reply holds several (the model's final answer) instead of rejecting it. Tags are
    matched case-insensitively and the action and think texts are stripped.
    """

    action_tag: str = "action"
    think_tag: str = "think"
    require_think: bool = False
    allow_json: bool = True
    last: bool = True
    max_action_length: int = 4096

    @property
    def action_open(self) -> str:
        return f"<{self.action_tag}>"

    @property
    def action_close(self) -> str:
        return f"</{self.action_tag}>"

    @property
    def think_open(self) -> str:
        return f"<{self.think_tag}>"

    @property
    def think_close(self) -> str:
        return f"</{self.think_tag}>"

    def format(self, action: str, think: str | None = None) -> str:
        """The reply that carries ``action``, with ``think`` as its think block if given."""
        reply = f"{self.action_open}{action}{self.action_close}"
        return reply if think is None else f"{self.think_open}{think}{self.think_close}{reply}"

    def action_text(self, reply: str) -> str:
        """The raw text of the first action block, read leniently: without the opening tag
        (a reply whose pre-filled prefix opened it) or the closing one (a cut-off reply)."""
        text = reply.split(self.action_open, 1)[-1]
        return text.split(self.action_close, 1)[0].strip()

    def parse(self, reply: str) -> ParsedReply:
        """The action and think of ``reply``, or why it holds no usable action."""
        if not isinstance(reply, str):
            return ParsedReply(None, None, f"the reply must be text, got {type(reply).__name__}")
        thinks = self._blocks(self.think_tag, reply)
        think = thinks[0] if thinks else None
        if self.require_think and think is None:
            return ParsedReply(None, None, f"the reply has no {self.think_open} block")
        actions = self._blocks(self.action_tag, reply)
        if not actions and self.allow_json:
            json_action = _json_action(reply, self.action_tag)
            actions = [json_action] if json_action is not None else []
        if not actions:
            return ParsedReply(
                None,
                think,
                f"no {self.action_open}...{self.action_close} found in the reply; "
                f"answer with {self.format('your action')}",
            )
        if len(actions) > 1 and not self.last:
            return ParsedReply(None, think, f"the reply holds {len(actions)} actions; give one")
        action = actions[-1]
        if not action:
            return ParsedReply(None, think, f"the {self.action_open} block is empty")
        if len(action) > self.max_action_length:
            return ParsedReply(None, think, f"the action is longer than {self.max_action_length}")
        return ParsedReply(action, think)

    @staticmethod
    def _blocks(tag: str, reply: str) -> list[str]:
        pattern = re.compile(rf"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>", re.DOTALL | re.I)
        return [m.strip() for m in pattern.findall(reply)]


def _json_action(reply: str, key: str) -> str | None:
    """An action from a JSON object in the reply, if there is one."""
    start, end = reply.find("{"), reply.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        obj = json.loads(reply[start : end + 1])
    except json.JSONDecodeError:
        return None
    if isinstance(obj, dict) and isinstance(obj.get("arguments"), dict):
        obj = obj["arguments"]
    value = obj.get(key) if isinstance(obj, dict) else None
    return value.strip() if isinstance(value, str) else None


#: The reply format every part of aem writes and reads.
REPLY_FORMAT = ReplyFormat()
