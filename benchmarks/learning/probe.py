"""Training curves of runs that played the same tasks, compared step by step.

Why: the grid's setting probes (learning rate, credit) decide on *training* episodes only,
before the grid goes on, and the runs of one config and seed draw the same tasks at every
step. A step's task draw moves every run's success and valid-action rate together (a hard
step is hard for all), so the comparison pairs the runs step by step: the mean per-step
difference and its standard error (the differences' std over √n) are free of that shared
variation, which an unpaired test over episodes would count as noise.

What the pairing cannot remove is the runs' own divergence: two runs of one config and seed
play the same first batch, then sample apart (on CPU their updates differ in the last bits),
and from there each carries its own offset for many steps, which the per-step standard error
does not count (``docs/small-agent.md``, "Invalid actions", measured it on two replicates). A
difference between single runs of two settings means something only well beyond that offset;
replicate runs (seeds) per setting are the test that counts it.

    python -m benchmarks.learning.probe BASE_RUN CANDIDATE_RUN... --steps 6-15
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aem_agent.grpo.run import METRICS_FILE
from aem_envs.core.errors import ArgumentError
from benchmarks.learning.collect import read_metrics

#: What the probes read: the training episodes' success and valid-action rates.
KEYS = ("episode/success_rate", "episode/valid_rate")


@dataclass(frozen=True)
class Paired:
    """One candidate against the base on one key, over the steps both logged in the window."""

    key: str
    steps: int
    base: float
    candidate: float
    difference: float
    se: float

    @property
    def z(self) -> float:
        """Difference over its SE; ±inf for a constant nonzero difference, 0 for none."""
        if self.se > 0:
            return self.difference / self.se
        return math.copysign(math.inf, self.difference) if self.difference else 0.0


def per_step(rows: Sequence[Mapping[str, Any]], key: str) -> dict[int, float]:
    """``key`` at each step of a run's metrics rows."""
    return {int(r["step"]): float(r[key]) for r in rows if key in r}


def paired(base: Mapping[int, float], candidate: Mapping[int, float], key: str) -> Paired:
    """Mean per-step difference ``candidate − base`` over the steps both have (≥ 2)."""
    steps = sorted(set(base) & set(candidate))
    if len(steps) < 2:
        raise ArgumentError(
            f"{key}: the runs share {len(steps)} logged steps in the window; 2 needed"
        )
    diffs = [candidate[s] - base[s] for s in steps]
    return Paired(
        key,
        len(steps),
        statistics.fmean(base[s] for s in steps),
        statistics.fmean(candidate[s] for s in steps),
        statistics.fmean(diffs),
        statistics.stdev(diffs) / math.sqrt(len(steps)),
    )


def compare(
    base: Path, candidates: Sequence[Path], first: int, last: int, keys: Sequence[str] = KEYS
) -> list[tuple[str, Paired]]:
    """Every candidate against ``base`` on every key, over steps ``first..last``."""
    rows = {run: read_metrics(run / METRICS_FILE) for run in (base, *candidates)}

    def window(run: Path, key: str) -> dict[int, float]:
        return {s: v for s, v in per_step(rows[run], key).items() if first <= s <= last}

    return [
        (run.name, paired(window(base, key), window(run, key), key))
        for run in candidates
        for key in keys
    ]


def table(base: Path, rows: Sequence[tuple[str, Paired]]) -> str:
    """Markdown: each candidate's window means against the base's, paired difference ± SE."""
    lines = [
        f"| run | key | steps | {base.name} | run | difference ± SE | z |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, p in rows:
        lines.append(
            f"| {name} | {p.key} | {p.steps} | {p.base:.3f} | {p.candidate:.3f} "
            f"| {p.difference:+.3f} ± {p.se:.3f} | {p.z:+.1f} |"
        )
    return "\n".join(lines)


def _window(text: str) -> tuple[int, int]:
    first, sep, last = text.partition("-")
    if not (sep and first.isdigit() and last.isdigit()) or int(first) > int(last):
        raise argparse.ArgumentTypeError(f"--steps {text!r}: give FIRST-LAST, e.g. 6-15")
    return int(first), int(last)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.learning.probe", description=__doc__
    )
    parser.add_argument("base", type=Path, help="the run folder compared against")
    parser.add_argument("candidates", type=Path, nargs="+", help="run folders to compare")
    parser.add_argument("--steps", type=_window, required=True, help="FIRST-LAST, inclusive")
    args = parser.parse_args(argv)
    for run in (args.base, *args.candidates):
        if not (run / METRICS_FILE).is_file():
            parser.error(f"{run} holds no metrics.csv: give run folders (…/runs/grpo-seed0)")
    print(table(args.base, compare(args.base, args.candidates, *args.steps)))


if __name__ == "__main__":
    main()
