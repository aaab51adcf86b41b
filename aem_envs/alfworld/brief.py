"""What ALFWorld tells an LLM agent about itself (see :mod:`aem_envs.core.brief`).

The compact prompt style shows :mod:`~aem_envs.alfworld.memory`'s lines instead of the
room's place list, lists only the actions that memory does not cover, and opens with a
task-free sentence: the first observation repeats the task and lists every place.
"""

from __future__ import annotations

from aem_envs.alfworld.memory import memory_lines, shown_actions
from aem_envs.core.brief import AgentBrief

BRIEF = AgentBrief(
    role="You are an expert agent acting in a text-based household (ALFWorld).",
    action_hint="Choose one of the admissible actions, written exactly as listed.",
    example_think="What I need may be in a cabinet; check there first.",
    example_action="go to cabinet 1",
    memory=memory_lines,
    shown_actions=shown_actions,
    opening="You are in the middle of the room.",
)
