"""Wrappers that adapt aem environments to LLM agents without changing the envs."""

from aem_envs.reply import REPLY_FORMAT, ParsedReply, ReplyFormat
from aem_envs.wrappers.llm_action import LLMActionWrapper
from aem_envs.wrappers.recorder import TrajectoryRecorder, read_trajectory

__all__ = [
    "REPLY_FORMAT",
    "LLMActionWrapper",
    "ParsedReply",
    "ReplyFormat",
    "TrajectoryRecorder",
    "read_trajectory",
]
