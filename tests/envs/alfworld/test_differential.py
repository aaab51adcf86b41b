"""The fast path against the oracle: identical episodes from the native and upstream engines.

Each game is played once on both engines with the same actions: a seeded random walk over
the admissible commands (with a few inadmissible ones mixed in), then the expert until the
game is won or the step limit ends it. Observations, admissible sets, rewards,
termination and ``won`` must be identical at every step.
"""

from __future__ import annotations

import random

import pytest

from aem_envs.alfworld.env import ALFWorldEnv
from aem_envs.alfworld.games import SPLITS, bundled_games
from aem_envs.alfworld.pddl import TASK_TYPES

GAMES_PER_TASK_TYPE = 9
RANDOM_STEPS = 15
INADMISSIBLE = ("go to the moon", "take sky 1 from floor 1", "")


def _smallest_games() -> list[tuple[str, str]]:
    """The cheapest games per task type (Fast Downward's grounding grows with room size)."""
    chosen = []
    for task_type in TASK_TYPES:
        pool = [
            (len(g.problem), split, g.id)
            for split in SPLITS
            for g in bundled_games(split).values()
            if g.task_type == task_type
        ]
        chosen += [(split, gid) for _, split, gid in sorted(pool)[:GAMES_PER_TASK_TYPE]]
    return chosen


@pytest.mark.slow
def test_native_and_upstream_engines_agree(alfworld_engine: None) -> None:
    native, upstream = ALFWorldEnv(engine="native"), ALFWorldEnv(engine="upstream")
    games = _smallest_games()
    assert len(games) >= 50
    wins = 0
    try:
        for n, (split, task_id) in enumerate(games):
            rng = random.Random(n)
            options = {"split": split, "task_id": task_id}
            first = native.reset(options=options), upstream.reset(options=options)
            assert first[0] == first[1], task_id
            done, steps = False, 0
            while not done:
                if steps < RANDOM_STEPS:
                    admissible = native.admissible_actions or []
                    action = rng.choice([*admissible, rng.choice(INADMISSIBLE)])
                else:
                    action = native.expert_action()
                a, b = native.step(action), upstream.step(action)
                assert a == b, (task_id, steps, action)
                done = a[2] or a[3]
                steps += 1
            wins += a[4]["won"]
    finally:
        upstream.close()
    assert wins >= len(games) * 0.9
