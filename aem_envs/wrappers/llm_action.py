"""Turn a free-form LLM reply into an environment action.

The envs take plain action strings so that non-LLM agents can use them; this wrapper is
where the reply format lives: ``<think>…</think>`` (optional) then ``<action>…</action>``,
or a tool-call JSON object. A reply with no action is an invalid action, never an exception.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import gymnasium as gym


@dataclass(frozen=True)
class ParsedReply:
    """The parts of a reply; ``action`` is None when the reply holds no usable action."""

    action: str | None
    think: str | None
    error: str | None = None


@dataclass(frozen=True)
class ReplyParser:
    """Parses replies of the form ``<think>…</think><action>…</action>``.

    ``require_think`` makes a reply without a think block invalid (some recipes reward the
    format); ``allow_json`` also accepts ``{"action": "..."}`` or a tool call
    ``{"name": ..., "arguments": {"action": "..."}}``; ``last`` takes the last action tag
    when a reply holds several (the model's final answer) instead of rejecting it.
    """

    action_tag: str = "action"
    think_tag: str = "think"
    require_think: bool = False
    allow_json: bool = True
    last: bool = True
    max_action_length: int = 4096

    def _blocks(self, tag: str, reply: str) -> list[str]:
        pattern = re.compile(rf"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>", re.DOTALL | re.I)
        return [m.strip() for m in pattern.findall(reply)]

    def parse(self, reply: str) -> ParsedReply:
        if not isinstance(reply, str):
            return ParsedReply(None, None, f"the reply must be text, got {type(reply).__name__}")
        thinks = self._blocks(self.think_tag, reply)
        think = thinks[0] if thinks else None
        if self.require_think and think is None:
            return ParsedReply(None, None, f"the reply has no <{self.think_tag}> block")
        actions = self._blocks(self.action_tag, reply)
        if not actions and self.allow_json:
            json_action = _json_action(reply, self.action_tag)
            actions = [json_action] if json_action is not None else []
        if not actions:
            return ParsedReply(
                None,
                think,
                f"no <{self.action_tag}>...</{self.action_tag}> found in the reply; "
                f"answer with <{self.action_tag}>your action</{self.action_tag}>",
            )
        if len(actions) > 1 and not self.last:
            return ParsedReply(None, think, f"the reply holds {len(actions)} actions; give one")
        action = actions[-1]
        if not action:
            return ParsedReply(None, think, f"the <{self.action_tag}> block is empty")
        if len(action) > self.max_action_length:
            return ParsedReply(None, think, f"the action is longer than {self.max_action_length}")
        return ParsedReply(action, think)


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


class LLMActionWrapper(gym.Wrapper[str, str, str, str], gym.utils.RecordConstructorArgs):
    """Accepts raw model replies as actions; adds ``parsed_action``/``think`` to ``info``.

    A reply without a valid action takes the env's invalid-action path (penalty, step
    count, step limit) through ``reject`` (:meth:`aem_envs.TextEnv.reject`), looked up with
    ``get_wrapper_attr`` so that a wrapper between this one and the env that defines
    ``reject`` itself (:class:`~aem_envs.wrappers.TrajectoryRecorder`) sees the rejection.

    Example::

        >>> import gymnasium as gym
        >>> import aem_envs
        >>> from aem_envs.wrappers import LLMActionWrapper
        >>> env = LLMActionWrapper(gym.make("aem_envs:aem/ALFWorld-v0"))
        >>> _ = env.reset(seed=0)
        >>> _, reward, _, _, info = env.step("I would look around.")
        >>> info["action_valid"], info["parsed_action"], reward
        (False, None, -0.1)
    """

    def __init__(self, env: gym.Env[str, str], parser: ReplyParser | None = None) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, parser=parser)
        gym.Wrapper.__init__(self, env)
        self.parser = parser or ReplyParser()
        if not hasattr(env.unwrapped, "reject"):
            raise TypeError("LLMActionWrapper needs an aem environment (aem_envs.TextEnv)")

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        parsed = self.parser.parse(action)
        if parsed.action is None:
            reject = self.env.get_wrapper_attr("reject")
            obs, reward, terminated, truncated, info = reject(f"Invalid action: {parsed.error}.")
        else:
            obs, reward, terminated, truncated, info = self.env.step(parsed.action)
        info = {**info, "parsed_action": parsed.action, "think": parsed.think}
        return obs, reward, terminated, truncated, info
