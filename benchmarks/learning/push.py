"""Where a run's policy-gradient push went, by command, in its own training batches.

Why: under a token-mean loss (``loss_type: dapo``, the grid's GRPO and AEM arms) each turn's
reply enters the gradient as α · A times the gradient of its log-probability (A its advantage,
α AEM's weight where AEM is applied, 1 otherwise; the same normaliser for every turn), so the
sum of α · A over the turns that sent a command says whether the update made that command
likelier or less likely, and how hard (a per-row mean loss divides each by its reply's
length, which this does not). The small-agent grid's GRPO runs drifted towards ``take``
commands the env refused while its AEM runs did not (``docs/small-agent.md``); this reads
the pushes the runs trained on, from the unit rows the drift probe writes
(:mod:`benchmarks.learning.drift`; every ``drift_every`` steps). Every run gets both sums: Σ A
(what a GRPO run trains on) and Σ α · A with α recomputed from each turn's H̄ within its group
(what an AEM run trains on, and what AEM would have made of a GRPO run's batch), and, split by
the advantage's sign, the turns' mean H̄ and what α adds to each side's push.

    python -m benchmarks.learning.push RUN_DIR [RUN_DIR ...] [--steps FIRST LAST] [--by-sign]

A turn counts as refused when its own reward is negative (the invalid-action penalty).
Commands under 1 % of the turns are counted together as ``other``.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.actionmix import MIN_SHARE
from benchmarks.learning.drift import read_units
from benchmarks.markdown import pipe_table


def commanded(units: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The unit rows that carry their turn's command and reward (rows a run wrote before the
    probe recorded them have neither)."""
    return [u for u in units if u.get("command") is not None and "reward" in u]


def entropy_alpha(
    units: Sequence[dict[str, Any]], *, lam: float | None = None, gate: float | None = None
) -> list[float]:
    """AEM's α for every row, from its H̄ among the rows of its step and group: the weight an
    AEM run applies, and the one a GRPO run would have (its logged α is 1: AEM observes).
    λ and the gate (the H̄ range under which a group's α is 1) default to AEM's own, which the
    grid's AEM arms run."""
    import torch

    from aem_agent.credit.aem import AEM
    from aem_agent.credit.modulation import group_alpha

    if not units:
        return []
    aem = AEM()
    keys = {key: i for i, key in enumerate(sorted({(u["step"], u["group"]) for u in units}))}
    alpha, _ = group_alpha(
        torch.tensor([u["entropy"] for u in units], dtype=torch.float64),
        torch.tensor([keys[(u["step"], u["group"])] for u in units]),
        torch.ones(len(units), dtype=torch.bool),
        lam=aem.lam if lam is None else lam,
        eps=aem.eps,
        min_range=aem.min_range if gate is None else gate,
    )
    return [float(a) for a in alpha]


def with_alpha(
    units: Sequence[dict[str, Any]], *, lam: float | None = None, gate: float | None = None
) -> list[dict[str, Any]]:
    """The rows, each with ``alpha`` recomputed by :func:`entropy_alpha`."""
    alpha = entropy_alpha(units, lam=lam, gate=gate)
    return [{**u, "alpha": a} for u, a in zip(units, alpha, strict=True)]


def push_by_sign(
    units: Sequence[dict[str, Any]], *, lam: float | None = None, gate: float | None = None
) -> list[dict[str, Any]]:
    """For the turns with A > 0 and those with A < 0, :func:`_stats` (every row counts: the
    split needs no command). AEM's account of entropy rests on which side its typical
    (low-H̄) replies are on: α amplifies that side, and a net positive push to confident
    replies sharpens the policy."""
    rows = with_alpha(units, lam=lam, gate=gate)
    sides = {
        "A > 0": [u for u in rows if u["advantage"] > 0],
        "A < 0": [u for u in rows if u["advantage"] < 0],
    }
    return [{"sign": sign, **_stats(cell, len(rows))} for sign, cell in sides.items() if cell]


def sign_table(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown of :func:`push_by_sign`'s rows (pushes per thousand turns), with what α adds
    to each side's push, Σ (α − 1)·A."""
    return pipe_table(
        ["advantage", "turns", "share", "mean H̄ (nats)", "mean α", "Σ A (‰)", "Σ (α−1)·A (‰)"],
        [
            [
                r["sign"],
                str(r["turns"]),
                f"{100 * r['share']:.1f} %",
                f"{r['entropy']:.3f}",
                f"{r['alpha']:.3f}",
                f"{1000 * r['push']:+.1f}",
                f"{1000 * (r['push_alpha'] - r['push']):+.1f}",
            ]
            for r in rows
        ],
    )


def push_by_command(
    units: Sequence[dict[str, Any]], *, lam: float | None = None, gate: float | None = None
) -> list[dict[str, Any]]:
    """Per (command, refused), :func:`_stats`, most turns first; only :func:`commanded` rows
    count."""
    rows = with_alpha(commanded(units), lam=lam, gate=gate)
    if not rows:
        return []
    total = len(rows)
    counts = Counter(u["command"] for u in rows)
    cells: dict[tuple[str, bool], list[dict[str, Any]]] = defaultdict(list)
    for u in rows:
        name = u["command"] if counts[u["command"]] / total >= MIN_SHARE else "other"
        cells[(name, u["reward"] < 0)].append(u)
    table = [
        {"command": name, "refused": refused, **_stats(cell, total)}
        for (name, refused), cell in cells.items()
    ]
    return sorted(table, key=lambda r: (-r["turns"], r["command"], r["refused"]))


def _stats(cell: Sequence[dict[str, Any]], total: int) -> dict[str, Any]:
    """A cell's turns, their share of all ``total`` turns, their mean A, H̄ and α (from H̄,
    :func:`entropy_alpha`), and the pushes Σ A / N and Σ α · A / N (N = ``total``)."""
    return {
        "turns": len(cell),
        "share": len(cell) / total,
        "advantage": sum(u["advantage"] for u in cell) / len(cell),
        "entropy": sum(u["entropy"] for u in cell) / len(cell),
        "alpha": sum(u["alpha"] for u in cell) / len(cell),
        "push": sum(u["advantage"] for u in cell) / total,
        "push_alpha": sum(u["alpha"] * u["advantage"] for u in cell) / total,
    }


def push_table(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown of :func:`push_by_command`'s rows (pushes per thousand turns)."""
    return pipe_table(
        ["command", "refused", "turns", "share", "mean A", "mean α", "Σ A (‰)", "Σ α·A (‰)"],
        [
            [
                f"`{r['command'] or '?'}`",
                "yes" if r["refused"] else "no",
                str(r["turns"]),
                f"{100 * r['share']:.1f} %",
                f"{r['advantage']:+.3f}",
                f"{r['alpha']:.3f}",
                f"{1000 * r['push']:+.1f}",
                f"{1000 * r['push_alpha']:+.1f}",
            ]
            for r in rows
        ],
    )


def net_table(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown of :func:`push_by_command`'s rows summed over refusal: each command's net push
    (per thousand turns), most turns first. A command both refused and accepted is pushed by
    both rows at once, since the two share their first tokens."""
    totals: dict[str, list[float]] = {}
    for r in rows:
        cell = totals.setdefault(r["command"], [0.0, 0.0, 0.0])
        cell[0] += r["turns"]
        cell[1] += r["push"]
        cell[2] += r["push_alpha"]
    return pipe_table(
        ["command", "turns", "Σ A (‰)", "Σ α·A (‰)"],
        [
            [f"`{name or '?'}`", str(int(turns)), f"{1000 * push:+.1f}", f"{1000 * alpha:+.1f}"]
            for name, (turns, push, alpha) in sorted(totals.items(), key=lambda kv: -kv[1][0])
        ],
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.learning.push",
        description="Each command's summed advantage (with and without AEM's α) in a run's "
        "training batches.",
    )
    parser.add_argument("runs", type=Path, nargs="+", help="run folders (runs/<arm>-seed<s>)")
    parser.add_argument(
        "--steps", type=int, nargs=2, metavar=("FIRST", "LAST"), help="only these steps"
    )
    parser.add_argument("--lam", type=float, help="AEM's λ (default: AEM's, the grid's)")
    parser.add_argument("--gate", type=float, help="AEM's least H̄ range (default: likewise)")
    parser.add_argument(
        "--by-sign",
        action="store_true",
        help="only the split by the advantage's sign, over every logged unit row (runs from "
        "before the probe recorded commands too)",
    )
    args = parser.parse_args(argv)
    first, last = args.steps or (0, 10**9)
    for run in args.runs:
        logged = [u for u in read_units(run) if first <= u["step"] <= last]
        if args.by_sign:
            if not logged:
                parser.error(f"{run} has no unit rows (units.csv.gz) in the asked steps")
            count = len({int(u["step"]) for u in logged})
            print(f"## {run}: {len(logged)} turns of {count} logged steps\n")
            print(sign_table(push_by_sign(logged, lam=args.lam, gate=args.gate)) + "\n")
            continue
        units = commanded(logged)
        rows = push_by_command(units, lam=args.lam, gate=args.gate)
        if not rows:
            where = f"in steps {first}-{last}" if args.steps else "yet"
            parser.error(
                f"{run} has no unit rows with a command and a reward {where}: the drift "
                "probe logs them every `drift_every` steps, in runs since this tool exists"
            )
        steps = sorted({int(u["step"]) for u in units})
        applied = "Σ α·A" if any(u["alpha"] != 1.0 for u in units) else "Σ A"
        print(f"## {run.name}: steps {', '.join(map(str, steps))} (trained on {applied})\n")
        print(push_table(rows) + "\n")
        print(net_table(rows) + "\n")
        print(sign_table(push_by_sign(units, lam=args.lam, gate=args.gate)) + "\n")


if __name__ == "__main__":
    main()
