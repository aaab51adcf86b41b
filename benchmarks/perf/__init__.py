"""Performance measurements of the envs and the AEM trainer, gathered by ``aem bench perf``.

Each module ``benchmarks/perf/<name>.py`` exposes ``measure(quick: bool = False)`` returning
rows made by :func:`perf_row`, and ``main()``; :mod:`benchmarks.perf.table` gathers them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any


def perf_row(
    benchmark: str,
    metric: str,
    ours: float | None,
    baseline: float | None,
    unit: str,
    note: str,
    *,
    ratio: float | None = None,
    digits: int = 4,
) -> dict[str, Any]:
    """One row of the performance table, measured beside its baseline in the same run.

    ``ratio`` defaults to ``baseline / ours`` — how many times better ours is for a time or
    size; pass it explicitly where the natural ratio is the other way (an overhead).
    """
    if ratio is None and baseline is not None and ours:
        ratio = baseline / ours
    return {
        "benchmark": benchmark,
        "metric": metric,
        "ours": None if ours is None else round(ours, digits),
        "baseline": None if baseline is None else round(baseline, digits),
        "ratio": None if ratio is None else round(ratio, 2),
        "unit": unit,
        "note": note,
    }


def perf_main(
    measure: Callable[..., list[dict[str, Any]]],
    doc: str | None,
    quick_help: str,
    argv: Sequence[str] | None = None,
) -> int:
    """The command line every perf module shares: measure, print the rows as ``aem bench perf``
    prints its table."""
    from benchmarks.perf.table import render_markdown

    parser = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=quick_help)
    args = parser.parse_args(argv)
    print(render_markdown(measure(quick=args.quick), quick=args.quick), end="")
    return 0
