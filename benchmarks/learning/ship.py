"""Which trained small agent ships as ``aem-tiny``: a rule fixed before the grid's results.

Why a module and not a judgement call: the shipped policy must not be picked by its held-out
score (that would report the best of many draws as if it were one). The rule picks the arm by
*training* success, the run by seed, and reads held-out numbers only to decide whether the
picked run ships at all. ``docs/models.md`` states the rule and when it was written.

    python -m benchmarks.learning.ship benchmarks/learning/results/alfworld-small
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from aem_envs.core.errors import ArgumentError
from benchmarks.learning.collect import SAMPLED_DIR, read_sampled
from benchmarks.learning.config import START_DIR, TRAIN_WINDOW

#: The run of the chosen arm that ships (its last model, ``final/``).
SHIPPED_SEED = 0
#: Standard errors of the difference by which the shipped run must beat the start.
MIN_Z = 2.0
#: The arms the choice waits for: every seed of these must be done before anything ships.
REQUIRED_ARMS = ("grpo", "aem")


@dataclass(frozen=True)
class Choice:
    """The outcome of the rule: the arm and run picked, and whether they ship."""

    arm: str
    run: str
    train_success: dict[str, float]
    heldout_sampled: float | None
    start_sampled: float | None
    z: float | None
    ships: bool
    reason: str


def train_success(run: Mapping[str, Any], window: int = TRAIN_WINDOW) -> float:
    """Mean training-episode success over a run's last ``window`` steps."""
    points = run["curves"].get("episode/success_rate") or []
    if not points:
        raise ArgumentError(f"run {run['name']} recorded no training success")
    tail = [value for _, value in sorted(points)[-window:]]
    return sum(tail) / len(tail)


def choose_arm(runs: Sequence[Mapping[str, Any]], required: Sequence[str] = REQUIRED_ARMS) -> str:
    """The arm with the highest mean training success over its finished seeds.

    Ties go to the earlier arm of ``required``, then by name, so the baseline wins a tie.
    Refuses while any seed of a required arm is unfinished: choosing early, then again
    later, would be choosing twice.
    """
    done: dict[str, list[float]] = {}
    for run in runs:
        if run["status"] != "done":
            if run["algo"] in required:
                raise ArgumentError(
                    f"run {run['name']} is {run['status']}: the choice waits for every run of "
                    f"{', '.join(required)}"
                )
            continue
        done.setdefault(run["algo"], []).append(train_success(run))
    missing = [arm for arm in required if arm not in done]
    if missing:
        raise ArgumentError(f"no finished run of {', '.join(missing)}: nothing to choose from")
    order = {arm: i for i, arm in enumerate(required)}
    return max(
        sorted(done, key=lambda a: (order.get(a, len(order)), a)),
        key=lambda a: sum(done[a]) / len(done[a]),
    )


def sampled_success(folder: Path) -> tuple[float, int] | None:
    """(success share, episodes) of a finished sampled held-out pass, or None."""
    sampled = read_sampled(folder)
    return (sampled["success"], sampled["episodes"]) if sampled else None


def difference_z(shipped: tuple[float, int], start: tuple[float, int]) -> float:
    """The difference of two success shares over its standard error (independent binomials)."""
    (p1, n1), (p0, n0) = shipped, start
    se = math.sqrt(p1 * (1 - p1) / n1 + p0 * (1 - p0) / n0)
    diff = p1 - p0
    return math.inf if se == 0 and diff > 0 else (diff / se if se else 0.0)


def choose(out: Path) -> Choice:
    """Apply the rule to a grid's output folder (its results.json and sampled/ passes)."""
    results_file = out / "results.json"
    if not results_file.is_file():
        raise ArgumentError(f"{results_file} does not exist: run the grid first")
    runs = json.loads(results_file.read_text())["runs"]
    arm = choose_arm(runs)
    name = f"{arm}-seed{SHIPPED_SEED}"
    scores = {
        r["name"]: train_success(r) for r in runs if r["algo"] == arm and r["status"] == "done"
    }
    shipped = sampled_success(out / SAMPLED_DIR / name)
    start = sampled_success(out / SAMPLED_DIR / START_DIR)
    if shipped is None or start is None:
        missing = name if shipped is None else "start"
        return Choice(arm, name, scores, None, None, None, False, f"no sampled pass of {missing}")
    z = difference_z(shipped, start)
    ships = z > MIN_Z
    reason = (
        f"held-out sampled success {shipped[0]:.1%} against the start's {start[0]:.1%}: "
        f"{z:+.1f} standard errors ({'>' if ships else '<='} {MIN_Z:g})"
    )
    return Choice(arm, name, scores, shipped[0], start[0], z, ships, reason)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the grid's output folder")
    args = parser.parse_args(argv)
    try:
        choice = choose(args.out)
    except ArgumentError as exc:  # not yet choosable: one line, not a traceback
        parser.exit(2, f"ship: {exc}\n")
    print(json.dumps(asdict(choice), indent=2))


if __name__ == "__main__":
    main()
