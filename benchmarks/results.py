"""A run's numbers: episode records aggregated per policy × env and per task type.

``results.json`` is the machine-readable output of ``aem bench``: the suite, the settings,
the aggregates the report prints, and every episode record, so that any other view can be
computed later without replaying anything.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aem_envs.core.errors import DataError
from aem_envs.core.io import atomic_write_json
from benchmarks.suite import Suite

SCHEMA = 1
RESULTS_FILE = "results.json"


def aggregate(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means over ``records``: success rate and score in %, steps, invalid-action rate, cost."""
    n = len(records)
    steps = sum(r["steps"] for r in records)
    return {
        "episodes": n,
        "success_rate": 100.0 * sum(bool(r["won"]) for r in records) / n,
        "mean_score": 100.0 * sum(r["score"] for r in records) / n,
        "mean_steps": steps / n,
        "invalid_action_rate": 100.0 * sum(r["invalid_actions"] for r in records) / max(steps, 1),
        "mean_prompt_tokens": sum(r["prompt_tokens"] for r in records) / n,
        "mean_completion_tokens": sum(r["completion_tokens"] for r in records) / n,
        "mean_wall_time_s": sum(r["wall_time_s"] for r in records) / n,
        "mean_policy_time_s": sum(r["policy_time_s"] for r in records) / n,
        "mean_env_time_s": sum(r["env_time_s"] for r in records) / n,
    }


def _grouped(records: Iterable[dict[str, Any]], *keys: str) -> dict[tuple, list[dict[str, Any]]]:
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        groups[tuple(record[k] for k in keys)].append(record)
    return dict(groups)


def build_results(
    suite: Suite,
    policies: Sequence[tuple[str, bool]],
    records: Sequence[dict[str, Any]],
    *,
    errors: Sequence[dict[str, Any]] = (),
    planned: int,
    settings: dict[str, Any],
) -> dict[str, Any]:
    """The content of ``results.json`` for ``records`` of ``suite``.

    ``policies`` are (name, is_model) pairs in the order given on the command line;
    ``planned`` is how many episodes the suite asked for (more than ``len(records)`` when
    episodes failed), so a partial run is never mistaken for a complete one.
    """
    order = {name: i for i, (name, _) in enumerate(policies)}
    env_order = {entry.env_id: i for i, entry in enumerate(suite.envs)}

    def sort_key(key: tuple) -> tuple:
        return (order.get(key[0], len(order)), env_order.get(key[1], len(env_order)), *key[2:])

    by_env = _grouped(records, "policy", "env_id")
    by_type = _grouped(records, "policy", "env_id", "task_type")
    return {
        "schema": SCHEMA,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "suite": {
            "name": suite.name,
            "description": suite.description,
            "source": suite.source,
            "seeds": list(suite.seeds),
            "bundled_data": not any(entry.requires for entry in suite.envs),
            "envs": [
                {
                    "env_id": e.env_id,
                    "split": e.split,
                    "tasks": e.tasks,
                    "max_steps": e.max_steps,
                    "model_max_steps": e.model_max_steps,
                }
                for e in suite.envs
            ],
        },
        "policies": [{"name": name, "model": model} for name, model in policies],
        "settings": settings,
        "planned_episodes": planned,
        "finished_episodes": len(records),
        "summary": [
            {"policy": p, "env_id": e, **aggregate(group)}
            for (p, e), group in sorted(by_env.items(), key=lambda kv: sort_key(kv[0]))
        ],
        "by_task_type": [
            {"policy": p, "env_id": e, "task_type": t, **aggregate(group)}
            for (p, e, t), group in sorted(by_type.items(), key=lambda kv: sort_key(kv[0]))
        ],
        "errors": [{"key": r["key"], "error": r["error"]} for r in errors],
        "episodes": list(records),
    }


def write_results(run_dir: str | os.PathLike[str], results: dict[str, Any]) -> Path:
    return atomic_write_json(Path(run_dir) / RESULTS_FILE, results)


def load_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A ``results.json`` given by its path or by its run folder."""
    target = Path(path)
    if target.is_dir():
        target = target / RESULTS_FILE
    try:
        results = json.loads(target.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise DataError(f"{target} does not exist; give a run folder of `aem bench`") from exc
    except json.JSONDecodeError as exc:
        raise DataError(f"{target} is not valid JSON: {exc}") from exc
    if not isinstance(results, dict) or results.get("schema") != SCHEMA:
        raise DataError(f"{target} is not a results file of `aem bench` (schema {SCHEMA})")
    return results
