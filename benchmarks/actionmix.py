"""Which commands a policy tried, and how often each was refused, from a bench run's episodes.

Why: a policy's invalid-action rate can rise because it got worse at a command or because it
tries a command that is often refused more often, and the two call for different fixes. The
small-agent grid's turn-mean runs were the second kind (twice the start's ``take`` attempts,
four in five refused: ``docs/small-agent.md``, "Invalid actions"). A command is the action's
first word (``go``, ``take``; WebShop's ``search[...]`` is ``search``); words under 1 % of the
turns are counted together as ``other``.

    python -m benchmarks.actionmix BENCH_OUT [BENCH_OUT ...]

Each ``BENCH_OUT`` is an ``aem bench --out`` folder with its episodes (``results.json`` names
each episode's trajectory file, relative to the folder).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from aem_envs.core.errors import DataError
from aem_envs.reply import REPLY_FORMAT
from aem_envs.wrappers.recorder import read_trajectory
from benchmarks.markdown import pipe_table
from benchmarks.results import load_results

#: Commands under this share of the turns are reported together as ``other``.
MIN_SHARE = 0.01


@dataclass(frozen=True)
class Mix:
    """The turns of one bench run, by command: how many, and how many were refused."""

    name: str
    turns: Counter[str]
    refused: Counter[str]

    @property
    def total(self) -> int:
        return sum(self.turns.values())

    def share(self, command: str) -> float:
        return self.turns[command] / max(self.total, 1)

    def refused_share(self, command: str) -> float:
        return self.refused[command] / max(self.turns[command], 1)


def command(action: str | None) -> str:
    """The action's first word: ``"take egg 1 from fridge 1"`` → ``"take"``."""
    match = re.match(r"\s*([A-Za-z_]+)", action or "")
    return match.group(1).lower() if match else ""


def reply_command(reply: str) -> str:
    """The command of a policy's whole reply (its action block's first word), for code that
    holds the model's text rather than the action the env received."""
    return command(REPLY_FORMAT.action_text(reply))


def steps(out: Path) -> Iterable[tuple[str, bool]]:
    """(command, valid) of every turn of every episode a bench folder recorded."""
    for episode in load_results(out)["episodes"]:
        trajectory = out / episode["trajectory"]
        if not trajectory.is_file():
            raise DataError(
                f"{trajectory} is missing: the action mix reads the episodes, which a bench "
                "run keeps only where it ran (rerun it, or keep its episodes/ folder)"
            )
        for row in read_trajectory(trajectory):
            if row.get("kind") == "step":
                yield (
                    command(row.get("action")),
                    bool(row.get("info", {}).get("action_valid", True)),
                )


def mix(out: Path) -> Mix:
    turns: Counter[str] = Counter()
    refused: Counter[str] = Counter()
    for name, valid in steps(out):
        turns[name] += 1
        refused[name] += not valid
    return Mix(out.name, turns, refused)


def _lumped(mixes: Sequence[Mix]) -> list[Mix]:
    """Commands under :data:`MIN_SHARE` in every run counted together as ``other``."""
    keep = {c for m in mixes for c in m.turns if m.share(c) >= MIN_SHARE and c}
    out = []
    for m in mixes:
        turns, refused = Counter[str](), Counter[str]()
        for c, n in m.turns.items():
            turns[c if c in keep else "other"] += n
            refused[c if c in keep else "other"] += m.refused[c]
        out.append(Mix(m.name, turns, refused))
    return out


def table(mixes: Sequence[Mix]) -> str:
    """Markdown: per run, its turns, refused share, and each command's share (refused share)."""
    mixes = _lumped(mixes)
    commands = sorted({c for m in mixes for c in m.turns}, key=lambda c: (c == "other", c))
    headers = ["run", "turns", "refused", *(f"`{c}` (refused)" for c in commands)]
    rows = [
        [
            m.name,
            str(m.total),
            f"{sum(m.refused.values()) / max(m.total, 1):.1%}",
            *(f"{m.share(c):.1%} ({m.refused_share(c):.0%})" for c in commands),
        ]
        for m in mixes
    ]
    return pipe_table(headers, rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.actionmix", description=__doc__)
    parser.add_argument("outs", type=Path, nargs="+", help="aem bench --out folders")
    args = parser.parse_args(argv)
    try:
        print(table([mix(out) for out in args.outs]))
    except DataError as exc:
        parser.error(str(exc))


if __name__ == "__main__":
    main()
