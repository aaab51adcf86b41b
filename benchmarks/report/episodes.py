"""One HTML page per episode, beside its trajectory, so a person can read what happened.

Why pages and not a bigger report: a run holds hundreds of episodes of up to fifty steps;
the report links each row to the list of its episodes, and each episode is its own
self-contained file (``<trajectory>.html`` next to ``<trajectory>.jsonl``) that opens from
disk with no server. A page shows, step by step, the observation the policy saw, its raw
reply, the action parsed from it (or why there was none), and the reward.
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any

from aem_envs.core.io import atomic_write_text
from aem_envs.wrappers import read_trajectory
from benchmarks.report.render import render

EPISODE_TEMPLATE = "episode.html"


def page_of(record: dict[str, Any]) -> str | None:
    """The page of ``record``'s episode, relative to the run folder (None: no trajectory)."""
    trajectory = record.get("trajectory")
    if not trajectory:
        return None
    return str(Path(trajectory).with_suffix(".html").as_posix())


def steps_of(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each step as the policy met it: the observation before it, reply, action, reward."""
    header = rows[0] if rows and rows[0]["kind"] == "episode" else {}
    seen = header.get("observation", "")
    steps = []
    for number, row in enumerate((r for r in rows if r["kind"] == "step"), 1):
        info = row.get("info", {})
        steps.append(
            {
                "number": number,
                "observation": seen,
                "reply": row.get("reply"),
                "action": row.get("action"),
                "rejected": row.get("rejected"),
                "valid": bool(info.get("action_valid", True)),
                "reward": float(row.get("reward", 0.0)),
                "score": float(info.get("score", 0.0)),
            }
        )
        seen = row.get("observation", "")
    return [*steps, {"number": None, "observation": seen}] if steps else steps


def write_episode_pages(run_dir: Path, results: dict[str, Any]) -> list[Path]:
    """Write the page of every episode of ``results`` whose trajectory is in ``run_dir``."""
    written = []
    for record in results["episodes"]:
        page = page_of(record)
        trajectory = run_dir / record.get("trajectory", "")
        if page is None or not trajectory.is_file():
            continue
        rows = read_trajectory(trajectory)
        header = rows[0] if rows and rows[0]["kind"] == "episode" else {}
        html = render(
            EPISODE_TEMPLATE,
            record=record,
            instruction=header.get("info", {}).get("instruction", ""),
            steps=steps_of(rows),
            report=posixpath.relpath("report.html", posixpath.dirname(page)),
            suite=results["suite"]["name"],
        )
        written.append(atomic_write_text(run_dir / page, html))
    return written
