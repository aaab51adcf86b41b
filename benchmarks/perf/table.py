"""``aem bench perf``: every perf script's rows gathered into one table (markdown + JSON).

Each module ``benchmarks.perf.<name>`` (written alongside the env it measures) exposes
``measure(quick: bool = False) -> list[dict]`` with rows ``{"benchmark", "metric", "ours",
"baseline", "ratio", "unit", "note"}``. A module that is absent is left out; one that
fails becomes a row carrying its error, so one broken engine never hides the others.
The README's performance table is this command's markdown output.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import time
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aem_envs.core.io import atomic_write_json, atomic_write_text
from benchmarks.published import speed_notes

#: Perf modules in the order the table lists them.
MODULES: tuple[str, ...] = ("alfworld", "webshop", "swe", "aem_overhead")
COLUMNS: tuple[str, ...] = ("benchmark", "metric", "ours", "baseline", "ratio", "unit", "note")


def collect(quick: bool = False, modules: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Rows of every perf module that exists (default :data:`MODULES`); a failure is a row."""
    rows: list[dict[str, Any]] = []
    for name in MODULES if modules is None else modules:
        module_name = f"{__package__}.{name}"
        if importlib.util.find_spec(module_name) is None:
            continue
        tic = time.perf_counter()
        try:
            measured = list(importlib.import_module(module_name).measure(quick=quick))
        except Exception as exc:
            last = traceback.extract_tb(exc.__traceback__)[-1]
            where = f"{Path(last.filename).name}:{last.lineno}"
            measured = [
                {
                    "benchmark": name,
                    "metric": "error",
                    "note": f"{type(exc).__name__}: {exc} ({where})",
                    "error": True,
                }
            ]
        seconds = round(time.perf_counter() - tic, 2)
        rows.extend(
            {**dict.fromkeys(COLUMNS), **row, "module": name, "module_seconds": seconds}
            for row in measured
        )
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def render_markdown(rows: list[dict[str, Any]], *, quick: bool) -> str:
    lines = [
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
        *("| " + " | ".join(_cell(row.get(c)) for c in COLUMNS) + " |" for row in rows),
    ]
    if not rows:
        lines = ["No perf module is installed (benchmarks/perf/<name>.py)."]
    mode = "quick" if quick else "full"
    footer = [
        "",
        f"Measured with `aem bench perf{' --quick' if quick else ''}` ({mode} mode) "
        f"on {os.cpu_count()} CPU cores. `ratio` compares ours with the baseline as each row "
        "defines it (see `note`).",
        "",
        "Seen elsewhere: " + " ".join(speed_notes()),
    ]
    return "\n".join(lines + footer) + "\n"


def write_table(out: str | os.PathLike[str], *, quick: bool = False) -> dict[str, Path]:
    """Measure, then write ``perf.md`` and ``perf.json`` into ``out``."""
    rows = collect(quick=quick)
    out = Path(out)
    payload = {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": quick,
        "cpu_count": os.cpu_count(),
        "rows": rows,
    }
    return {
        "markdown": atomic_write_text(out / "perf.md", render_markdown(rows, quick=quick)),
        "json": atomic_write_json(out / "perf.json", payload),
    }
