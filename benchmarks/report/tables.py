"""The report's tables as plain data, rendered alike by the markdown and the HTML writer.

Why one builder: the two formats must never disagree about a number, so both render the
same :class:`Table` objects and only differ in markup.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from benchmarks.published import comparisons


@dataclass(frozen=True)
class Table:
    """A titled table of already formatted cells; ``note`` is printed under the title."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    note: str = ""
    kind: str = "ours"
    extra: dict[str, Any] = field(default_factory=dict)
    #: Per row, where the cell in column ``link_column`` links to in the HTML report.
    links: list[str] = field(default_factory=list)
    link_column: int = 0


def pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def num(value: float, digits: int = 1) -> str:
    return f"{value:,.{digits}f}"


def summary_table(results: dict[str, Any]) -> Table:
    rows = [
        [
            r["policy"],
            r["env_id"],
            str(r["episodes"]),
            pct(r["success_rate"]),
            pct(r["mean_score"]),
            num(r["mean_steps"]),
            pct(r["invalid_action_rate"]),
            num(r["mean_prompt_tokens"], 0),
            num(r["mean_completion_tokens"], 0),
            num(r["mean_wall_time_s"], 2),
        ]
        for r in results["summary"]
    ]
    headers = [
        "policy",
        "env",
        "episodes",
        "success %",
        "score %",
        "mean steps",
        "invalid actions %",
        "prompt tokens / ep",
        "completion tokens / ep",
        "wall s / ep",
    ]
    note = (
        "success and score in %; invalid actions as a share of steps; wall time runs from an "
        "episode's reset to its end, so episodes a model plays side by side share it. "
        "Click a number of episodes to see them, step by step."
    )
    links = [f"#{episodes_anchor(r['policy'], r['env_id'])}" for r in results["summary"]]
    return Table("Results per environment", headers, rows, note=note, links=links, link_column=2)


def episodes_anchor(policy: str, env_id: str) -> str:
    """The id of the report's list of ``policy``'s episodes on ``env_id``."""
    return "episodes-" + "".join(c if c.isalnum() else "-" for c in f"{policy}-{env_id}")


def task_type_tables(results: dict[str, Any]) -> list[Table]:
    """One table per env: success, score and steps per task type for every policy."""
    tables = []
    for env_id in dict.fromkeys(r["env_id"] for r in results["by_task_type"]):
        rows = [
            [
                r["policy"],
                r["task_type"],
                str(r["episodes"]),
                pct(r["success_rate"]),
                pct(r["mean_score"]),
                num(r["mean_steps"]),
                pct(r["invalid_action_rate"]),
            ]
            for r in results["by_task_type"]
            if r["env_id"] == env_id
        ]
        headers = ["policy", "task type", "episodes", "success %", "score %", "mean steps"]
        tables.append(
            Table(f"{env_id} by task type", [*headers, "invalid actions %"], rows, kind="types")
        )
    return tables


def published_tables(results: dict[str, Any]) -> list[Table]:
    """Published rows first, then ours under the same columns, marked as ours."""
    tables = []
    data_note = (
        "Our rows: bundled (generated) task sets, not the original benchmark."
        if results["suite"]["bundled_data"]
        else "Our rows: the user's copy of the real benchmark data named by the suite."
    )
    for comparison in comparisons(results):
        rows = [
            [
                f"{r['method']} — {r['source']}",
                r["model"],
                *(pct(r.get(c)) for c in comparison.columns),
            ]
            for r in comparison.published
        ]
        rows += [
            [f"ours: {r['policy']}", r["env_id"], *(pct(r.get(c)) for c in comparison.columns)]
            for r in comparison.ours
        ]
        tables.append(
            Table(
                f"Published: {comparison.title}",
                ["method — source", "model", *comparison.columns],
                rows,
                note=data_note,
                kind="published",
                extra={"ours_from": len(comparison.published)},
            )
        )
    return tables


def settings_rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    """What was run, in words: the suite, its step limits, seeds, workers."""
    suite = results["suite"]
    limits = "; ".join(
        f"{e['env_id']} ({e['split'] or 'default split'}): "
        f"{'all' if e['tasks'] is None else e['tasks']} tasks, step limit "
        + _limits_text(_step_limits(results, e["env_id"]))
        for e in suite["envs"]
    )
    policies = ", ".join(
        f"{p['name']} ({'model' if p['model'] else 'reads the env'})" for p in results["policies"]
    )
    settings = results["settings"]
    return [
        ("suite", " — ".join(filter(None, (suite["name"], suite["description"])))),
        ("tasks and step limits", limits),
        ("seeds", ", ".join(map(str, suite["seeds"]))),
        ("policies", policies),
        (
            "parallelism",
            f"{settings.get('workers')} worker processes (expert/random), "
            f"model batch {settings.get('batch_size')}",
        ),
        (
            "episodes",
            f"{results['finished_episodes']} finished of {results['planned_episodes']} planned",
        ),
        ("created", results["created"]),
    ]


def _limits_text(limits: dict[str, str]) -> str:
    """One limit when every policy ran under it, else each policy's."""
    if not limits:
        return "— (no episode finished)"
    if len(set(limits.values())) == 1:
        return next(iter(limits.values()))
    return ", ".join(f"{policy}: {steps}" for policy, steps in limits.items())


def _step_limits(results: dict[str, Any], env_id: str) -> dict[str, str]:
    """The step limit each policy's episodes of ``env_id`` ran under, as the episodes say."""
    limits: dict[str, set[int]] = {}
    for episode in results["episodes"]:
        if episode["env_id"] == env_id:
            limits.setdefault(episode["policy"], set()).add(episode.get("max_steps", 0))
    return {policy: "/".join(map(str, sorted(values))) for policy, values in limits.items()}
