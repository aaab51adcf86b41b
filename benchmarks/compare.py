"""``aem bench compare A B``: what changed between two runs, per env and per task type.

Rows are matched by (policy, env, task type). When each run holds exactly one policy and
their names differ (a checkpoint before and after training), those two are compared.
"""

from __future__ import annotations

from typing import Any

from benchmarks.markdown import pipe_table

METRICS = ("success_rate", "mean_score", "mean_steps", "invalid_action_rate")
_LABELS = {
    "success_rate": "success %",
    "mean_score": "score %",
    "mean_steps": "steps",
    "invalid_action_rate": "invalid %",
}


def _policy_map(a: dict[str, Any], b: dict[str, Any]) -> dict[str, str]:
    """Policy names of run B keyed by the run-A policy they are compared with."""
    names_a = [p["name"] for p in a["policies"]]
    names_b = [p["name"] for p in b["policies"]]
    common = {name: name for name in names_a if name in names_b}
    if not common and len(names_a) == 1 and len(names_b) == 1:
        return {names_a[0]: names_b[0]}
    return common


def compare(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (policy, env[, task type]) present in both runs: A, B and B − A."""
    pairs = _policy_map(a, b)
    rows = []
    for level, table in (("env", "summary"), ("task type", "by_task_type")):
        index_b = {(r["policy"], r["env_id"], r.get("task_type")): r for r in b[table]}
        for row_a in a[table]:
            if row_a["policy"] not in pairs:
                continue
            row_b = index_b.get((pairs[row_a["policy"]], row_a["env_id"], row_a.get("task_type")))
            if row_b is None:
                continue
            rows.append(
                {
                    "level": level,
                    "policy": row_a["policy"]
                    if pairs[row_a["policy"]] == row_a["policy"]
                    else f"{row_a['policy']} → {pairs[row_a['policy']]}",
                    "env_id": row_a["env_id"],
                    "task_type": row_a.get("task_type"),
                    "episodes": (row_a["episodes"], row_b["episodes"]),
                    **{m: (row_a[m], row_b[m], row_b[m] - row_a[m]) for m in METRICS},
                }
            )
    return rows


def format_comparison(rows: list[dict[str, Any]], name_a: str, name_b: str) -> str:
    """A markdown table of :func:`compare` rows (A → B, with the signed change)."""
    if not rows:
        return f"No policy and env in common between {name_a} and {name_b}.\n"
    headers = ["policy", "env", "task type", "episodes A/B", *(_LABELS[m] for m in METRICS)]
    cells = [
        [
            row["policy"],
            row["env_id"],
            row["task_type"] or "(all)",
            f"{row['episodes'][0]}/{row['episodes'][1]}",
            *(f"{row[m][0]:.1f} → {row[m][1]:.1f} ({row[m][2]:+.1f})" for m in METRICS),
        ]
        for row in rows
    ]
    return f"A = {name_a}\nB = {name_b}\n\n" + pipe_table(headers, cells) + "\n"
