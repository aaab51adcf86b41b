"""``aem-bench/Fetch-v0``: fetch the named items, one per move, out of a room of look-alikes.

Why this task for measuring AEM's mechanism: AEM weighs a response by its mean token entropy
H̄, which only says how *typical the response* was when H̄ varies with what was sampled. In
``aem-bench/Pick-v0`` a reply is one decision token plus a fixed closing token, so every
episode of a group has the same decision entropy and α encodes only the state. Here a reply
is two dependent words, a kind and its colour (``cup red``), and kinds come in different
numbers of colours (:data:`COLOURS_OF`): after a kind that comes in three colours the model is
unsure of the colour, after one that comes in one it is not, so inside a group H̄ moves with
the kind sampled and with the response's surprisal — from what a model learns of the item
vocabulary alone, before it has learnt to read the colour off the room (a tiny model's brief
warm-up learnt the format and the vocabulary but not to copy two words out of the prompt).
The episode needs one move per wanted item (3 of 4 listed by default) with one spare move,
so it lasts 3–4 turns; several right orders exist, so a good policy keeps some entropy.

The reward is the envs' terminal one (a win only when every wanted item is fetched): a right
item is progress but no reward, a listed item not wanted wastes a move, and a reply naming no
listed item ends the episode (lost), so no wrong move is ever credited and the held-out
success can be computed exactly (:mod:`benchmarks.learning.exact`): from any state the
outcomes are the listed items' replies, and all other replies lose.

Registered by the learning harness (:func:`register`), never by the public aem registry: it
is a measuring instrument, not a benchmark.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from aem_envs.core.base import TextEnv
from aem_envs.core.outcome import Outcome, Task

ENV_ID = "aem-bench/Fetch-v0"

#: Every item is a kind and a colour (``cup red``); a kind comes in the colours listed here,
#: three, two or one, so the colour's uncertainty depends on the kind sampled before it.
COLOURS_OF: dict[str, tuple[str, ...]] = {
    "cup": ("red", "blue", "green"),
    "hat": ("red", "blue", "green"),
    "box": ("red", "blue"),
    "key": ("red", "green"),
    "jar": ("green",),
    "pen": ("blue",),
}
KINDS: tuple[str, ...] = tuple(COLOURS_OF)
ITEMS: tuple[str, ...] = tuple(f"{k} {c}" for k, cs in COLOURS_OF.items() for c in cs)
#: Tasks per split; generated once from a fixed seed, disjoint between splits. The held-out
#: split is small enough to score exactly.
SPLIT_SIZES: dict[str, int] = {"train": 4000, "test": 64}
_TASK_SEED = 20261206
_SEP = "|"


@functools.cache
def _task_table(n_items: int, n_wanted: int) -> dict[str, tuple[str, ...]]:
    """Every split's task ids ``wanted,…|listed,…`` (items in order), disjoint, seeded; made
    once per process (exact evaluation copies an env at every branch)."""
    rng = np.random.default_rng(_TASK_SEED + 100 * n_items + n_wanted)
    seen: set[str] = set()
    ordered: list[str] = []
    while len(ordered) < sum(SPLIT_SIZES.values()):
        kinds = [KINDS[i] for i in rng.choice(len(KINDS), n_items, replace=False)]
        listed = [f"{k} {COLOURS_OF[k][rng.integers(len(COLOURS_OF[k]))]}" for k in kinds]
        wanted = [listed[i] for i in rng.choice(n_items, n_wanted, replace=False)]
        task_id = f"{','.join(wanted)}{_SEP}{','.join(listed)}"
        if task_id not in seen:
            seen.add(task_id)
            ordered.append(task_id)
    test = SPLIT_SIZES["test"]
    return {"train": tuple(ordered[test:]), "test": tuple(ordered[:test])}


class FetchEnv(TextEnv):
    """Fetch every wanted item among ``n_items`` listed ones, one item per move.

    Actions are item names (``info["admissible_actions"]`` lists the items still there). A
    wanted item is taken (and leaves the room); the last one wins. A listed item not wanted is
    a valid move that changes nothing. Any other action is invalid and ends the episode. The
    step limit is one more move than there are wanted items.
    """

    splits: ClassVar[tuple[str, ...]] = ("train", "test")
    default_max_steps: ClassVar[int] = 4
    max_observation_length: ClassVar[int] = 1024
    action_vocabulary: ClassVar[Sequence[str] | None] = ITEMS

    def __init__(self, n_items: int = 4, n_wanted: int = 3, **kwargs: Any) -> None:
        """``n_items`` listed items per task (of different kinds), ``n_wanted`` to fetch."""
        kwargs.setdefault("max_steps", n_wanted + 1)
        super().__init__(**kwargs)
        if not 1 <= n_wanted <= n_items <= len(KINDS):
            raise ValueError(
                f"need 1 <= n_wanted <= n_items <= {len(KINDS)}, got n_items={n_items}, "
                f"n_wanted={n_wanted}"
            )
        self.n_items, self.n_wanted = n_items, n_wanted
        self._tasks = _task_table(n_items, n_wanted)
        self._wanted: list[str] = []
        self._left: list[str] = []

    def task_ids(self, split: str) -> Sequence[str]:
        return self._tasks[split]

    @classmethod
    def task_set_summary(cls) -> dict[str, dict[str, int]]:
        return {split: {"fetch": len(ids)} for split, ids in _task_table(4, 3).items()}

    def _start(self, task_id: str, split: str) -> tuple[Task, str]:
        wanted, listed = task_id.split(_SEP)
        self._wanted, self._left = wanted.split(","), listed.split(",")
        task = Task(task_id, "fetch", "fetch the " + " and the ".join(self._wanted))
        return task, self._situation()

    def _situation(self) -> str:
        return f"You see: {', '.join(self._left)}. You still need: {', '.join(self._wanted)}."

    def _act(self, action: str) -> Outcome:
        item = " ".join(action.strip().lower().split())
        if item in self._wanted and item in self._left:
            self._wanted.remove(item)
            self._left.remove(item)
            if not self._wanted:
                return Outcome(
                    f"You took the {item}. You have everything!", done=True, won=True, score=1.0
                )
            return Outcome(f"You took the {item}. {self._situation()}")
        if item in self._left:
            return Outcome(f"You do not need the {item}. {self._situation()}")
        return Outcome(f"There is no {item[:40]!r} here. You lose.", valid=False, done=True)

    def _admissible(self) -> list[str]:
        return list(self._left)

    def expert_action(self) -> str:
        return self._wanted[0]

    def winnable(self) -> bool:
        """Whether the moves left can still fetch every wanted item (exact evaluation prunes
        the branches where they cannot)."""
        return not self._done and len(self._wanted) <= self.max_steps - self._steps


def register() -> str:
    """Register :class:`FetchEnv` with Gymnasium (idempotent) and return its id."""
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point=FetchEnv)
    return ENV_ID
