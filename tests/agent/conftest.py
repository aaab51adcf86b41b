"""Fixtures for the agent tests: a tiny random chat model built on the spot, no download.

Why build one: unit tests of rollouts and the trainer need a real tokenizer, a chat template
and a causal LM that TRL accepts, but must run offline in CI in well under a second per step.
A byte-level BPE trained on a few sentences plus a 2-layer ``Qwen2ForCausalLM`` is all that;
the builder lives in :mod:`aem_agent.models.tiny`, shared with the learning experiments.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import gymnasium as gym
import pytest

from aem_agent.credit import Credit, TurnBatch
from aem_agent.models.tiny import CHATML_TEMPLATE, build_tiny_model
from aem_envs.core.base import TextEnv
from aem_envs.core.outcome import Outcome, Task

__all__ = [
    "CHATML_TEMPLATE",
    "DoorsEnv",
    "Doubling",
    "build_tiny_model",
    "doors_env_id",
    "registered_double",
    "tiny_model_dir",
]

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Path of a tiny random chat model (tokenizer + ChatML template + 2-layer Qwen2)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


class DoorsEnv(TextEnv):
    """Three doors, the seed hides a prize behind one; opening it wins, others do nothing.

    Small enough for rollout and trainer tests to play whole episodes in milliseconds.
    """

    default_max_steps = 4
    DOORS = ("red", "green", "blue")

    def task_ids(self, split: str) -> Sequence[str]:
        return [f"prize-{door}" for door in self.DOORS]

    def _start(self, task_id: str, split: str) -> tuple[Task, str]:
        self._prize = task_id.removeprefix("prize-")
        return Task(task_id, "doors", "find the prize"), "You see a red, a green and a blue door."

    def _act(self, action: str) -> Outcome:
        door = action.removeprefix("open ").strip()
        if door not in self.DOORS:
            return Outcome(f"There is no {door!r} door.", valid=False)
        if door == self._prize:
            return Outcome("You found the prize!", done=True, won=True, score=1.0)
        return Outcome(f"The {door} door is empty.")

    def _admissible(self) -> list[str]:
        return [f"open {door}" for door in self.DOORS]

    def expert_action(self) -> str:
        return f"open {self._prize}"


DOORS_ENV_ID = "aemtest/Doors-v0"


@dataclasses.dataclass(frozen=True)
class Doubling:
    """A user-written credit estimator: twice the advantage it is given."""

    name: str = "double"
    needs: frozenset[str] = frozenset()

    def __call__(self, batch: TurnBatch) -> Credit:
        return Credit(2 * batch.advantage, {"double/calls": 1.0})


@pytest.fixture
def registered_double() -> Iterator[str]:
    """:class:`Doubling`, selectable as ``credit="double"`` for the duration of a test."""
    from aem_agent import credit

    credit.register("double", lambda config: Doubling())
    yield "double"
    credit.unregister("double")


@pytest.fixture(scope="session")
def doors_env_id() -> str:
    """Id of :class:`DoorsEnv`, registered with Gymnasium for the session."""
    if DOORS_ENV_ID not in gym.registry:
        gym.register(id=DOORS_ENV_ID, entry_point=DoorsEnv)
    return DOORS_ENV_ID
