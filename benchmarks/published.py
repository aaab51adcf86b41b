"""Published numbers (``published.yaml``) set beside a run's own, column for column.

Why a lookup and not a merge: the published numbers come from the original benchmarks
and other models; the report prints them in their own rows under a caveat, next to our
rows computed the same way (overall and per task type), so they are never mixed up.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

PUBLISHED_FILE = Path(__file__).with_name("published.yaml")


@dataclass(frozen=True)
class Comparison:
    """One benchmark's table: published rows and ours under the same columns."""

    key: str
    title: str
    columns: list[str]
    published: list[dict[str, Any]]
    ours: list[dict[str, Any]]


@cache
def published() -> dict[str, Any]:
    return yaml.safe_load(PUBLISHED_FILE.read_text(encoding="utf-8"))


def caveat() -> str:
    return published()["caveat"]


def speed_notes() -> list[str]:
    return list(published()["speed"])


def comparisons(results: dict[str, Any]) -> list[Comparison]:
    """A :class:`Comparison` for every benchmark that ``results`` has an env of."""
    data = published()
    tables = []
    for key, bench in data["benchmarks"].items():
        ours = [
            _our_row(results, row, bench["columns"])
            for row in results["summary"]
            if row["env_id"] in bench["envs"]
        ]
        if not ours:
            continue
        rows = [
            {"source": r["source"], "model": r["model"], "method": r["method"], **r[key]}
            for r in data["rows"]
            if key in r
        ]
        tables.append(Comparison(key, bench["title"], list(bench["columns"]), rows, ours))
    return tables


def _our_row(results: dict[str, Any], summary: dict[str, Any], columns: dict) -> dict[str, Any]:
    """Our numbers under a benchmark's columns: task-type columns map to our task types."""
    types = {
        row["task_type"]: row
        for row in results["by_task_type"]
        if row["policy"] == summary["policy"] and row["env_id"] == summary["env_id"]
    }
    overall = {
        "All": summary["success_rate"],
        "success": summary["success_rate"],
        "resolved": summary["success_rate"],
        "score": summary["mean_score"],
    }
    row: dict[str, Any] = {"policy": summary["policy"], "env_id": summary["env_id"]}
    for column, task_type in columns.items():
        if task_type is None:
            row[column] = overall[column]
        else:
            row[column] = types[task_type]["success_rate"] if task_type in types else None
    return row
