"""The generator: deterministic rebuilds of bundled games, and the upstream verification."""

from __future__ import annotations

import json

import pytest

from aem_envs.alfworld.generate import build
from aem_envs.alfworld.native import NativeGame
from aem_envs.alfworld.pddl import TASK_TYPES, Goal, Vocabulary
from aem_envs.alfworld.tasks import INDEX_FILE, bundled_games


@pytest.fixture(scope="module")
def vocab(alfworld_engine: None) -> Vocabulary:
    return Vocabulary.from_wheel()


def _seed() -> int:
    return json.loads(INDEX_FILE.read_text())["seed"]


@pytest.mark.parametrize("split", ["train", "valid_seen", "valid_unseen"])
def test_bundled_games_rebuild_identically(split: str, vocab: Vocabulary) -> None:
    games = bundled_games(split)
    for task_type in TASK_TYPES:
        for index in (0, 1):
            rebuilt = build.build_game(_seed(), split, task_type, index, vocab)
            stored = games[rebuilt["id"]]
            assert rebuilt["problem"] == stored.problem
            assert tuple(rebuilt["plan"]) == stored.plan
            assert rebuilt["instruction"] == stored.instruction


def test_eval_splits_keep_to_their_floor_plans() -> None:
    for task_type in TASK_TYPES:
        seen = set(build.floor_plans_for(task_type, "valid_seen"))
        unseen = set(build.floor_plans_for(task_type, "valid_unseen"))
        assert unseen and seen and unseen <= build.UNSEEN_FLOOR_PLANS
        assert not seen & build.UNSEEN_FLOOR_PLANS


def test_rooms_are_dense_and_goals_not_already_met() -> None:
    for record in list(bundled_games("train").values())[::10]:
        assert record.problem.count(" - object\n") >= 10
        assert 0 < len(record.plan) <= 50
        game = NativeGame(record.problem, record.goal, record.instruction)
        game.reset()
        assert not game.won()


def test_generate_game_verifies_on_the_upstream_engine(vocab: Vocabulary) -> None:
    from aem_envs.alfworld.upstream import UpstreamEngine

    engine = UpstreamEngine()
    try:
        game = build.generate_game(
            _seed(), "valid_unseen", "look_at_obj_in_light", 0, engine=engine, vocab=vocab
        )
        assert game["problem"] == bundled_games("valid_unseen")[game["id"]].problem
        broken = game["plan"][:-1]
        with pytest.raises(build.GenerationError, match="does not win"):
            build.verify(
                game["problem"],
                Goal("look_at_obj_in_light", **game["goal"]),
                game["instruction"],
                broken,
                engine,
            )
    finally:
        engine.close()
