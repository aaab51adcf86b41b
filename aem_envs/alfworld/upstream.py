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

from aem_envs.core.errors import require

FEATURE = "aem/ALFWorld-v0 with engine='upstream'"


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
    ``handcoded_expert`` alfworld's ``AlfredExpert`` wrapper is added; it reads the
    ``traj_data.json`` beside a real game file, so it works only for games loaded by path.
    """

    def __init__(self, *, handcoded_expert: bool = False):
        textworld = require("alfworld", "textworld", feature=FEATURE)
        require("alfworld", "fast_downward", feature=FEATURE)
        pddl = require("alfworld", "textworld.envs.pddl", feature=FEATURE)
        alfred = require("alfworld", "alfworld.agents.environment.alfred_tw_env", feature=FEATURE)
        infos = textworld.EnvInfos(
            won=True,
            admissible_commands=True,
            facts=handcoded_expert,
            extras=["expert_plan"] if handcoded_expert else [],
        )
        self._pddl_env = pddl.PddlEnv(infos)
        env = alfred.AlfredDemangler(self._pddl_env)
        if handcoded_expert:
            env = alfred.AlfredExpert(env, expert_type=alfred.AlfredExpertType.HANDCODED)
        self._env = env
        self._state: Any = None

    def load(self, game: dict[str, Any] | Path) -> None:
        """Load a game dict (see :func:`~aem_envs.alfworld.pddl.game_dict`) or a real file."""
        with _argv_kept():
            self._env.load(str(game) if isinstance(game, Path) else game)
        self._state = None

    def reset(self) -> str:
        with _argv_kept():
            self._state = self._env.reset()
        return self._state.feedback

    def step(self, command: str) -> tuple[str, bool]:
        """Run ``command``; returns (feedback, ok) where ok says it was admissible."""
        ok = command.strip() in self._state["admissible_commands"]
        self._state, _, _ = self._env.step(command)
        return self._state.feedback, ok

    def admissible(self) -> list[str]:
        return list(self._state["admissible_commands"])

    def won(self) -> bool:
        return bool(self._state["won"])

    def expert_action(self) -> str:
        """alfworld's handcoded expert's next command (needs ``handcoded_expert=True``)."""
        return self._state["extra.expert_plan"][0]

    def close(self) -> None:
        """Free the planner's state and drop the engine.

        The library copy itself stays mapped: ``fast_downward.close_lib`` (dlclose) makes the
        interpreter crash at exit once two engines have been closed in one process.
        """
        if self._pddl_env is not None:
            self._pddl_env.downward_lib.cleanup()
            self._pddl_env = None
            self._env = None
