"""ALFWorld speed: reset and step latency and steps/s, fast path beside the upstream engine.

Both engines play the same bundled games with the same actions in one run, through
``ALFWorldEnv`` (what a user calls): ``engine="native"`` (ours) and ``engine="upstream"``
(textworld's PDDL env + Fast Downward + alfworld's wrappers, the baseline). An upstream
reset is ``load`` + ``reset`` of the game, which is what ALFWorld's gym env does on each new
episode; a native reset is measured cold (its problem parsed for the first time).

The actions per game are a short seeded random walk over the admissible commands followed
by the expert's moves, so steps cover moves, opening, taking, placing and transforming.
Targets (issue 3): reset p50 ≥ 10× faster, step p50 ≥ 4× faster. ``ratio`` is
baseline ÷ ours for latencies and ours ÷ baseline for steps/s (how many times faster ours is).

Run ``python -m benchmarks.perf.alfworld [--quick]``; ``aem bench perf`` gathers the rows.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from aem_envs.alfworld import expert
from aem_envs.alfworld.env import ALFWorldEnv
from aem_envs.alfworld.native import NativeGame
from aem_envs.alfworld.pddl import TASK_TYPES
from aem_envs.alfworld.tasks import bundled_games
from benchmarks.perf import perf_main, perf_row

BENCHMARK = "alfworld"
SPLIT = "valid_unseen"
RANDOM_STEPS = 4
MAX_STEPS = 20


def _games(per_task_type: int) -> list[str]:
    games = bundled_games(SPLIT)
    return [
        gid
        for task_type in TASK_TYPES
        for gid in [g.id for g in games.values() if g.task_type == task_type][:per_task_type]
    ]


def _actions(task_id: str, seed: int) -> list[str]:
    """A seeded random prefix then the expert, recorded on a bare native game (outside the
    env, so the env's parse cache stays cold for the timed resets)."""
    record = bundled_games(SPLIT)[task_id]
    game = NativeGame(record.problem, record.goal, record.instruction)
    game.reset()
    rng = random.Random(seed)
    actions: list[str] = []
    while not game.won() and len(actions) < MAX_STEPS:
        if len(actions) < RANDOM_STEPS:
            action = rng.choice(game.admissible())
        else:
            action = expert.next_action(game)
        game.step(action)
        actions.append(action)
    return actions


def _time(env: ALFWorldEnv, plays: list[tuple[str, list[str]]]) -> tuple[list[float], list[float]]:
    resets, steps = [], []
    for task_id, actions in plays:
        tic = time.perf_counter()
        env.reset(options={"split": SPLIT, "task_id": task_id})
        resets.append(time.perf_counter() - tic)
        for action in actions:
            tic = time.perf_counter()
            env.step(action)
            steps.append(time.perf_counter() - tic)
    return resets, steps


def measure(quick: bool = False) -> list[dict[str, Any]]:
    """Rows for ``aem bench perf``: p50/p95 reset and step (ms) and steps/s, both engines."""
    ids = _games(1 if quick else 3)
    plays = [(gid, _actions(gid, n)) for n, gid in enumerate(ids)]
    ours_env, base_env = ALFWorldEnv(engine="native"), ALFWorldEnv(engine="upstream")
    try:
        ours = _time(ours_env, plays)
        base = _time(base_env, plays)
    finally:
        ours_env.close()
        base_env.close()
    n_steps = len(ours[1])
    note = (
        f"{len(ids)} bundled {SPLIT} games, {n_steps} steps, same actions on both engines; "
        "native resets cold (problem parsed on first use)"
    )
    rows = []
    for name, ours_s, base_s in (("reset", ours[0], base[0]), ("step", ours[1], base[1])):
        for q in (50, 95):
            o, b = (float(np.percentile(x, q)) * 1e3 for x in (ours_s, base_s))
            rows.append(perf_row(BENCHMARK, f"{name} p{q}", o, b, "ms", note))
    o, b = n_steps / sum(ours[1]), n_steps / sum(base[1])
    rows.append(perf_row(BENCHMARK, "steps/s", o, b, "steps/s", note, ratio=o / b))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    return perf_main(measure, __doc__, "one game per task type", argv)


if __name__ == "__main__":
    raise SystemExit(main())
