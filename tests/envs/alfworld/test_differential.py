"""The fast path against the oracle: identical episodes from the native and upstream engines.

Each game is played once on both engines with the same actions: a seeded random walk over
the admissible commands (with a few inadmissible ones mixed in), then the expert until the
game is won or the step limit ends it. Observations, admissible sets, rewards,
termination and ``won`` must be identical at every step.

Which bundled games: by default the 9 smallest per task type (54 games, about 8 minutes on
two busy cores: the upstream engine needs seconds per game). ``AEM_DIFFERENTIAL=all`` plays
every bundled game (504, over an hour on the same machine). Games in ALFWorld's on-disk
layout (read by path, as real data is) and the fallback to the upstream engine for a game
the native engine cannot model are checked on every run.
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path

import pytest

from aem_envs.alfworld.env import ALFWorldEnv
from aem_envs.alfworld.pddl import TASK_TYPES
from aem_envs.alfworld.state import UnsupportedGame, parse_problem
from aem_envs.alfworld.tasks import SPLITS, bundled_games
from aem_envs.alfworld.upstream import UpstreamEngine
from tests.envs.alfworld.conftest import write_real_layout

GAMES_PER_TASK_TYPE = 9
RANDOM_STEPS = 15
INADMISSIBLE = ("go to the moon", "take sky 1 from floor 1", "")
EVERY_GAME = os.environ.get("AEM_DIFFERENTIAL") == "all"


def _selected_games() -> list[tuple[str, str]]:
    """Every bundled game, or the cheapest per task type (grounding grows with room size)."""
    chosen = []
    for task_type in TASK_TYPES:
        pool = sorted(
            (len(g.problem), split, g.id)
            for split in SPLITS
            for g in bundled_games(split).values()
            if g.task_type == task_type
        )
        if not EVERY_GAME:
            pool = pool[:GAMES_PER_TASK_TYPE]
        chosen += [(split, gid) for _, split, gid in pool]
    return chosen


@pytest.fixture(scope="module")
def engines(alfworld_engine: None):
    """One env per engine for the whole module: upstream engines are costly to make."""
    native, upstream = ALFWorldEnv(engine="native"), ALFWorldEnv(engine="upstream")
    yield native, upstream
    native.close()
    upstream.close()


def _play_both(native: ALFWorldEnv, upstream: ALFWorldEnv, options: dict, seed: int) -> None:
    """Play one game on both engines with the same actions, comparing every step."""
    rng = random.Random(seed)
    task_id = options["task_id"]
    first = native.reset(options=options), upstream.reset(options=options)
    assert first[0] == first[1], task_id
    done, steps = False, 0
    while not done:
        if steps < RANDOM_STEPS:
            action = rng.choice([*(native.admissible_actions or []), rng.choice(INADMISSIBLE)])
        else:
            action = native.expert_action()
        result, other = native.step(action), upstream.step(action)
        assert result == other, (task_id, steps, action)
        done = result[2] or result[3]
        steps += 1


@pytest.mark.slow
@pytest.mark.parametrize(("split", "task_id"), _selected_games())
def test_native_and_upstream_engines_agree(engines, split: str, task_id: str) -> None:
    native, upstream = engines
    _play_both(native, upstream, {"split": split, "task_id": task_id}, sum(map(ord, task_id)))


def test_the_default_selection_covers_every_task_type() -> None:
    games = _selected_games()
    types = {bundled_games(split)[gid].task_type for split, gid in games}
    assert types == set(TASK_TYPES)
    total = sum(len(bundled_games(split)) for split in SPLITS)
    assert len(games) == (total if EVERY_GAME else GAMES_PER_TASK_TYPE * len(TASK_TYPES))


@pytest.mark.slow
def test_real_layout_games_agree(engines, tmp_path: Path) -> None:
    """Games read by path from ALFWorld's layout, as real data is, on both engines."""
    del engines  # only for the engine rule; these envs read the written folder
    ids = write_real_layout(tmp_path, "valid_unseen", 4)
    native = ALFWorldEnv(data_dir=tmp_path, engine="native")
    upstream = ALFWorldEnv(data_dir=tmp_path, engine="upstream")
    try:
        for n, task_id in enumerate(ids):
            _play_both(native, upstream, {"split": "valid_unseen", "task_id": task_id}, n)
    finally:
        native.close()
        upstream.close()


def _second_location(problem: str) -> str:
    """The problem with its first receptacle standing at a second location as well."""
    found = re.search(r"\(receptacleAtLocation (\S+) (\S+)\)", problem, flags=re.IGNORECASE)
    assert found is not None
    other = next(
        loc
        for loc in re.findall(r"\(receptacleAtLocation \S+ (\S+)\)", problem, flags=re.I)
        if loc != found.group(2)
    )
    extra = f"(receptacleAtLocation {found.group(1)} {other})"
    return problem.replace(found.group(0), f"{found.group(0)}\n{extra}", 1)


def test_a_game_the_native_engine_cannot_model_runs_on_upstream(
    alfworld_engine: None, tmp_path: Path
) -> None:
    record = next(iter(bundled_games("valid_seen").values()))
    with pytest.raises(UnsupportedGame, match="more than one location"):
        parse_problem(_second_location(record.problem))
    (task_id,) = write_real_layout(tmp_path, "valid_seen", 1, edit=_second_location)
    native = ALFWorldEnv(data_dir=tmp_path)  # engine="native", the default
    oracle = ALFWorldEnv(data_dir=tmp_path, engine="upstream")
    try:
        options = {"split": "valid_seen", "task_id": task_id}
        first, expected = native.reset(options=options), oracle.reset(options=options)
        assert first == expected
        assert isinstance(native._game, UpstreamEngine)
        for action in [*expected[1]["admissible_actions"][:3], "look", "dance"]:
            assert native.step(action) == oracle.step(action), action
    finally:
        native.close()
        oracle.close()
