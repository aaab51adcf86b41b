"""The upstream engine: textworld's ``PddlEnv`` with alfworld's wrappers, as ALFWorld runs it.

This is the oracle the fast path is checked against, and the engine for games the native
engine does not model. Imports are lazy: the module loads without the ``alfworld`` extra.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aem_envs.core.errors import NoExpertAction, require
from aem_envs.registration import entry_by_id

FEATURE = "aem/ALFWorld-v0 with engine='upstream'"


def missing() -> list[str]:
    """One line per module of the upstream engine that does not import here.

    The module list is the registration table's, the one ``aem envs`` reports from.
    """
    (feature,) = entry_by_id("aem/ALFWorld-v0").features
    return feature.problems()


@contextmanager
def _argv_kept() -> Iterator[None]:
    """Undo Fast Downward's translator overwriting ``sys.argv`` (its options module reads it)."""
    saved = sys.argv
    try:
        yield
    finally:
        sys.argv = saved


class UpstreamEngine:
    """textworld's PDDL env, names demangled by alfworld's ``AlfredDemangler``.

    One engine plays many games (:meth:`load`): each ``PddlEnv`` loads its own copy of Fast
    Downward's shared library, so engines are made once, not per game. With
    ``handcoded_expert`` the engine can answer :meth:`expert_action` with alfworld's
    handcoded expert, which reads the ``traj_data.json`` beside a real game file, so it
    works only for games loaded by path.

    The expert is driven here rather than through alfworld's ``AlfredExpert`` wrapper: that
    wrapper runs the expert inside every ``step``, so an expert bug (an ``IndexError`` on a
    large room) crashed a valid step, and every step paid for an expert nobody asked for.
    Here each step only records the state; the expert catches up on the recorded states when
    :meth:`expert_action` is called, exactly as the wrapper would have fed it.
    """

    def __init__(self, *, handcoded_expert: bool = False):
        textworld = require("alfworld", "textworld", feature=FEATURE)
        require("alfworld", "fast_downward", feature=FEATURE)
        pddl = require("alfworld", "textworld.envs.pddl", feature=FEATURE)
        alfred = require("alfworld", "alfworld.agents.environment.alfred_tw_env", feature=FEATURE)
        self._expert_module = (
            require("alfworld", "alfworld.agents.expert.handcoded_expert_tw", feature=FEATURE)
            if handcoded_expert
            else None
        )
        # The handcoded expert reads the state's facts.
        infos = textworld.EnvInfos(won=True, admissible_commands=True, facts=handcoded_expert)
        self._pddl_env = pddl.PddlEnv(infos)
        self._env = alfred.AlfredDemangler(self._pddl_env)
        self._state: Any = None
        self._game_file: str | None = None
        self._expert: Any = None
        #: States the expert has not seen yet, each with the command that led to it.
        self._unseen: list[tuple[Any, str]] = []
        self._expert_plan = "look"
        self._expert_failure: str | None = None

    def load(self, game: dict[str, Any] | Path) -> None:
        """Load a game dict (see :func:`~aem_envs.alfworld.pddl.game_dict`) or a real file."""
        with _argv_kept():
            self._env.load(str(game) if isinstance(game, Path) else game)
        self._game_file = str(game) if isinstance(game, Path) else None
        self._state = None

    def reset(self) -> str:
        with _argv_kept():
            self._state = self._env.reset()
        self._expert = None
        self._unseen = [(self._state, "")]
        self._expert_plan = "look"
        self._expert_failure = None
        return self._state.feedback

    def step(self, command: str) -> tuple[str, bool]:
        """Run ``command``; returns (feedback, ok) where ok says it was admissible."""
        ok = command.strip() in self._state["admissible_commands"]
        self._state, _, _ = self._env.step(command)
        if self._expert_module is not None and self._expert_failure is None:
            self._unseen.append((self._state, str(command)))
        return self._state.feedback, ok

    def admissible(self) -> list[str]:
        return list(self._state["admissible_commands"])

    def won(self) -> bool:
        return bool(self._state["won"])

    def expert_action(self) -> str:
        """alfworld's handcoded expert's next command (needs ``handcoded_expert=True``).

        As alfworld's ``AlfredExpert`` does, the expert observes the first state and acts on
        every later one, and a suggestion that is not admissible becomes ``look``. An expert
        that fails (any exception inside alfworld) stays failed for the episode: this and
        every later call raise :class:`NoExpertAction`, and the game itself plays on.
        """
        if self._expert_module is None or self._game_file is None:
            raise NoExpertAction(
                "no expert action available: alfworld's handcoded expert needs a real game "
                "file (source='alfworld')"
            )
        if self._expert_failure is None:
            try:
                self._catch_up()
            except Exception as exc:
                self._unseen.clear()
                detail = " ".join(str(exc).split())
                self._expert_failure = type(exc).__name__ + (f": {detail}" if detail else "")
        if self._expert_failure is not None:
            raise NoExpertAction(
                "no expert action available: alfworld's handcoded expert failed on this game "
                f"({self._expert_failure}); play on with another policy or reset"
            )
        return self._expert_plan

    def _catch_up(self) -> None:
        assert self._expert_module is not None  # expert_action checked it
        if self._expert is None:
            self._expert = self._expert_module.HandCodedTWAgent(max_steps=200)
            self._expert.reset(self._game_file)
        while self._unseen:
            state, command = self._unseen.pop(0)
            self._expert_plan = "look"
            if not command:
                self._expert.observe(state["feedback"])
                continue
            action = self._expert.act(state, 0, state["won"], command)
            if action in state["admissible_commands"]:
                self._expert_plan = action

    def close(self) -> None:
        """Free the planner's state and drop the engine.

        The library copy itself stays mapped: ``fast_downward.close_lib`` (dlclose) makes the
        interpreter crash at exit once two engines have been closed in one process.
        """
        if self._pddl_env is not None:
            self._pddl_env.downward_lib.cleanup()
            self._pddl_env = None
            self._env = None
