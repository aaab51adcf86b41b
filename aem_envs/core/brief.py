"""What an environment tells an LLM agent about itself: :class:`AgentBrief`.

Why the env's and not the agent's: the prompts of :mod:`aem_agent.prompts` lay out a turn
the same way for every env (task, history, observation, actions, reply format); what differs
is who the agent is, what an action looks like and, for envs that have one, a memory of the
episode. Each env package states that in its ``brief.py`` and its registration entry points
to it (``EnvEntry.brief``), so adding an env never means editing the agent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: ``memory(instruction, history, observation)``: lines stating what the agent has learnt
#: over the whole episode (``history`` holds the earlier (observation, action) pairs).
Memory = Callable[[str, Sequence[tuple[str, str]], str], list[str]]


@dataclass(frozen=True)
class AgentBrief:
    """The env-specific parts of an LLM agent's prompt.

    ``role`` is the system text (who the agent is), ``action_hint`` says what an action looks
    like, and ``example_think`` with ``example_action`` make one concrete reply in the reply
    format. Why a concrete example: small models copy a placeholder example
    (``...`` as the action) literally, and imitate a real-looking one.

    The rest serves the ``compact`` prompt style, which shows a few lines instead of a window
    of recent steps, and is optional: ``memory`` gives lines stating what the agent has
    learnt over the whole episode (which a window would forget), ``shown_actions`` picks the
    admissible actions worth listing beside that memory, and ``opening`` replaces the first
    observation (when the env's opening text repeats the task or what the memory states).
    """

    role: str
    action_hint: str
    example_think: str
    example_action: str
    memory: Memory | None = None
    shown_actions: Callable[[Sequence[str]], list[str]] | None = None
    opening: str | None = None


#: The brief of an env that gives none (user-registered and test envs).
GENERIC_BRIEF = AgentBrief(
    role="You are an expert agent acting in a text environment.",
    action_hint="Choose the single next action that brings you closest to finishing the task.",
    example_think="I should see what is around me first.",
    example_action="look",
)
