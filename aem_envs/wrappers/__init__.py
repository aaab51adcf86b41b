"""Wrappers that adapt aem environments to LLM agents without changing the envs."""

from aem_envs.wrappers.llm_action import LLMActionWrapper, ParsedReply, ReplyParser
from aem_envs.wrappers.recorder import TrajectoryRecorder, read_trajectory

__all__ = [
    "LLMActionWrapper",
    "ParsedReply",
    "ReplyParser",
    "TrajectoryRecorder",
    "read_trajectory",
]
