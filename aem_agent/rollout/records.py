"""What a rollout plays and records: the episode to play, its turns, the played episode.

Why apart from :mod:`aem_agent.rollout.groups`: the batch builders
(:mod:`aem_agent.rollout.batches`), the SFT data and the learning experiments read these records
without playing anything. An
:class:`EpisodeSpec` is also the training dataset's prompt (:func:`task_dataset`), so a GRPO
group is G consecutive prompts that are the same spec: same task and seed, different samples.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from aem_envs.core.errors import AEMError

if TYPE_CHECKING:  # datasets loads when a dataset is built, torch when a model samples
    from datasets import Dataset

    from aem_agent.rollout.samplers import Generated


class RolloutError(AEMError, ValueError):
    """A rollout cannot run as configured (bad prompt key, tokenizer without chat template)."""


@dataclass(frozen=True)
class EpisodeSpec:
    """Which episode to play: env id, reset seed, split and, optionally, the task.

    Serialised as the dataset prompt. Without ``task_id`` the env draws the task from the seed
    (training); with it the episode is that task (a benchmark suite's or a held-out list's).
    """

    env_id: str
    seed: int
    split: str | None = None
    task_id: str | None = None

    def to_prompt(self) -> str:
        fields = {k: v for k, v in asdict(self).items() if k != "task_id" or v is not None}
        return json.dumps(fields, sort_keys=True)

    def reset_options(self) -> dict[str, str] | None:
        """The ``reset`` options of this episode: its split and task, where given."""
        options = {"split": self.split, "task_id": self.task_id}
        return {k: v for k, v in options.items() if v is not None} or None

    @classmethod
    def from_prompt(cls, prompt: Any) -> EpisodeSpec:
        try:
            return cls(**json.loads(prompt))
        except (TypeError, ValueError) as exc:
            raise RolloutError(
                f"rollout prompt {str(prompt)[:80]!r} is not an episode spec; build the training "
                "dataset with aem_agent.rollout.records.task_dataset()"
            ) from exc


@dataclass
class Turn:
    """One assistant turn: the exact context the model saw and what it produced.

    ``anchor`` is the observation the turn acted on: the environment state, which GiGPO
    matches across the episodes of a group (``aem_agent.credit.gigpo``).
    """

    prompt_ids: list[int]
    reply: Generated
    text: str
    reward: float
    action_valid: bool
    anchor: str = ""


@dataclass
class Episode:
    """A played episode in both layouts' raw form."""

    spec: EpisodeSpec
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    entropies: list[float] = field(default_factory=list)
    turn_ids: list[int] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    reward: float = 0.0
    won: bool = False
    score: float = 0.0
    done: bool = False
    #: True when the token budget, not the env, ended the episode.
    out_of_tokens: bool = False
    #: What the env reported in ``info["infra_error"]`` when its infrastructure (engine,
    #: browser, container) failed: the episode ends there and earns no reward in training.
    infra_error: str | None = None


def task_dataset(
    env_ids: Sequence[str], num_tasks: int, *, seed: int = 0, split: str | None = None
) -> Dataset:
    """A ``datasets.Dataset`` whose ``prompt`` column holds one :class:`EpisodeSpec` per task.

    Env ids alternate and seeds count up from ``seed``, so the set is reproducible and every
    (env, seed) pair is a distinct task; TRL repeats each row ``num_generations`` times.
    """
    from datasets import Dataset

    specs = [
        EpisodeSpec(env_ids[i % len(env_ids)], seed + i, split).to_prompt()
        for i in range(num_tasks)
    ]
    return Dataset.from_dict({"prompt": specs})
