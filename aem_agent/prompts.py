"""Chat prompts for LLM agents: one layout, filled in with what each env says of itself.

The layout follows the published agentic-RL setups (verl-agent / GiGPO): the task, a window
of the most recent (observation, action) pairs, the current observation, the admissible
actions where the env lists them, and the reply format's think and action tags
(:data:`aem_envs.reply.REPLY_FORMAT`, which the env wrapper parses with). Only a window of
history is shown because the prompt must stay short for small models and bounded over
50-step episodes; the step count still tells the model how far along it is. Who the agent
is, what an action looks like, an example reply and an optional memory come from the env's
:class:`~aem_envs.core.brief.AgentBrief` (:func:`aem_envs.registration.agent_brief`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from aem_envs.core.brief import AgentBrief
from aem_envs.core.errors import AEMError
from aem_envs.registration import agent_brief
from aem_envs.reply import REPLY_FORMAT

if TYPE_CHECKING:  # the policies import this module; a runtime import would be circular
    from aem_agent.policies.base import PolicyInput

#: Old observations in the history window are clipped to this many characters (head and
#: tail kept) so that one long page or command output cannot crowd out the current step.
HISTORY_OBSERVATION_CHARS = 512
#: A compact prompt's current observation is clipped to this many characters.
COMPACT_OBSERVATION_CHARS = 1024

#: Beside a trained checkpoint: the prompt settings it was trained with (see
#: :func:`read_prompt_layout`), so a policy plays it with the prompts it learnt on.
PROMPT_FILE = "aem-prompt.json"
#: The keys of :data:`PROMPT_FILE` a policy applies.
PROMPT_KEYS = (
    "history_window",
    "reply_prefix",
    "system_prompt",
    "max_turn_tokens",
    "prompt_style",
)

#: How a step's prompt is laid out: ``full`` (the published agentic-RL layout: task, history
#: window, observation, admissible actions, reply format and an example) or ``compact`` (the
#: same facts in a few lines for small models: see :func:`compact_user_prompt`).
PromptStyle = Literal["full", "compact"]
PROMPT_STYLES: tuple[PromptStyle, ...] = get_args(PromptStyle)


@dataclass
class PromptSettings:
    """What a policy's turns look like, shared by RL (``AEMConfig``) and SFT (``SFTSettings``).

    Why one definition: a model warm-started by ``aem sft`` is only ready for ``aem train``
    if both build the same contexts, so both take these settings from here, with the same
    names, defaults and help.
    """

    max_turns: int = field(default=50, metadata={"help": "Episode step limit (the paper: 50)."})
    max_turn_tokens: int = field(
        default=256, metadata={"help": "Most new tokens the policy may generate in one turn."}
    )
    history_window: int = field(
        default=2,
        metadata={"help": "Earlier (observation, action) pairs shown in a prompt (step layout)."},
    )
    reply_prefix: str | None = field(
        default=None,
        metadata={
            "help": "Text pre-filled at the start of every reply (default: none); "
            f"'{REPLY_FORMAT.action_open}' gets very small models (SmolLM2-135M) to answer "
            "with actions."
        },
    )
    prompt_style: PromptStyle = field(
        default="full",
        metadata={
            "help": "Prompt layout: 'full' (task, history window, observation, admissible "
            "actions, reply format with an example) or 'compact' (a few lines: task, what the "
            "agent has learnt so far, observation, actions; about a third of the tokens)."
        },
    )

    def prompt_record(self) -> dict[str, Any]:
        """The settings :data:`PROMPT_FILE` records for a model trained with these (the
        trainers add what only they know: the layout, a system prompt, a think block)."""
        return {
            "history_window": self.history_window,
            "prompt_style": self.prompt_style,
            "reply_prefix": self.reply_prefix or "",
            "max_turn_tokens": self.max_turn_tokens,
        }


#: What every full prompt asks of the reply, in the tags of the reply format.
REPLY_INSTRUCTIONS = (
    "First reason step by step about the current situation inside "
    f"{REPLY_FORMAT.think_open} {REPLY_FORMAT.think_close} tags. "
    f"Then give exactly one action inside {REPLY_FORMAT.action_open} "
    f"{REPLY_FORMAT.action_close} tags."
)


def clip_middle(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, keeping its head and tail."""
    if len(text) <= limit:
        return text
    marker = " [...] "
    head = max(0, (limit - len(marker)) // 2)
    tail = max(0, limit - len(marker) - head)
    return text[:head] + marker + (text[-tail:] if tail else "")


def _history_block(history: list[tuple[str, str]], window: int) -> str:
    shown = history[-window:] if window > 0 else []
    if not shown:
        return ""
    first = len(history) - len(shown) + 1
    lines = [
        f"[Step {first + i}] Observation: {clip_middle(obs, HISTORY_OBSERVATION_CHARS)}\n"
        f"Action: {action}"
        for i, (obs, action) in enumerate(shown)
    ]
    return (
        f"Before this step you took {len(history)} step(s). "
        f"The most recent {len(shown)} observation(s) and your action(s):\n"
        + "\n".join(lines)
        + "\n\n"
    )


def user_prompt(inp: PolicyInput, *, history_window: int = 5) -> str:
    """The user turn for one step: task, history window, observation, actions, format."""
    brief = agent_brief(inp.env_id)
    step = len(inp.history) + 1
    parts = [f"Your task is to: {inp.instruction}\n\n", _history_block(inp.history, history_window)]
    parts.append(f"You are now at step {step}. Current observation:\n{inp.observation}\n\n")
    parts.append(admissible_block(inp.admissible_actions))
    parts.append(
        f"Now it is your turn. {brief.action_hint} {REPLY_INSTRUCTIONS}\n"
        f"Example reply: {REPLY_FORMAT.format(brief.example_action, brief.example_think)}"
    )
    return "".join(parts)


COMPACT_SYSTEM = (
    "You act in a text environment. Reply with one action in "
    f"{REPLY_FORMAT.action_open}{REPLY_FORMAT.action_close}."
)


def compact_user_prompt(inp: PolicyInput, *, history_window: int = 1) -> str:
    """The ``compact`` user turn: task, what the agent has learnt, the last actions, the
    observation and the actions to choose from, without the full layout's instructions.

    Why: a small model pays for every prompt token three times in an RL step (sampling, the
    old-policy and the training forward) and learns from a few hundred examples only what the
    prompt makes plain. Where the env's brief has a memory, its lines state what the agent
    has seen over the whole episode, which a window of recent steps would forget (and the
    brief picks the actions worth listing beside them). The last ``history_window`` actions
    are listed (``Did: ...``) without their observations, and the current observation is
    clipped to :data:`COMPACT_OBSERVATION_CHARS`.
    """
    brief = agent_brief(inp.env_id)
    lines = [f"Task: {inp.instruction}"]
    actions = inp.admissible_actions
    if brief.memory is not None:
        lines += brief.memory(inp.instruction, inp.history, inp.observation)
    if brief.shown_actions is not None and actions is not None:
        actions = brief.shown_actions(actions)
    shown = inp.history[-history_window:] if history_window > 0 else []
    for _obs, action in shown:
        lines.append(f"Did: {action}")
    lines.append(f"Now: {_compact_observation(inp, brief)}")
    if actions is not None:
        lines.append(f"Actions: {' | '.join(actions) if actions else '(go somewhere)'}")
    return "\n".join(lines)


def _compact_observation(inp: PolicyInput, brief: AgentBrief) -> str:
    """The current observation, or the brief's opening in place of the first one."""
    if brief.opening is not None and not inp.history:
        return brief.opening
    return clip_middle(inp.observation.strip(), COMPACT_OBSERVATION_CHARS)


def observation_prompt(inp: PolicyInput) -> str:
    """The user turn after a reply inside one trajectory: only what is new at this step.

    Why not :func:`user_prompt` again: the task, the reply format and the example are already
    in the trajectory's first prompt; repeated every turn, they made up most of each
    observation segment, and so of the sequence a trajectory-layout forward pays for
    (``docs/aem.md`` has the measurement).
    """
    step = len(inp.history) + 1
    return f"Step {step}. Observation:\n{inp.observation}\n\n" + admissible_block(
        inp.admissible_actions
    )


def admissible_block(actions: Sequence[str] | None) -> str:
    """The listing of the admissible actions every prompt shows (empty for an open space)."""
    if actions is None:
        return ""
    listed = "\n".join(f"- {action}" for action in actions)
    return f"Admissible actions now:\n{listed}\n\n"


def build_messages(
    inp: PolicyInput,
    *,
    history_window: int = 5,
    system_prompt: str | None = None,
    style: PromptStyle = "full",
) -> list[dict[str, str]]:
    """Chat messages (system + user) asking for the next action of one episode.

    ``history_window`` is how many recent (observation, action) pairs are shown (0: none);
    ``system_prompt`` replaces the style's system text; ``style`` picks the layout
    (:data:`PromptStyle`).
    """
    if history_window < 0:
        raise AEMError(f"history_window must be 0 or more, got {history_window}")
    if style not in PROMPT_STYLES:
        raise AEMError(f"prompt style {style!r} is unknown; choose one of {list(PROMPT_STYLES)}")
    if style == "compact":
        system = COMPACT_SYSTEM if system_prompt is None else system_prompt
        user = compact_user_prompt(inp, history_window=history_window)
    else:
        system = agent_brief(inp.env_id).role if system_prompt is None else system_prompt
        user = user_prompt(inp, history_window=history_window)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def write_prompt_layout(directory: str | os.PathLike[str], layout: dict[str, Any]) -> Path:
    """Write :data:`PROMPT_FILE` (atomically) into a checkpoint directory."""
    from aem_envs.core.io import atomic_write_json

    unknown = sorted(set(layout) - set(PROMPT_KEYS) - {"layout", "think"})
    if unknown:
        raise AEMError(f"prompt layout keys {unknown} are unknown; known: {list(PROMPT_KEYS)}")
    return atomic_write_json(Path(directory) / PROMPT_FILE, layout)


def read_prompt_layout(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """The prompt settings a checkpoint was trained with ({} for a checkpoint without them)."""
    path = Path(directory) / PROMPT_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise AEMError(f"{path} is not valid JSON ({exc}); delete it or rewrite it") from exc
    if not isinstance(data, dict):
        raise AEMError(f"{path} must hold a JSON object of prompt settings")
    return {k: data[k] for k in PROMPT_KEYS if data.get(k) is not None}
