"""``aem-bench/Pick-v0``: pick the named item out of a short list, in at most two moves.

Why this task for the mechanism experiment: a random policy that only picks listed items wins
often (2 of 5 with two moves), so GRPO groups have mixed rewards from the first step and the
positive/negative balance that AEM acts on moves as the policy learns; the rule to learn
(copy the instruction's item into the action) is one a 2-layer transformer with tied
embeddings can represent; and the held-out split holds item/distractor/order combinations no
training task has, so held-out success measures the rule, not memorised tasks. Items are
single words that the experiment's tokenizer learns as single tokens, so a reply is a few
tokens long.

The env is registered by the learning harness (:func:`register`), never by the public aem
registry: it is a measuring instrument, not a benchmark.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from aem_envs.core.base import TextEnv
from aem_envs.core.outcome import Outcome, Task

ENV_ID = "aem-bench/Pick-v0"

#: The item words; each task lists ``n_items`` of them.
ITEMS: tuple[str, ...] = (
    "apple",
    "bread",
    "candle",
    "drum",
    "egg",
    "fork",
    "glove",
    "hat",
    "ink",
    "jar",
    "kite",
    "lamp",
)
#: Most tasks per split; generated once from a fixed seed, disjoint between splits.
SPLIT_SIZES: dict[str, int] = {"train": 1000, "test": 200}
#: Share of the tasks held out when there are fewer than the sizes above.
TEST_SHARE = 0.2
_TASK_SEED = 20260501


def _task_table(n_items: int) -> dict[str, list[str]]:
    """Every split's task ids (``target:item,item,…`` in listing order), disjoint, seeded.

    A task lists the first ``n_items`` words of :data:`ITEMS` in one order and names one of
    them; the splits share items and targets but never a (target, order) pair.
    """
    possible = n_items * math.factorial(n_items)
    wanted = min(sum(SPLIT_SIZES.values()), possible)
    rng = np.random.default_rng(_TASK_SEED + n_items)
    seen: set[str] = set()
    ordered: list[str] = []
    while len(ordered) < wanted:
        listed = [ITEMS[i] for i in rng.permutation(n_items)]
        task_id = f"{listed[int(rng.integers(n_items))]}:{','.join(listed)}"
        if task_id not in seen:
            seen.add(task_id)
            ordered.append(task_id)
    test = min(SPLIT_SIZES["test"], max(1, round(TEST_SHARE * wanted)))
    return {"train": ordered[test:][: SPLIT_SIZES["train"]], "test": ordered[:test]}


class PickEnv(TextEnv):
    """Find the named item among ``n_items`` listed ones; a wrong pick removes that item.

    Actions are the item words themselves (``info["admissible_actions"]`` lists the items
    still there). Picking the target wins; any other listed item is a valid miss; anything
    else is an invalid action. The episode ends on a win or after ``max_steps`` moves
    (default 2).
    """

    splits: ClassVar[tuple[str, ...]] = ("train", "test")
    default_max_steps: ClassVar[int] = 2
    max_observation_length: ClassVar[int] = 1024
    action_vocabulary: ClassVar[Sequence[str] | None] = ITEMS

    def __init__(self, n_items: int = 5, **kwargs: Any) -> None:
        """``n_items``: how many items (the first words of :data:`ITEMS`) every task lists."""
        super().__init__(**kwargs)
        if not 2 <= n_items <= len(ITEMS):
            raise ValueError(f"n_items must be between 2 and {len(ITEMS)}, got {n_items}")
        self.n_items = n_items
        self._tasks = _task_table(n_items)
        self._target = ""
        self._left: list[str] = []

    def task_ids(self, split: str) -> Sequence[str]:
        return self._tasks[split]

    @classmethod
    def task_set_summary(cls) -> dict[str, dict[str, int]]:
        return {split: {"pick": len(ids)} for split, ids in _task_table(5).items()}

    def _start(self, task_id: str, split: str) -> tuple[Task, str]:
        target, listed = task_id.split(":")
        self._target, self._left = target, listed.split(",")
        task = Task(task_id, "pick", f"pick the {target}")
        return task, f"You see: {self._listing()}. You want the {target}."

    def _listing(self) -> str:
        return ", ".join(self._left)

    def _act(self, action: str) -> Outcome:
        item = action.strip().lower()
        if item == self._target:
            return Outcome(f"You picked the {item}. Well done!", done=True, won=True, score=1.0)
        if item in self._left:
            self._left.remove(item)
            return Outcome(
                f"The {item} is wrong. You see: {self._listing()}. You want the {self._target}."
            )
        return Outcome(f"There is no {item[:40]!r} here. You see: {self._listing()}.", valid=False)

    def _admissible(self) -> list[str]:
        return list(self._left)

    def expert_action(self) -> str:
        return self._target


def register() -> str:
    """Register :class:`PickEnv` with Gymnasium (idempotent) and return its id."""
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point=PickEnv)
    return ENV_ID
