"""The lines ``aem bench`` prints at the end: one per policy and env, readable as a result.

Why each column: success with its count (``3/8``) so a small suite's numbers are not read
as more than they are; the split and whether it is held out, so a win is known to be on
tasks the agent never trained on; the invalid-action share, which is what separates a
model that plays from one that does not yet write actions; and the time an episode cost.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aem_envs.core.base import TRAIN_SPLIT

HEADERS = ("policy", "env", "split", "success", "score", "invalid", "steps", "time/ep")


def split_label(splits: Iterable[str | None]) -> str:
    """``valid_unseen (held-out)``, ``train (training split)``, or several joined by ``+``."""
    names = sorted({str(s) for s in splits})
    kind = "training split" if TRAIN_SPLIT in names else "held-out"
    return f"{'+'.join(names)} ({kind})"


def summary_rows(results: dict[str, Any]) -> list[tuple[str, ...]]:
    """One row of formatted cells per summary entry of ``results`` (see :data:`HEADERS`).

    ``time/ep`` is the policy's and the env's time spent on an episode: episodes a model
    plays side by side share each batched call, so this is what an episode cost, not its
    wall time (the report shows both).
    """
    rows: list[tuple[str, ...]] = []
    for row in results["summary"]:
        episodes = [
            e
            for e in results["episodes"]
            if e["policy"] == row["policy"] and e["env_id"] == row["env_id"]
        ]
        wins = sum(bool(e["won"]) for e in episodes)
        limits = {e["max_steps"] for e in episodes}
        limit = f"/{limits.pop()}" if len(limits) == 1 else ""
        cost = row["mean_policy_time_s"] + row["mean_env_time_s"]
        rows.append(
            (
                row["policy"],
                row["env_id"],
                split_label(e["split"] for e in episodes),
                f"{wins}/{row['episodes']} {row['success_rate']:.0f}%",
                f"{row['mean_score']:.1f}%",
                f"{row['invalid_action_rate']:.1f}%",
                f"{row['mean_steps']:.1f}{limit}",
                f"{cost:.1f} s",
            )
        )
    return rows


def summary_lines(results: dict[str, Any]) -> list[str]:
    """The header and one aligned line per row of :func:`summary_rows`."""
    table = [HEADERS, *summary_rows(results)]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADERS))]
    right = {3, 4, 5, 6, 7}
    return [
        "  ".join(
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(r)
        ).rstrip()
        for r in table
    ]
