"""The learning experiments' figures: training curves, predicted-vs-measured entropy drift,
and the dose-response of λ (:func:`~benchmarks.learning.report.write_report` writes them).

Apart from the tables and text of :mod:`benchmarks.learning.report` so that matplotlib, imported
lazily here, stays out of the reading of results.
"""

from __future__ import annotations

import io
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aem_envs.core.io import atomic_write_bytes
from benchmarks.learning.heldout import scoring

#: Panels of the curves figure: (title, how to get a (step, value) series from a run).
PANELS: tuple[tuple[str, str], ...] = (
    ("held-out success", "heldout/success_rate"),
    ("train reward", "reward"),
    ("mean entropy (nats/token)", "aem/entropy_mean"),
    ("α spread (max − min)", "alpha_spread"),
    ("positive-advantage share", "aem/positive_advantage_share"),
)
#: Panels of the paper-shaped grids' figure (:data:`benchmarks.learning.report.LEARNING_PNG`):
#: the sampled held-out pass (``eval.sampled``) shows learning the greedy one's floor hides,
#: and training success is what the aem-tiny rule (:mod:`benchmarks.learning.ship`) reads.
LEARNING_PANELS: tuple[tuple[str, str], ...] = (
    ("training success", "episode/success_rate"),
    PANELS[0],
    ("held-out success (sampled)", "heldout_sampled/success_rate"),
    PANELS[2],
)
#: Train curves are one batch per step; the plot shows a centred moving average this wide.
SMOOTH = 5
COLOURS = {"grpo": "#1f77b4", "aem": "#d62728"}
#: Colours of the other arms, in their order (the tab10 palette less the two above).
OTHER_COLOURS = ("#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")


def series(run: Mapping[str, Any], key: str) -> list[tuple[int, float]]:
    """``(step, value)`` points of one run's curve; ``alpha_spread`` is α max − α min."""
    curves = run.get("curves", {})
    if key == "alpha_spread":
        low = dict((int(s), v) for s, v in curves.get("aem/alpha_min", []))
        high = dict((int(s), v) for s, v in curves.get("aem/alpha_max", []))
        return [(s, high[s] - low[s]) for s in sorted(set(low) & set(high))]
    return [(int(s), float(v)) for s, v in curves.get(key, [])]


def mean_curve(
    runs: Sequence[Mapping[str, Any]], key: str
) -> tuple[list[int], list[float], list[float]]:
    """Steps, mean and standard deviation over runs of ``key`` at every step all runs have."""
    per_run = [dict(series(r, key)) for r in runs]
    per_run = [p for p in per_run if p]
    if not per_run:
        return [], [], []
    steps = sorted(set.intersection(*(set(p) for p in per_run)))
    means = [statistics.fmean(p[s] for p in per_run) for s in steps]
    stds = [statistics.pstdev([p[s] for p in per_run]) for s in steps]
    return steps, means, stds


def averaged_runs(runs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The runs an arm's thick curve averages: its finished ones once any has finished, so
    a seed that has just started does not cut the mean back to its first steps (it still
    shows as a thin line), as the paper table counts finished seeds only; before any has
    finished, all of them."""
    done = [r for r in runs if r["status"] == "done"]
    return done or list(runs)


def _smooth(values: Sequence[float], width: int) -> list[float]:
    if width <= 1 or len(values) < width:
        return list(values)
    half = width // 2
    return [statistics.fmean(values[max(0, i - half) : i + half + 1]) for i in range(len(values))]


def arm_colours(algos: Sequence[str]) -> dict[str, str]:
    """One colour per arm: GRPO's and AEM's fixed, the others' in order."""
    others = iter(OTHER_COLOURS * len(algos))
    return {algo: COLOURS.get(algo) or next(others) for algo in algos}


def plot_curves(
    results: Mapping[str, Any], path: Path, *, panels: Sequence[tuple[str, str]] = PANELS
) -> Path:
    """The ``panels``, one line per algorithm (mean over :func:`averaged_runs`, band ± std,
    thin seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    algos = [row["algo"] for row in results["summary"]]
    colours = arm_colours(algos)
    figure, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.2), squeeze=False)
    for axis, (title, key) in zip(axes[0], panels, strict=True):
        width = 1 if key.startswith("heldout") else SMOOTH
        drawn = False
        for algo in algos:
            runs = [r for r in results["runs"] if r["algo"] == algo and r["status"] != "pending"]
            colour = colours[algo]
            for run in runs:
                points = series(run, key)
                if points:
                    run_steps, values = zip(*points, strict=True)
                    axis.plot(run_steps, _smooth(values, width), color=colour, alpha=0.18, lw=0.8)
            averaged = averaged_runs(runs)
            steps, means, stds = mean_curve(averaged, key)
            if steps:
                means, stds = _smooth(means, width), _smooth(stds, width)
                sparse = width == 1 or len(steps) < 3  # held-out passes: a point every K steps
                axis.plot(
                    steps,
                    means,
                    color=colour,
                    lw=2,
                    marker="o" if sparse else None,
                    ms=3,
                    label=f"{algo.upper()} (n={len(averaged)})",
                )
                axis.fill_between(
                    steps,
                    [m - s for m, s in zip(means, stds, strict=True)],
                    [m + s for m, s in zip(means, stds, strict=True)],
                    color=colour,
                    alpha=0.15,
                )
                drawn = True
        start = (results.get("start_sampled") or {}).get("success")
        if key.startswith("heldout_sampled/") and start is not None:  # the grid's start pass
            axis.axhline(start, color="grey", ls="--", lw=1, label="start")
            axis.legend(fontsize=8, loc="best")
        if not drawn:
            axis.text(
                0.5, 0.7, "not scored yet", ha="center", va="center", transform=axis.transAxes
            )
        if "share" in title:
            axis.set_ylim(-0.02, 1.02)
        elif "success" in title:  # from 0 to what was reached: a few % stays readable
            top = axis.get_ylim()[1] if drawn else 2 * (start or 0.05)
            axis.set_ylim(-0.01, max(0.1, top))
        if key == "heldout/success_rate":
            title = f"{title} ({scoring(results['config'])})"
        axis.set_title(title, fontsize=10)
        axis.set_xlabel("step")
        if results["config"]["train"].get("max_steps"):  # how far the runs have come
            axis.set_xlim(0, results["config"]["train"]["max_steps"])
        axis.grid(alpha=0.3)
    if axes[0][0].get_legend_handles_labels()[0]:  # no run has logged a step yet: no legend
        axes[0][0].legend(fontsize=8, loc="best")
    figure.suptitle(
        f"{results['experiment']}: mean over finished seeds ± std (thin: single seeds; "
        f"train curves smoothed over {SMOOTH} steps)",
        fontsize=10,
    )
    return _save_png(figure, path)


def plot_drift(results: Mapping[str, Any], path: Path) -> Path | None:
    """Scatter of predicted against measured entropy change, one point per step and run."""
    points = []
    for run in results["runs"]:
        predicted = dict(series(run, "drift/predicted"))
        measured = dict(series(run, "drift/measured"))
        points += [(predicted[s], measured[s]) for s in predicted if s in measured]
    if not points:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(5, 4))
    axis.scatter([p for p, _ in points], [m for _, m in points], s=6, alpha=0.5)
    axis.axhline(0, color="grey", lw=0.5)
    axis.axvline(0, color="grey", lw=0.5)
    axis.set_xlabel("predicted: mean α·A·(S̄ − H̄)")
    axis.set_ylabel("measured: mean ΔH̄ after the update")
    axis.set_title(f"{results['experiment']}: {len(points)} steps", fontsize=10)
    return _save_png(figure, path)


def lambda_arms(results: Mapping[str, Any]) -> dict[str, float]:
    """Arm name → λ of the arms that differ from plain GRPO in λ alone (the dose-response):
    GRPO itself is λ = 0; an arm with any other setting (an ablation, a rival) is left out."""
    doses = {}
    for name, arm in (results["config"].get("arms") or {}).items():
        train = arm.get("train") or {}
        if arm["algo"] == "grpo" and not train:
            doses[name] = 0.0
        elif arm["algo"] == "aem" and set(train) == {"aem_lambda"}:
            doses[name] = float(train["aem_lambda"])
    return doses


def plot_dose(results: Mapping[str, Any], path: Path) -> Path | None:
    """Two panels over the λ arms: the final held-out success minus the baseline's, seed by
    seed (mean and 95 % interval), against λ; and each λ's mean entropy curve."""
    doses = lambda_arms(results)
    paired = {p["arm"]: p for p in results.get("paired") or [] if p["n"]}
    if len(doses) < 2 or not paired:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for index, (arm, dose) in enumerate(sorted(doses.items(), key=lambda item: item[1])):
        colour = f"C{index}"  # one colour per λ in both panels
        row = paired.get(arm)
        if row is not None:
            low = row["low"] if row["low"] is not None else row["mean"]
            high = row["high"] if row["high"] is not None else row["mean"]
            error = [[100 * (row["mean"] - low)], [100 * (high - row["mean"])]]
            left.errorbar([dose], [100 * row["mean"]], yerr=error, fmt="o", capsize=4, color=colour)
            left.annotate(
                f"n={row['n']}",
                (dose, 100 * row["mean"]),
                fontsize=7,
                xytext=(4, 4),
                textcoords="offset points",
            )
        runs = [r for r in results["runs"] if r["algo"] == arm and r["status"] != "pending"]
        averaged = averaged_runs(runs)
        steps, means, _ = mean_curve(averaged, "aem/entropy_mean")
        if steps:
            label = f"λ = {dose:g} (n={len(averaged)})"
            right.plot(steps, _smooth(means, SMOOTH), lw=2, color=colour, label=label)
    left.axhline(0, color="grey", lw=0.8)
    left.set_xlabel("λ (0: GRPO; −1: reversed α)")
    left.set_ylabel(f"final held-out success − {results['paired'][0]['baseline'].upper()} (points)")
    left.set_title("dose-response: paired difference, 95 % interval", fontsize=10)
    right.set_xlabel("step")
    right.set_ylabel("mean token entropy (nats)")
    right.set_title(f"entropy by λ (mean over seeds, smoothed over {SMOOTH} steps)", fontsize=10)
    right.legend(fontsize=8)
    for axis in (left, right):
        axis.grid(alpha=0.3)
    return _save_png(figure, path)


def _save_png(figure: Any, path: Path) -> Path:
    """Lay out, write atomically and close one report figure."""
    import matplotlib.pyplot as plt

    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    plt.close(figure)
    return atomic_write_bytes(path, buffer.getvalue())
