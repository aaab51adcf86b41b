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

from aem_agent.grpo.metrics import as_number
from aem_envs.core.errors import DataError
from aem_envs.core.io import atomic_write_json
from benchmarks.learning.config import (
    DONE_MARKER,
    RESULTS_FILE,
    RUNS_DIR,
    START_DIR,
    START_MARKER,
    TASK_CHECK_FILE,
    LearningConfig,
)
from benchmarks.learning.heldout import HELDOUT_KEYS, HELDOUT_SECONDS, SAMPLED_KEYS, SAMPLED_SECONDS

#: The grid script's sampled held-out passes: ``OUT/sampled/NAME`` for each run's final
#: model and ``OUT/sampled/start`` for the start (configs/alfworld-small-grid.sh).
SAMPLED_DIR = "sampled"

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
    "drift/predicted",
    "drift/measured",
    "heldout/offlist_mass",
)
#: Two-sided 95 % quantiles of Student's t for 1..30 degrees of freedom (then the normal's).
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def last_value(rows: Sequence[Mapping[str, Any]], key: str) -> float | None:
    for row in reversed(rows):
        value = as_number(row.get(key))
        if value is not None:
            return value
    return None


def recent_mean(rows: Sequence[Mapping[str, Any]], key: str, window: int) -> float | None:
    """Mean of the last ``window`` values ``key`` took (fewer if fewer were logged)."""
    values = [v for v in (as_number(r.get(key)) for r in rows) if v is not None][-window:]
    return sum(values) / len(values) if values else None


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


def read_sampled(folder: Path) -> dict[str, Any] | None:
    """The grid script's sampled held-out pass in ``folder`` (an ``aem bench`` run folder):
    success as a fraction, its episodes and standard error, and its episodes' summed wall
    seconds (``episode_s``; the pass's wall is about that over its workers); None until every
    planned episode finished."""
    bench = _read_json(folder / RESULTS_FILE)
    if not bench or not bench["summary"] or bench["finished_episodes"] < bench["planned_episodes"]:
        return None
    summary = bench["summary"][0]
    success, episodes = summary["success_rate"] / 100, summary["episodes"]
    stderr = (success * (1 - success) / episodes) ** 0.5
    return {
        "success": success,
        "episodes": episodes,
        "stderr": stderr,
        "episode_s": episodes * summary["mean_wall_time_s"],
        "workers": (bench.get("settings") or {}).get("workers"),
    }


def run_cost(
    rows: Sequence[Mapping[str, Any]], sessions: Sequence[Mapping[str, Any]], updates: int = 1
) -> dict:
    """A run's seconds: TRL's ``step_time`` of its training steps and the wall time of its
    held-out passes (greedy and, with ``eval.sampled``, sampled) from its metrics, and the
    wall and CPU seconds of the processes that trained it (``sessions.json``, where they
    recorded one). The processes' wall time is the whole cost: it also holds what no step
    row times (start-up, checkpoints, the drift probe), and the rollouts, which
    ``step_time`` left out before 2026-12-07 (``docs/small-agent.md``, "Pace").

    A row of an arm with ``updates`` optimizer steps per rollout batch logs the mean
    ``step_time`` of that batch's steps: the batch took ``updates`` times as long.
    """
    step = [r["step_time"] * updates for r in rows if "step_time" in r]
    # Step 0's pass is the start's own, copied into every run (experiment.start_heldout_row).
    heldout = [
        r[key]
        for r in rows
        for key in (HELDOUT_SECONDS, SAMPLED_SECONDS)
        if key in r and r.get("step")
    ]
    return {
        "steps_timed": len(step),
        "step_s": sum(step),
        "heldout_s": sum(heldout),
        "sessions": len(sessions),
        "session_wall_s": sum(s["wall_s"] for s in sessions),
        "cpu_s": sum(s["cpu_s"] for s in sessions) if sessions else None,
    }


def collect_results(config: LearningConfig, out: Path) -> dict[str, Any]:
    """Everything the report shows, from the run folders: per-run curves and final values,
    and per algorithm the final held-out success as mean ± std over the finished seeds."""
    import statistics

    from aem_agent.grpo.run import METRICS_FILE
    from benchmarks.learning.experiment import updates_per_batch
    from benchmarks.learning.paper import paper_table
    from benchmarks.learning.status import SESSIONS_FILE, run_status

    start_file = out / START_DIR / START_MARKER
    start = json.loads(start_file.read_text(encoding="utf-8")) if start_file.is_file() else None
    updates = {arm: updates_per_batch(config, arm) for arm in config.algorithms}
    states = {s.name: s for s in run_status(config, out, updates)}
    runs: list[dict[str, Any]] = []
    for algo, seed, name in config.run_names():
        run_dir = out / RUNS_DIR / name
        done_file = run_dir / DONE_MARKER
        done = json.loads(done_file.read_text(encoding="utf-8")) if done_file.is_file() else None
        rows = read_metrics(run_dir / METRICS_FILE)
        status = "done" if done else ("partial" if rows else "pending")
        sampled = read_sampled(out / SAMPLED_DIR / name) if done else None
        run_curves = curves(rows, (*HELDOUT_KEYS, *SAMPLED_KEYS, *TRAIN_KEYS))
        if done and sampled:  # the final model's pass is the sampled curve's last point
            points = run_curves.setdefault(SAMPLED_KEYS[0], [])
            if all(step != done["global_step"] for step, _ in points):
                points.append([done["global_step"], sampled["success"]])
        arm = config.arm(algo)
        runs.append(
            {
                "name": name,
                "algo": algo,
                "seed": seed,
                "estimator": arm.estimator,
                "status": status,
                "state": states[name].state,
                "step": states[name].step,
                "max_steps": (config.train | arm.train).get("max_steps"),
                # The run's own newest pass (step 0's is the start's).
                "latest_heldout_success": last_value(
                    [r for r in rows if r.get("step")], HELDOUT_KEYS[0]
                ),
                "final_heldout_success": last_value(rows, HELDOUT_KEYS[0]) if done else None,
                "final_sampled_success": sampled["success"] if sampled else None,
                "sampled": sampled,
                "global_step": done.get("global_step") if done else None,
                "cost": run_cost(
                    rows,
                    _read_json(run_dir / SESSIONS_FILE) or [],
                    updates[algo],
                ),
                "curves": run_curves,
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
                "runs_planned": len(config.arm(algo).seeds),
                "final_heldout_success_mean": statistics.fmean(values) if values else None,
                # Sample standard deviation over seeds (0 for a single seed).
                "final_heldout_success_std": (
                    (statistics.stdev(values) if len(values) > 1 else 0.0) if values else None
                ),
                "per_seed": {str(r["seed"]): r["final_heldout_success"] for r in finished},
                "start_heldout_success": start_success,
            }
        )
    start_sampled = read_sampled(out / SAMPLED_DIR / START_DIR)
    start_scores = {
        "greedy": start.get("heldout_success") if start else None,
        "sampled": start_sampled["success"] if start_sampled else None,
    }
    return {
        "experiment": config.name,
        "config": config.to_dict(),
        "start": start,
        "start_sampled": start_sampled,
        "runs": runs,
        "summary": summary,
        "paper": paper_table(config, runs, start_scores),
        "cost": grid_cost(runs, start_sampled),
        "task_check": _read_json(out / TASK_CHECK_FILE),
        "paired": paired_differences(runs, config.baseline, config.algorithms),
        "drift": drift_agreement(runs),
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def mean_interval(values: Sequence[float]) -> dict[str, float | int | None]:
    """Mean and two-sided 95 % t interval of ``values`` (no interval for fewer than two)."""
    import statistics

    n = len(values)
    if n == 0:
        return {"n": 0, "mean": None, "low": None, "high": None}
    mean = statistics.fmean(values)
    if n < 2:
        return {"n": n, "mean": mean, "low": None, "high": None}
    quantile = _T95[n - 2] if n - 1 <= len(_T95) else 1.96
    half = quantile * statistics.stdev(values) / n**0.5
    return {"n": n, "mean": mean, "low": mean - half, "high": mean + half}


def paired_differences(
    runs: Sequence[Mapping[str, Any]],
    baseline: str,
    arms: Sequence[str],
    *,
    key: str = "final_heldout_success",
) -> list[dict[str, Any]]:
    """Per arm: final held-out success (the runs' ``key``) minus the baseline's, over the
    seeds both finished, with its 95 % interval. Pairs share the start, the tasks and the
    sampling stream."""
    final = {
        (r["algo"], r["seed"]): r[key]
        for r in runs
        if r["status"] == "done" and r.get(key) is not None
    }
    out = []
    for arm in arms:
        if arm == baseline:
            continue
        seeds = sorted(s for a, s in final if a == arm and (baseline, s) in final)
        diffs = [final[(arm, s)] - final[(baseline, s)] for s in seeds]
        out.append({"arm": arm, "baseline": baseline, "seeds": seeds, **mean_interval(diffs)})
    return out


def grid_cost(
    runs: Sequence[Mapping[str, Any]], start_sampled: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The grid's seconds so far, summed over its runs (:func:`run_cost`), and its sampled
    held-out passes' episode seconds (the start's included)."""
    costs = [r["cost"] for r in runs]
    recorded = [c for c in costs if c["cpu_s"] is not None]
    passes = [r["sampled"] for r in runs if r.get("sampled")] + [start_sampled or {}]
    passes = [p for p in passes if p]
    return {
        "runs": len(costs),
        "sampled_passes": len(passes),
        "sampled_episode_s": sum(p["episode_s"] for p in passes),
        "step_s": sum(c["step_s"] for c in costs),
        "heldout_s": sum(c["heldout_s"] for c in costs),
        "steps_timed": sum(c["steps_timed"] for c in costs),
        "cpu_runs": len(recorded),
        "cpu_s": sum(c["cpu_s"] for c in recorded) if recorded else None,
        "wall_s": sum(c["session_wall_s"] for c in recorded) if recorded else None,
    }


def drift_agreement(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How well the drift law's prediction tracks the measured entropy change: Pearson
    correlation and sign agreement over every step of every run, and per arm."""
    per_arm: dict[str, list[tuple[float, float]]] = {}
    for run in runs:
        predicted = dict((int(s), v) for s, v in run["curves"].get("drift/predicted", []))
        measured = dict((int(s), v) for s, v in run["curves"].get("drift/measured", []))
        pairs = [(predicted[s], measured[s]) for s in sorted(predicted) if s in measured]
        per_arm.setdefault(run["algo"], []).extend(pairs)
    everything = [p for pairs in per_arm.values() for p in pairs]
    return {
        "all": _agreement(everything),
        "per_arm": {arm: _agreement(pairs) for arm, pairs in per_arm.items()},
    }


def _agreement(pairs: Sequence[tuple[float, float]]) -> dict[str, float | int | None]:
    import statistics

    if len(pairs) < 3:
        return {"steps": len(pairs), "correlation": None, "sign_agreement": None}
    xs, ys = [p for p, _ in pairs], [m for _, m in pairs]
    try:
        correlation: float | None = statistics.correlation(xs, ys)
    except statistics.StatisticsError:  # a constant series
        correlation = None
    signs = [(x > 0) == (y > 0) for x, y in pairs if x != 0 and y != 0]
    return {
        "steps": len(pairs),
        "correlation": correlation,
        "sign_agreement": sum(signs) / len(signs) if signs else None,
    }


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


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
