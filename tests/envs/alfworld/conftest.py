"""Fixtures for the ALFWorld tests: the engine rule and a hand-written ALFRED problem.

Tests that need the upstream engine (alfworld + textworld + fast-downward) skip on a
developer machine without it, but fail in CI (``CI`` set), where the engine is installed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from aem_envs.alfworld import upstream
from aem_envs.alfworld.pddl import game_dict
from aem_envs.alfworld.tasks import bundled_games
from aem_envs.core.errors import install_command
from tests.conftest import _need

KITCHEN = Path(__file__).with_name("kitchen.pddl")


def _engine_available() -> str | None:
    problems = upstream.missing()
    if problems:
        return f"{problems[0]} (install: {install_command('alfworld')})"
    return None


@pytest.fixture(scope="session")
def alfworld_engine() -> None:
    """Use in tests that run the upstream ALFWorld engine."""
    _need(_engine_available())


@pytest.fixture(scope="session")
def kitchen_problem() -> str:
    """A small ALFRED-form problem: two cabinets sharing a location, two mugs, an apple."""
    return KITCHEN.read_text()


def write_real_layout(
    root: Path,
    split: str,
    count: int,
    *,
    edit: Callable[[str], str] | None = None,
    params: dict[str, str] | None = None,
) -> list[str]:
    """ALFWorld's on-disk form of the first ``count`` bundled games of ``split``.

    Each game becomes ``json_2.1.1/<split>/<task>/trial_1/{traj_data.json,game.tw-pddl}``,
    as alfworld ships them; ``edit`` may rewrite each PDDL problem first, and ``params``
    overrides ``pddl_params`` in ``traj_data.json`` (what alfworld's handcoded expert reads).
    """
    ids = []
    for record in list(bundled_games(split).values())[:count]:
        problem = record.problem if edit is None else edit(record.problem)
        goal = record.goal
        trial = root / "json_2.1.1" / split / f"{record.task_type}-{goal.obj}-x" / "trial_1"
        trial.mkdir(parents=True)
        traj = {
            "task_type": record.task_type,
            "pddl_params": {
                "object_target": goal.obj,
                "parent_target": goal.recep,
                "toggle_target": goal.toggle,
                "mrecep_target": "",
                "object_sliced": False,
                **(params or {}),
            },
        }
        (trial / "traj_data.json").write_text(json.dumps(traj))
        game = game_dict(problem, record.instruction)
        (trial / "game.tw-pddl").write_text(json.dumps(game))
        ids.append(f"{trial.parent.name}/{trial.name}")
    return ids
