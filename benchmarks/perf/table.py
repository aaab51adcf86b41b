"""``aem bench perf``: every perf script's rows gathered into one table (markdown + JSON).

Each module ``benchmarks.perf.<name>`` (written alongside the env it measures) exposes
``measure(quick: bool = False) -> list[dict]`` with rows ``{"benchmark", "metric", "ours",
"baseline", "ratio", "unit", "note"}``. A module that is absent is left out; one that
fails (or runs past its time limit) becomes a row carrying its error, so one broken engine
never hides the others. Each module runs in its own Python process: memory and thread
settings one measurement leaves behind (torch threads, a loaded model, a warm cache) must
not leak into the next one's numbers. The table of ``docs/performance.md`` (and the
README's headline rows, taken from it) is this command's markdown output.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aem_envs.core.io import atomic_write_json, atomic_write_text
from benchmarks.markdown import pipe_table
from benchmarks.published import speed_notes

#: Perf modules in the order the table lists them.
MODULES: tuple[str, ...] = (
    "alfworld", "webshop", "webshop_store", "swe", "swe_concurrency", "remote", "ray_vec",
    "aem_overhead", "train_step", "agent_models", "grid_step",
)  # fmt: skip
COLUMNS: tuple[str, ...] = ("benchmark", "metric", "ours", "baseline", "ratio", "unit", "note")
#: Seconds one module may run before it is stopped and reported as an error row.
MODULE_TIMEOUT = 1800.0

_CHILD = (
    "import importlib, json, sys\n"
    "rows = importlib.import_module(sys.argv[1]).measure(quick=sys.argv[2] == '1')\n"
    "open(sys.argv[3], 'w').write(json.dumps(list(rows), default=str))\n"
)


_FRAME = re.compile(r'\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')


class PerfModuleError(RuntimeError):
    """A perf module failed or timed out; the message becomes the row's note."""


def measure_module(module: str, *, quick: bool, timeout: float = MODULE_TIMEOUT) -> list[dict]:
    """Rows of ``module.measure(quick)``, run in a fresh interpreter that sees our sys.path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    with tempfile.TemporaryDirectory(prefix="aem-perf-") as tmp:
        out = Path(tmp) / "rows.json"
        command = [sys.executable, "-c", _CHILD, module, "1" if quick else "0", str(out)]
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired as exc:
            raise PerfModuleError(f"timed out after {timeout:.0f} s") from exc
        if proc.returncode != 0:
            raise PerfModuleError(_failure(proc.stderr, proc.returncode))
        return json.loads(out.read_text())


def _failure(stderr: str, returncode: int) -> str:
    """The last line of a traceback plus the innermost ``file:line`` it names."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    if not lines:
        return f"exit status {returncode}"
    frames = [m for m in map(_FRAME.match, lines) if m]
    where = f" ({Path(frames[-1]['file']).name}:{frames[-1]['line']})" if frames else ""
    return lines[-1] + where


def collect(
    quick: bool = False,
    modules: Sequence[str] | None = None,
    *,
    package: str = __package__,
    timeout: float = MODULE_TIMEOUT,
) -> list[dict[str, Any]]:
    """Rows of every perf module that exists (default :data:`MODULES`); a failure is a row."""
    rows: list[dict[str, Any]] = []
    for name in MODULES if modules is None else modules:
        module = f"{package}.{name}"
        if importlib.util.find_spec(module) is None:
            continue
        tic = time.perf_counter()
        try:
            measured = measure_module(module, quick=quick, timeout=timeout)
        except PerfModuleError as exc:
            measured = [{"benchmark": name, "metric": "error", "note": str(exc), "error": True}]
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
    lines = [pipe_table(COLUMNS, ([_cell(row.get(c)) for c in COLUMNS] for row in rows))]
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


def write_table(
    out: str | os.PathLike[str], *, quick: bool = False, **collect_options: Any
) -> dict[str, Path]:
    """Measure (options go to :func:`collect`), then write ``perf.md`` and ``perf.json``."""
    rows = collect(quick=quick, **collect_options)
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
