"""Where games come from: the bundled generated set, or the real ALFWorld layout on disk.

Bundled games are ``data/<split>.jsonl.gz`` (one game a line: id, task type, goal,
instruction, PDDL problem, expert plan) with ``data/index.json`` holding the per-split,
per-task-type counts, so listing them needs neither the engine nor decompression.

Real games are read from ALFWorld's own layout,
``$ALFWORLD_DATA/json_2.1.1/<split>/<task>/trial_*/{traj_data.json,game.tw-pddl}``, and
filtered as ALFWorld's ``AlfredTWEnv`` filters them (no movable-receptacle or sliced tasks,
only games marked solvable).
"""

from __future__ import annotations

import gzip
import json
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from aem_envs.alfworld.pddl import TASK_TYPES, Goal
from aem_envs.core.errors import DataError

SPLITS = ("train", "valid_seen", "valid_unseen")
DATA_DIR = Path(__file__).with_name("data")
INDEX_FILE = DATA_DIR / "index.json"
REAL_LAYOUT = (
    "json_2.1.1/{train,valid_seen,valid_unseen}/<task>/trial_*/{traj_data.json,game.tw-pddl}"
)
_TASK_RE = re.compile(r"Your task is to: ([^\"]*)\.")


@dataclass(frozen=True)
class GameRecord:
    """One game: what the env needs to start it on either engine."""

    id: str
    task_type: str
    instruction: str
    goal: Goal
    problem: str
    plan: tuple[str, ...] = ()
    #: The real ``game.tw-pddl`` (None for bundled games, which are built in memory).
    path: Path | None = None


def split_file(split: str, root: Path = DATA_DIR) -> Path:
    return root / f"{split}.jsonl.gz"


def bundled_summary() -> dict[str, dict[str, int]]:
    """Per-split, per-task-type counts of the bundled games (reads only the index)."""
    if not INDEX_FILE.exists():
        return {}
    return json.loads(INDEX_FILE.read_text())["splits"]


@cache
def bundled_games(split: str) -> dict[str, GameRecord]:
    """The bundled games of ``split`` by id, in file order."""
    path = split_file(split)
    if not path.exists():
        raise DataError(
            f"bundled ALFWorld split {split!r} is missing ({path}); reinstall aem or "
            "regenerate it with: python -m aem_envs.alfworld.generate"
        )
    games = {}
    with gzip.open(path, "rt") as fh:
        for line in fh:
            row = json.loads(line)
            games[row["id"]] = GameRecord(
                id=row["id"],
                task_type=row["task_type"],
                instruction=row["instruction"],
                goal=Goal(row["task_type"], **row["goal"]),
                problem=row["problem"],
                plan=tuple(row["plan"]),
            )
    return games


# ---------------------------------------------------------------------------------- real data
def real_data_root(data_dir: str | os.PathLike[str] | None) -> Path:
    """The ALFWorld data root: ``data_dir`` or ``$ALFWORLD_DATA``, checked to exist."""
    if data_dir is None:
        env = os.environ.get("ALFWORLD_DATA")
        if not env:
            raise DataError(
                "source='alfworld' needs the ALFWorld data: set $ALFWORLD_DATA or pass "
                f"data_dir= (a folder holding {REAL_LAYOUT})"
            )
        data_dir = env
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        raise DataError(f"ALFWorld data folder {root} does not exist; expected {REAL_LAYOUT}")
    if not (root / "json_2.1.1").is_dir():
        raise DataError(f"{root} has no json_2.1.1/ folder; expected {REAL_LAYOUT}")
    return root


@cache
def real_games(root: Path, split: str) -> dict[str, GameRecord]:
    """The playable real games of ``split`` under ``root``, by ``<task>/trial_*`` id."""
    split_dir = root / "json_2.1.1" / split
    if not split_dir.is_dir():
        raise DataError(f"ALFWorld split folder {split_dir} is missing; expected {REAL_LAYOUT}")
    games = {}
    for traj_path in sorted(split_dir.glob("*/trial_*/traj_data.json")):
        trial = traj_path.parent
        if "movable" in str(trial) or "Sliced" in str(trial):
            continue
        record = _real_game(trial, f"{trial.parent.name}/{trial.name}")
        if record is not None:
            games[record.id] = record
    if not games:
        raise DataError(f"{split_dir} holds no playable game; expected {REAL_LAYOUT}")
    return games


def _real_game(trial: Path, game_id: str) -> GameRecord | None:
    game_path = trial / "game.tw-pddl"
    if not game_path.exists():
        return None
    traj = _read_json(trial / "traj_data.json")
    game = _read_json(game_path)
    if not game.get("solvable", False):
        return None
    try:
        task_type = traj["task_type"]
        params = traj["pddl_params"]
        goal = Goal(
            task_type,
            params["object_target"],
            params.get("parent_target") or "",
            params.get("toggle_target") or "",
        )
        problem, grammar = game["pddl_problem"], game["grammar"]
    except (KeyError, TypeError) as exc:
        raise DataError(f"{trial} lacks the field {exc} in traj_data.json or game.tw-pddl") from exc
    if task_type not in TASK_TYPES:
        return None
    found = _TASK_RE.search(grammar)
    if found is None:
        raise DataError(f"{game_path}: its grammar has no 'Your task is to: ...' line")
    return GameRecord(game_id, task_type, found.group(1), goal, problem, path=game_path)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{path} is not readable JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise DataError(f"{path} should hold a JSON object")
    return data
