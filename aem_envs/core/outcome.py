"""What an env and the base class exchange: the :class:`Task` an episode is about, the
:class:`Outcome` of each action, and the ``info`` keys and end reasons every step reports.

Why apart from :mod:`aem_envs.core.base`: these are the contract's vocabulary, read by every
env and by the contract tests, without the machinery of :class:`~aem_envs.core.base.TextEnv`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Keys every ``info`` carries, on ``reset`` and on every step.
INFO_KEYS = (
    "task_id",
    "task_type",
    "instruction",
    "won",
    "score",
    "action_valid",
    "admissible_actions",
)


#: ``info["end_reason"]`` on an episode's last step: the task ended by itself (won, bought,
#: submitted); the step limit cut it (``truncated``); the step limit ended it and the env
#: graded the work there (``terminated`` and ``truncated`` both true, the reward is final).
END_DONE, END_STEP_LIMIT, END_STEP_LIMIT_GRADED = "done", "step_limit", "step_limit_graded"
#: ``info["end_reason"]`` of an episode that the infrastructure ended (``info["infra_error"]``
#: says how): ``truncated``, no final reward either way.
END_INFRA_ERROR = "infra_error"


@dataclass(frozen=True)
class Task:
    """What an episode is about; ``task_type`` groups tasks in reports (e.g. ALFWorld's six)."""

    task_id: str
    task_type: str
    instruction: str


@dataclass
class Outcome:
    """What one action did, as the subclass reports it; the base class turns it into a step.

    ``infra_error`` (a short ``kind`` and the ``message``, put in ``info`` with its end
    reason) ends the episode as cut short by the infrastructure, not by the agent: truncated,
    with no reward as success or failure.
    """

    observation: str
    valid: bool = True
    done: bool = False
    won: bool = False
    score: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)
    infra_error: dict[str, str] | None = None

    def __post_init__(self) -> None:
        if self.infra_error is not None:
            self.info = {
                **self.info,
                "infra_error": self.infra_error,
                "end_reason": END_INFRA_ERROR,
            }
