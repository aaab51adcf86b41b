"""PNG plots of a run (matplotlib, Agg backend): success per task type and step counts.

Plots are returned as bytes so the HTML page can embed them (base64) and the markdown
report can link the same files written beside it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

from aem_envs.core.errors import require
from benchmarks.episodes import slug


@dataclass(frozen=True)
class Plot:
    """A rendered figure: a file name inside ``plots/``, a caption, the PNG bytes."""

    name: str
    caption: str
    png: bytes


def _pyplot() -> Any:
    matplotlib = require("bench", "matplotlib", feature="the benchmark report's plots")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=100)
    _pyplot().close(figure)
    return buffer.getvalue()


def make_plots(results: dict[str, Any]) -> list[Plot]:
    """Per env: a grouped bar chart of success % by task type and a step-count histogram."""
    plt = _pyplot()
    policies = [p["name"] for p in results["policies"]]
    plots = []
    for env_id in dict.fromkeys(r["env_id"] for r in results["summary"]):
        rows = [r for r in results["by_task_type"] if r["env_id"] == env_id]
        types = list(dict.fromkeys(r["task_type"] for r in rows))
        width = 0.8 / max(len(policies), 1)
        figure, axes = plt.subplots(figsize=(max(5.0, 1.2 * len(types) + 2), 3.6))
        for i, policy in enumerate(policies):
            rates = {r["task_type"]: r["success_rate"] for r in rows if r["policy"] == policy}
            xs = [t + (i - (len(policies) - 1) / 2) * width for t in range(len(types))]
            axes.bar(xs, [rates.get(t, 0.0) for t in types], width, label=policy)
        axes.set_xticks(range(len(types)), types, rotation=20, ha="right", fontsize=8)
        axes.set_ylim(0, 105)
        axes.set_ylabel("success %")
        axes.set_title(f"{env_id}: success by task type")
        axes.legend(fontsize=8)
        plots.append(
            Plot(f"success_{slug(env_id)}.png", f"{env_id}: success by task type", _png(figure))
        )

        figure, axes = plt.subplots(figsize=(5.5, 3.4))
        episodes = [e for e in results["episodes"] if e["env_id"] == env_id]
        top = max((e["steps"] for e in episodes), default=1)
        bins = [edge - 0.5 for edge in range(0, top + 2)]  # one bar per step count
        for policy in policies:
            steps = [e["steps"] for e in episodes if e["policy"] == policy]
            if steps:
                axes.hist(steps, bins=bins, alpha=0.6, label=policy)
        axes.set_xlabel("steps per episode")
        axes.set_ylabel("episodes")
        axes.set_title(f"{env_id}: step counts")
        axes.legend(fontsize=8)
        plots.append(Plot(f"steps_{slug(env_id)}.png", f"{env_id}: step counts", _png(figure)))
    return plots
