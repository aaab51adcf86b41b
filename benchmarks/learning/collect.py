"""``results.json`` of a learning experiment, collected from its run folders alone.

Why from the folders: a grid is resumable and may be killed anywhere; what the report shows
is whatever the finished and partial runs left on disk, read the same way every time.
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aem_agent.metrics import as_number
from aem_envs.core.errors import DataError
from aem_envs.core.io import atomic_write_json
from benchmarks.learning.config import (
    DONE_MARKER,
    RESULTS_FILE,
    RUNS_DIR,
    START_DIR,
    START_MARKER,
    LearningConfig,
)
from benchmarks.learning.heldout import HELDOUT_KEYS

#: Training metrics kept as curves in results.json (TRL's and the AEM trainer's names).
TRAIN_KEYS = (
    "reward",
    "reward_std",
    "episode/success_rate",
    "episode/turns",
    "aem/entropy_mean",
    "aem/alpha_min",
    "aem/alpha_max",
    "aem/alpha_std",
    "aem/gated_share",
    "aem/positive_advantage_share",
    "episode/valid_rate",
    "entropy",
    "loss",
)


def last_value(rows: Sequence[Mapping[str, Any]], key: str) -> float | None:
    for row in reversed(rows):
        value = as_number(row.get(key))
        if value is not None:
            return value
    return None


# ---------------------------------------------------------------------------- results.json
def read_metrics(path: Path) -> list[dict[str, Any]]:
    """A run's metrics.csv as rows of numbers (empty cells dropped); [] when absent."""
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as handle:
        rows = []
        for raw in csv.DictReader(handle):
            row = {k: as_number(v) for k, v in raw.items() if k is not None}
            rows.append({k: v for k, v in row.items() if v is not None})
    return rows


def curves(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> dict[str, list[list[float]]]:
    """``key → [[step, value], …]`` for every key with at least one value."""
    out: dict[str, list[list[float]]] = {}
    for key in keys:
        points = [[int(r["step"]), float(r[key])] for r in rows if key in r and "step" in r]
        if points:
            out[key] = points
    return out


def collect_results(config: LearningConfig, out: Path) -> dict[str, Any]:
    """Everything the report shows, from the run folders: per-run curves and final values,
    and per algorithm the final held-out success as mean ± std over the finished seeds."""
    import statistics

    from aem_agent.train import METRICS_FILE

    start_file = out / START_DIR / START_MARKER
    start = json.loads(start_file.read_text(encoding="utf-8")) if start_file.is_file() else None
    runs: list[dict[str, Any]] = []
    for algo, seed, name in config.run_names():
        run_dir = out / RUNS_DIR / name
        done_file = run_dir / DONE_MARKER
        done = json.loads(done_file.read_text(encoding="utf-8")) if done_file.is_file() else None
        rows = read_metrics(run_dir / METRICS_FILE)
        status = "done" if done else ("partial" if rows else "pending")
        runs.append(
            {
                "name": name,
                "algo": algo,
                "seed": seed,
                "status": status,
                "final_heldout_success": last_value(rows, HELDOUT_KEYS[0]) if done else None,
                "global_step": done.get("global_step") if done else None,
                "curves": curves(rows, (*HELDOUT_KEYS, *TRAIN_KEYS)),
            }
        )
    summary = []
    for algo in config.algorithms:
        finished = [r for r in runs if r["algo"] == algo and r["status"] == "done"]
        values = [r["final_heldout_success"] for r in finished]
        values = [v for v in values if v is not None]
        start_success = start.get("heldout_success") if start else None
        summary.append(
            {
                "algo": algo,
                "runs_done": len(finished),
                "runs_planned": len(config.seeds),
                "final_heldout_success_mean": statistics.fmean(values) if values else None,
                # Sample standard deviation over seeds (0 for a single seed).
                "final_heldout_success_std": (
                    (statistics.stdev(values) if len(values) > 1 else 0.0) if values else None
                ),
                "per_seed": {str(r["seed"]): r["final_heldout_success"] for r in finished},
                "start_heldout_success": start_success,
            }
        )
    return {
        "experiment": config.name,
        "config": config.to_dict(),
        "start": start,
        "runs": runs,
        "summary": summary,
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def write_results(out: Path, config: LearningConfig) -> dict[str, Any]:
    """Collect and write ``results.json`` atomically; return it."""
    results = collect_results(config, out)
    atomic_write_json(out / RESULTS_FILE, results)
    return results


def load_results(out: Path) -> dict[str, Any]:
    """Read a results.json (a run folder or the file itself)."""
    path = out / RESULTS_FILE if out.is_dir() else out
    if not path.is_file():
        raise DataError(f"no {RESULTS_FILE} at {out}; run `aem bench learning CONFIG` first")
    return json.loads(path.read_text(encoding="utf-8"))
