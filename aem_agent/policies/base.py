"""The one interface every policy implements: a batch of turns in, a batch of replies out.

Why one small batch interface: the harness and the trainer's rollouts drive local models,
remote endpoints, experts and random agents the same way, and batching is where local
generation and remote concurrency get their speed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Self

import gymnasium as gym


@dataclass
class PolicyInput:
    """What a policy sees at one step of one episode.

    ``history`` holds the earlier (observation, action) pairs of the episode, oldest first;
    ``env`` is the live environment, used only by policies that read the env itself
    (expert, random) — model policies must not touch it.
    """

    env_id: str
    instruction: str
    observation: str
    history: list[tuple[str, str]] = field(default_factory=list)
    admissible_actions: list[str] | None = None
    env: gym.Env | None = None


@dataclass
class PolicyOutput:
    """A raw reply (parsed by :class:`aem_envs.reply.ReplyFormat`) and its token counts."""

    reply: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class Policy(ABC):
    """Maps a batch of :class:`PolicyInput` to one :class:`PolicyOutput` each, in order."""

    name: str = "policy"

    @abstractmethod
    def act(self, inputs: Sequence[PolicyInput]) -> list[PolicyOutput]: ...

    def close(self) -> None:  # noqa: B027 - optional hook; most policies hold nothing
        """Release what the policy holds (a model, a connection pool)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
