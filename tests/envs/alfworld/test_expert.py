"""The two ALFWorld experts: the searching one wins while acting only on what it has seen."""

from __future__ import annotations

import gymnasium as gym
import pytest

from aem_envs.alfworld.env import ALFWorldEnv
from aem_envs.alfworld.expert import search_action, search_prior, seen_receptacles
from aem_envs.alfworld.native import NativeGame
from aem_envs.alfworld.state import parse_problem
from aem_envs.alfworld.tasks import bundled_games
from aem_envs.core.errors import ArgumentError

GAMES = 40


def _train_prior():
    return search_prior(parse_problem(r.problem) for r in bundled_games("train").values())


def _play(game: NativeGame, prior, limit: int = 50) -> list[str]:
    game.reset()
    history: list[str] = []
    while not game.won() and len(history) < limit:
        action = search_action(game, history, prior)
        _, ok = game.step(action)
        assert ok, f"the searching expert chose an inadmissible {action!r}"
        history.append(action)
    return history


def test_search_prior_counts_every_object_placement_of_the_train_split() -> None:
    problems = [parse_problem(r.problem) for r in bundled_games("train").values()]
    prior = search_prior(problems)
    assert sum(sum(c.values()) for c in prior.values()) == sum(len(s.in_recep) for _, s in problems)
    # Apples start in fridges and on counters far more often than in drawers.
    apples = prior["appletype"]
    assert apples["fridgetype"] > apples.get("drawertype", 0)


def test_searching_expert_wins_train_games_taking_only_what_it_has_seen() -> None:
    prior = _train_prior()
    wins, records = 0, list(bundled_games("train").values())[:GAMES]
    for record in records:
        game = NativeGame(parse_problem(record.problem), record.goal, record.instruction)
        history = _play(game, prior)
        wins += game.won()
        for step, action in enumerate(history):
            if action.startswith("take "):
                recep = action.split(" from ")[1]
                seen = seen_receptacles(game, history[:step])
                assert recep in {game.layout.names[r] for r in seen}, (record.id, action)
    assert wins >= 0.9 * len(records)


def test_searching_expert_does_not_know_where_the_target_is_hidden() -> None:
    """Moving the target to another unvisited receptacle changes nothing until it is seen."""
    prior = _train_prior()
    checked = 0
    for record in list(bundled_games("train").values())[:GAMES]:
        if record.task_type != "pick_and_place_simple":
            continue
        layout, state = parse_problem(record.problem)
        game = NativeGame((layout, state), record.goal, record.instruction)
        history = _play(game, prior)
        kind = record.goal.obj.lower() + "type"
        target, home = next((o, r) for o, r in sorted(state.in_recep) if layout.otype[o] == kind)
        first_visit = {
            a.removeprefix("go to "): i
            for i, a in reversed(list(enumerate(history)))
            if a.startswith("go to ")
        }
        # Locations the searcher stood at; a receptacle elsewhere it never saw.
        stood = {layout.recep_loc[r] for r in layout.receptacles if layout.names[r] in first_visit}
        stood.add(state.agent_loc)
        elsewhere = [
            r
            for r in layout.receptacles
            if layout.recep_loc[r] not in stood
            and (layout.rtype[r], kind) in layout.can_contain
            and r != home
            and layout.rtype[r] != record.goal.recep.lower() + "type"  # not already placed
        ]
        if not elsewhere or layout.names[home] not in first_visit:
            continue
        moved = state.copy()
        moved.in_recep = (moved.in_recep - {(target, home)}) | {(target, elsewhere[0])}
        other = NativeGame((layout, moved), record.goal, record.instruction)
        other_history = _play(other, prior)
        shared = first_visit[layout.names[home]]  # up to arriving where the target was
        assert other_history[:shared] == history[:shared], record.id
        checked += 1
    assert checked >= 3


def test_env_expert_keyword() -> None:
    env = gym.make("aem_envs:aem/ALFWorld-v0", expert="search", max_episode_steps=50)
    env.reset(seed=0)
    for _ in range(50):
        _, _, terminated, truncated, info = env.step(env.unwrapped.expert_action())
        assert info["action_valid"]
        if terminated or truncated:
            break
    assert info["won"]
    with pytest.raises(ArgumentError, match="expert='search'"):
        ALFWorldEnv(expert="oracle")


def test_the_train_prior_is_counted_once_per_process_without_flushing_the_game_cache() -> None:
    from aem_envs.alfworld import env as env_module

    env_module.train_prior.cache_clear()
    first, second = ALFWorldEnv(expert="search"), ALFWorldEnv(expert="search")
    try:
        first.reset(seed=0)
        cached = env_module._parsed.cache_info().currsize
        prior = first._prior()
        assert env_module._parsed.cache_info().currsize == cached  # counted past the cache
        assert second._prior() is prior and env_module.train_prior.cache_info().misses == 1
        assert prior == _train_prior()
    finally:
        first.close()
        second.close()
