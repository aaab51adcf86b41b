"""``aem/ALFWorld-v0``: ALFWorld's household text games as a Gymnasium environment.

Two engines play the same games: ``engine="native"`` (default, the fast path in
:mod:`~aem_envs.alfworld.native`) and ``engine="upstream"`` (textworld's PDDL env with Fast
Downward and alfworld's wrappers, the oracle). Games come from the bundled generated set
(``source="bundled"``) or the real ALFWorld data on disk (``source="alfworld"`` with
``$ALFWORLD_DATA`` or ``data_dir=``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from aem_envs.alfworld import expert as expert_lib
from aem_envs.alfworld import upstream
from aem_envs.alfworld.native import NativeGame
from aem_envs.alfworld.pddl import game_dict
from aem_envs.alfworld.state import Layout, State, UnsupportedGame, parse_problem
from aem_envs.alfworld.tasks import (
    SPLITS,
    GameRecord,
    bundled_games,
    bundled_summary,
    real_data_root,
    real_games,
)
from aem_envs.alfworld.upstream import UpstreamEngine
from aem_envs.core.base import TextEnv
from aem_envs.core.errors import AEMError, ArgumentError, MissingDependencyError, install_command
from aem_envs.core.outcome import Outcome, Task

ENGINES = ("native", "upstream")
SOURCES = ("bundled", "alfworld")
EXPERTS = ("plan", "search")


@lru_cache(maxsize=1024)
def _parsed(problem: str) -> tuple[Layout, State]:
    """Parse once per problem text: a native reset is then a state copy and one intro."""
    return parse_problem(problem)


@lru_cache(maxsize=4)
def train_prior(root: Path | None) -> expert_lib.SearchPrior:
    """The searching expert's order, counted once per process over a source's train split.

    Why not per env: every env of a vector env (and every reset of a fresh one) would parse
    the whole train split again. The games are parsed past :func:`_parsed`'s cache, so that
    counting 3,553 real games does not evict the games being played.
    """
    games = []
    for record in (bundled_games("train") if root is None else real_games(root, "train")).values():
        try:
            games.append(_parsed.__wrapped__(record.problem))
        except UnsupportedGame:
            continue
    return expert_lib.search_prior(games)


class ALFWorldEnv(TextEnv):
    """ALFWorld's household text games (six task types) as a Gymnasium environment.

    ## Description

    The agent is placed in a room of an AI2-THOR floor plan and given a household task:
    pick and place, two objects, clean, heat or cool then place, or look at an object under
    a lamp. Games come from the bundled generated set (``source="bundled"``, splits
    ``train``, ``valid_seen``, ``valid_unseen``) or from real ALFWorld data
    (``source="alfworld"`` with ``$ALFWORLD_DATA`` or ``data_dir=``). Two engines play them:
    ``engine="native"`` (default, plain Python) and ``engine="upstream"`` (textworld + Fast
    Downward, the oracle); a real game the native engine does not model runs upstream.
    Keywords: ``engine``, ``source``, ``data_dir``, ``expert`` (``"plan"``, default: the
    expert policy walks straight to the target, reading the hidden state; ``"search"``: it
    knows only what the episode has shown, see :mod:`~aem_envs.alfworld.expert`), plus the
    common ``reward_scheme``, ``max_steps`` and ``render_mode``. Reset options: ``task_id``,
    ``split``.

    ## Action space

    A text command of at most 256 characters, e.g. ``go to fridge 1``, ``take mug 1 from
    countertop 1``, ``heat mug 1 with microwave 1``. ``info["admissible_actions"]`` lists the
    commands the current state allows; any other text is answered ``Nothing happens.`` and
    counted invalid (``info["action_valid"]`` false).

    ## Observation

    Text of at most 8192 characters: at reset the room description ending in ``Your task is
    to: ...``, after each step the engine's feedback (what the agent sees, holds or did).

    ## Rewards

    By the ``reward_scheme``: by default +10 for winning, 0 otherwise, and -0.1 for each
    invalid command; ``"native"`` gives 1.0 for a win. ``info["score"]`` is 1.0 once won.

    ## Termination

    ``terminated`` once the goal holds (:mod:`~aem_envs.alfworld.grading`); ``truncated``
    after ``max_steps`` commands (default 50).

    ## Registered ids

    - ``aem/ALFWorld-v0``
    """

    splits: ClassVar[tuple[str, ...]] = SPLITS
    default_max_steps: ClassVar[int] = 50
    max_observation_length: ClassVar[int] = 8192
    max_action_length: ClassVar[int] = 256
    action_vocabulary: ClassVar[Sequence[str]] = (
        "go to", "take", "from", "move", "to", "open", "close", "examine", "use", "heat",
        "cool", "clean", "with", "look", "inventory", "cabinet 1", "countertop 1", "drawer 2",
        "fridge 1", "microwave 1", "sinkbasin 1", "desklamp 1", "mug 1", "apple 2", "book 1",
    )  # fmt: skip

    def __init__(
        self,
        *,
        engine: str = "native",
        source: str | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        expert: str = "plan",
        reward_scheme: Any = None,
        max_steps: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(reward_scheme=reward_scheme, max_steps=max_steps, render_mode=render_mode)
        if engine not in ENGINES:
            raise ArgumentError(
                f"engine={engine!r} is not known; pass engine='native' (the default) or "
                "engine='upstream' (alfworld's own engine)"
            )
        source = source or ("alfworld" if data_dir is not None else "bundled")
        if source not in SOURCES:
            raise ArgumentError(
                f"source={source!r} is not known; pass source='bundled' (the default) or "
                "source='alfworld' (real data from $ALFWORLD_DATA or data_dir=)"
            )
        if source == "bundled" and data_dir is not None:
            raise ArgumentError(
                "data_dir= reads real ALFWorld data but source='bundled' was given; "
                "pass source='alfworld' with it, or drop data_dir="
            )
        if expert not in EXPERTS:
            raise ArgumentError(
                f"expert={expert!r} is not known; pass expert='plan' (the default: reads the "
                "whole state) or expert='search' (knows only what the episode has shown)"
            )
        if engine == "upstream":
            problems = upstream.missing()
            if problems:
                raise MissingDependencyError(
                    f"engine='upstream' needs alfworld's engine ({problems[0]}); install it "
                    f"with: {install_command('alfworld')}, or use engine='native'"
                )
        self.engine = engine
        self.source = source
        self.expert = expert
        self._root = real_data_root(data_dir) if source == "alfworld" else None
        self._upstream: UpstreamEngine | None = None
        self._native: NativeGame | None = None
        self._game: NativeGame | UpstreamEngine | None = None
        self._record: GameRecord | None = None

    # ------------------------------------------------------------------ TextEnv hooks
    def task_ids(self, split: str) -> Sequence[str]:
        return list(self._games(split))

    def _games(self, split: str) -> dict[str, GameRecord]:
        if self._root is None:
            return bundled_games(split)
        return real_games(self._root, split)

    def _start(self, task_id: str, split: str) -> tuple[Task, str]:
        record = self._games(split)[task_id]
        self._record = record
        try:
            self._native = NativeGame(_parsed(record.problem), record.goal, record.instruction)
        except UnsupportedGame:
            if self.engine == "native" and record.path is None:
                raise
            self._native = None
        if self.engine == "native" and self._native is not None:
            self._game = self._native
            observation = self._native.reset()
        else:
            self._game = self._upstream_engine()
            self._game.load(record.path or game_dict(record.problem, record.instruction))
            observation = self._game.reset()
            if self._native is not None:
                self._native.reset()
        return Task(task_id, record.task_type, record.instruction), observation

    def _act(self, action: str) -> Outcome:
        assert self._game is not None
        feedback, ok = self._game.step(action)
        if self._native is not None and self._game is not self._native:
            self._native.step(action)
        won = self._game.won()
        return Outcome(feedback, valid=ok, done=won, won=won, score=1.0 if won else 0.0)

    def _admissible(self) -> list[str] | None:
        return None if self._game is None else self._game.admissible()

    def expert_action(self) -> str:
        """The expert's next command: alfworld's handcoded expert for real games on the
        upstream engine, otherwise planned from the native state (which the upstream path
        keeps in step for bundled games).

        Raises :class:`~aem_envs.core.errors.NoExpertAction` when the handcoded expert fails;
        the episode itself is unaffected (the expert is computed here, never in ``step``).
        """
        if self._game is None or self._record is None:
            raise AEMError("call reset() before expert_action()")
        if self.expert == "search":
            if self._native is None:
                raise AEMError(
                    f"expert='search' plays on the native engine, which does not model game "
                    f"{self._record.id!r}; use expert='plan' for it"
                )
            assert self._episode is not None
            return expert_lib.search_action(self._native, self._episode.actions, self._prior())
        if isinstance(self._game, UpstreamEngine) and self._record.path is not None:
            return self._game.expert_action()
        assert self._native is not None
        return expert_lib.next_action(self._native)

    def _prior(self) -> expert_lib.SearchPrior:
        """The searching expert's order over this source's train split (cached per process)."""
        return train_prior(self._root)

    @classmethod
    def task_set_summary(cls) -> dict[str, dict[str, int]]:
        return bundled_summary()

    def close(self) -> None:
        if self._upstream is not None:
            self._upstream.close()
            self._upstream = None
        self._game = self._native = None
        super().close()

    # ------------------------------------------------------------------ internals
    def _upstream_engine(self) -> UpstreamEngine:
        if self._upstream is None:
            self._upstream = UpstreamEngine(handcoded_expert=self.source == "alfworld")
        return self._upstream
