"""The learning experiment's report, generated from ``results.json`` alone.

Why only from results.json: the report can then be regenerated anywhere (``aem bench learning
CONFIG --report-only``), after the checkpoints are gone, and it shows exactly the numbers
that were committed. Outputs: ``report.md``, ``report.html`` (self-contained), ``table.md``
(the final-success table, to paste into docs/results.md or docs/mechanism.md) and
``plots/curves.png``.
"""

from __future__ import annotations

import base64
import html
import io
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aem_envs.core.io import atomic_write_bytes, atomic_write_text

PLOTS_DIR = "plots"
CURVES_PNG = "curves.png"
DRIFT_PNG = "drift.png"
DOSE_PNG = "dose.png"
#: Panels of the curves figure: (title, how to get a (step, value) series from a run).
PANELS: tuple[tuple[str, str], ...] = (
    ("held-out success", "heldout/success_rate"),
    ("train reward", "reward"),
    ("mean entropy (nats/token)", "aem/entropy_mean"),
    ("α spread (max − min)", "alpha_spread"),
    ("positive-advantage share", "aem/positive_advantage_share"),
)
#: Train curves are one batch per step; the plot shows a centred moving average this wide.
SMOOTH = 5
COLOURS = {"grpo": "#1f77b4", "aem": "#d62728"}


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


def _smooth(values: Sequence[float], width: int) -> list[float]:
    if width <= 1 or len(values) < width:
        return list(values)
    half = width // 2
    return [statistics.fmean(values[max(0, i - half) : i + half + 1]) for i in range(len(values))]


def window_mean(run: Mapping[str, Any], key: str, lo: float, hi: float) -> float | None:
    """Mean of a run's ``key`` over steps in the fraction ``[lo, hi)`` of its last step."""
    points = series(run, key)
    if not points:
        return None
    last = max(s for s, _ in points) or 1
    chosen = [v for s, v in points if lo * last <= s < hi * last or (hi >= 1 and s == last)]
    return statistics.fmean(chosen) if chosen else None


def _fmt(value: float | None, pct: bool = True) -> str:
    if value is None:
        return "—"
    return f"{100 * value:.1f}" if pct else f"{value:.3f}"


def _mean_std(values: Sequence[float | None], pct: bool = True) -> str:
    present = [v for v in values if v is not None]
    if not present:
        return "—"
    std = statistics.stdev(present) if len(present) > 1 else 0.0
    scale = 100 if pct else 1
    digits = 1 if pct else 3
    return f"{scale * statistics.fmean(present):.{digits}f} ± {scale * std:.{digits}f}"


def final_table(results: Mapping[str, Any]) -> str:
    """Markdown table: final held-out success (%) per algorithm, mean ± std and per seed."""
    start = (results.get("start") or {}).get("heldout_success")
    lines = [
        "| algorithm | final held-out success (%) | per seed | runs |",
        "|---|---|---|---|",
    ]
    for row in results["summary"]:
        per_seed = ", ".join(
            f"{seed}: {_fmt(value)}" for seed, value in sorted(row["per_seed"].items())
        )
        lines.append(
            f"| {row['algo'].upper()} | {_mean_std(list(row['per_seed'].values()))} | "
            f"{per_seed or '—'} | {row['runs_done']}/{row['runs_planned']} |"
        )
    if start is not None:
        lines.append(f"| start checkpoint | {_fmt(start)} | — | — |")
    return "\n".join(lines) + "\n"


def entropy_table(results: Mapping[str, Any]) -> str:
    """Markdown table: mean entropy and positive-advantage share early and late in training,
    and held-out success at mid-training, per algorithm (mean ± std over finished seeds)."""
    lines = [
        "| algorithm | entropy, first 20 % of steps | entropy, last 20 % | "
        "positive share, first 20 % | positive share, last 20 % | α spread, mean |",
        "|---|---|---|---|---|---|",
    ]
    for algo in [row["algo"] for row in results["summary"]]:
        runs = [r for r in results["runs"] if r["algo"] == algo and r["status"] == "done"]

        def over(key: str, lo: float, hi: float, runs=runs) -> str:
            return _mean_std([window_mean(r, key, lo, hi) for r in runs], pct=False)

        lines.append(
            f"| {algo.upper()} | {over('aem/entropy_mean', 0, 0.2)} | "
            f"{over('aem/entropy_mean', 0.8, 1.0)} | "
            f"{over('aem/positive_advantage_share', 0, 0.2)} | "
            f"{over('aem/positive_advantage_share', 0.8, 1.0)} | "
            f"{over('alpha_spread', 0, 1.0)} |"
        )
    return "\n".join(lines) + "\n"


def plot_curves(results: Mapping[str, Any], path: Path) -> Path:
    """The five panels, one line per algorithm (mean over seeds, band ± std, thin seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    algos = [row["algo"] for row in results["summary"]]
    figure, axes = plt.subplots(1, len(PANELS), figsize=(3.6 * len(PANELS), 3.2))
    for axis, (title, key) in zip(axes, PANELS, strict=True):
        width = 1 if key.startswith("heldout/") else SMOOTH
        drawn = False
        for algo in algos:
            runs = [r for r in results["runs"] if r["algo"] == algo and r["status"] != "pending"]
            colour = COLOURS.get(algo)
            for run in runs:
                points = series(run, key)
                if points:
                    run_steps, values = zip(*points, strict=True)
                    axis.plot(run_steps, _smooth(values, width), color=colour, alpha=0.18, lw=0.8)
            steps, means, stds = mean_curve(runs, key)
            if steps:
                means, stds = _smooth(means, width), _smooth(stds, width)
                axis.plot(steps, means, color=colour, lw=2, label=f"{algo.upper()} (n={len(runs)})")
                axis.fill_between(
                    steps,
                    [m - s for m, s in zip(means, stds, strict=True)],
                    [m + s for m, s in zip(means, stds, strict=True)],
                    color=colour,
                    alpha=0.15,
                )
                drawn = True
        if not drawn:
            axis.text(0.5, 0.5, "not logged", ha="center", va="center", transform=axis.transAxes)
        if "success" in title or "share" in title:
            axis.set_ylim(-0.02, 1.02)
        if key == "heldout/success_rate":
            title = f"{title} ({_scoring(results['config'])})"
        axis.set_title(title, fontsize=10)
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="best")
    figure.suptitle(
        f"{results['experiment']}: mean over seeds ± std (thin: single seeds; train curves "
        f"smoothed over {SMOOTH} steps)",
        fontsize=10,
    )
    return _save_png(figure, path)


def _scoring(config: Mapping[str, Any]) -> str:
    """How the held-out split was played: ``greedy`` or ``sampled``."""
    return "greedy" if config["eval_temperature"] == 0 else "sampled"


def markdown_report(results: Mapping[str, Any]) -> str:
    """The whole report.md text."""
    config = results["config"]
    start = results.get("start") or {}
    train = config["train"]
    warm = start.get("warmup") or {}
    lines = [
        f"# Learning experiment: {results['experiment']}",
        "",
        f"Env `{config['env_id']}` {config['env_kwargs']} — train on split "
        f"`{config['train_split']}`, held-out split `{config['eval_split']}` scored every "
        f"{config['eval_every']} steps on {config['eval_episodes']} "
        + (
            "tasks spread over the split (as a suite's `tasks:` picks them), "
            if config.get("eval_spread")
            else "distinct tasks "
        )
        + (
            "greedily."
            if config["eval_temperature"] == 0
            else f"at temperature {config['eval_temperature']} (seed {config['eval_seed']})."
        ),
        f"Algorithms {', '.join(a.upper() for a in config['algorithms'])} × seeds "
        f"{list(config['seeds'])}, all from one start checkpoint "
        f"({start.get('parameters', '?')} parameters, model {config['model']}).",
        f"Training: {train.get('max_steps')} steps × {train.get('per_device_train_batch_size')} "
        f"episodes ({train.get('num_generations')} per group), learning rate "
        f"{train.get('learning_rate')}, layout `{train.get('rollout_layout')}`, "
        f"{train.get('max_turns')} turns.",
    ]
    if warm:
        share = float(config["warmup"].get("expert_share", 0.0))
        replies = (
            "uniformly random admissible actions"
            if share == 0
            else "the expert's actions"
            if share == 1
            else f"the expert's actions ({share:.0%} of turns; random admissible ones otherwise)"
        )
        lines.append(
            f"Start checkpoint: {config['warmup'].get('steps')} supervised warm-up steps on "
            f"{replies}; sampled valid-action rate "
            f"{_fmt(warm.get('sampled_valid_rate'))} %, sampled train success "
            f"{_fmt(warm.get('sampled_train_success'))} %, {_scoring(config)} held-out success "
            f"{_fmt(start.get('heldout_success'))} %."
        )
    lines += [
        "",
        "## Final held-out success",
        "",
        final_table(results),
        *_optional_sections(results),
        "## Entropy and advantage balance",
        "",
        entropy_table(results),
        "## Curves",
        "",
        f"![curves]({PLOTS_DIR}/{CURVES_PNG})",
        "",
        "## Runs",
        "",
        "| run | status | steps | final held-out success (%) |",
        "|---|---|---|---|",
    ]
    for run in results["runs"]:
        lines.append(
            f"| {run['name']} | {run['status']} | {run.get('global_step') or '—'} | "
            f"{_fmt(run.get('final_heldout_success'))} |"
        )
    lines += ["", f"Written {results.get('written', '')} from results.json.", ""]
    return "\n".join(lines)


def _optional_sections(results: Mapping[str, Any]) -> list[str]:
    """The task check, the paired differences and the drift law, where results have them."""
    lines: list[str] = []
    check = results.get("task_check")
    if check:
        lines += ["## Task check (the start, before any RL)", "", task_check_table(check), ""]
    paired = [p for p in results.get("paired") or [] if p["n"]]
    if paired:
        lines += [
            f"## Paired differences against {paired[0]['baseline'].upper()}",
            "",
            paired_table(paired),
            "",
        ]
        if len(lambda_arms(results)) > 1:
            lines += [f"![dose-response]({PLOTS_DIR}/{DOSE_PNG})", ""]
    drift = (results.get("drift") or {}).get("all") or {}
    if drift.get("steps"):
        lines += [
            "## Entropy-drift law: predicted against measured, per step",
            "",
            drift_table(results["drift"]),
            "",
            f"![drift]({PLOTS_DIR}/{DRIFT_PNG})",
            "",
        ]
    return lines


def task_check_table(check: Mapping[str, Any]) -> str:
    """Markdown table of :func:`benchmarks.learning.taskcheck.task_check`'s numbers."""
    rows = [
        ("groups × episodes", f"{check['groups']} × {check['group_size']}"),
        ("units (turn-responses)", str(check["units"])),
        ("within-group corr(H̄, S̄), all turns", _fmt(check["within_group_correlation"], False)),
        ("within-group corr(H̄, S̄), first turns", _fmt(check["first_turn_correlation"], False)),
        ("H̄ range inside groups, median (nats)", _fmt(check["hbar_range_median"], False)),
        ("H̄ range inside groups, mean (nats)", _fmt(check["hbar_range_mean"], False)),
        (f"groups under the {check['gate']}-nat gate", f"{_fmt(check['gated_share'])} %"),
    ]
    return "\n".join(["| measure | value |", "|---|---|", *(f"| {a} | {b} |" for a, b in rows)])


def paired_table(paired: Sequence[Mapping[str, Any]]) -> str:
    """Markdown table: each arm minus the baseline, seed by seed, mean and 95 % interval."""
    lines = [
        "| arm | paired difference (points) | 95 % interval | seeds |",
        "|---|---|---|---|",
    ]
    for row in paired:
        interval = (
            f"[{100 * row['low']:+.1f}, {100 * row['high']:+.1f}]"
            if row["low"] is not None
            else "—"
        )
        lines.append(
            f"| {row['arm'].upper()} | {100 * row['mean']:+.1f} | {interval} | {row['n']} |"
        )
    return "\n".join(lines)


def drift_table(drift: Mapping[str, Any]) -> str:
    """Markdown table: correlation and sign agreement of predicted and measured drift."""
    lines = ["| runs | steps | correlation | sign agreement (%) |", "|---|---|---|---|"]
    named = [("all", drift["all"]), *sorted(drift.get("per_arm", {}).items())]
    for name, row in named:
        lines.append(
            f"| {name.upper() if name != 'all' else 'all'} | {row['steps']} | "
            f"{_fmt(row['correlation'], False)} | {_fmt(row['sign_agreement'])} |"
        )
    return "\n".join(lines)


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
        steps, means, _ = mean_curve(runs, "aem/entropy_mean")
        if steps:
            label = f"λ = {dose:g} (n={len(runs)})"
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


def html_report(markdown: str, png: bytes | None) -> str:
    """A self-contained HTML page: the markdown as preformatted text plus the embedded plot."""
    image = (
        f'<img alt="curves" style="max-width:100%" src="data:image/png;base64,'
        f'{base64.b64encode(png).decode()}">'
        if png
        else ""
    )
    return (
        "<!doctype html><meta charset='utf-8'><title>learning experiment</title>"
        "<body style='font-family:sans-serif;max-width:1100px;margin:auto'>"
        f"<pre style='white-space:pre-wrap'>{html.escape(markdown)}</pre>{image}</body>\n"
    )


def write_report(out: Path, results: Mapping[str, Any]) -> dict[str, Path]:
    """Write report.md, report.html, table.md and plots/curves.png into ``out``."""
    png_path = plot_curves(results, out / PLOTS_DIR / CURVES_PNG)
    plot_drift(results, out / PLOTS_DIR / DRIFT_PNG)
    plot_dose(results, out / PLOTS_DIR / DOSE_PNG)
    text = markdown_report(results)
    paths = {
        "markdown": atomic_write_text(out / "report.md", text),
        "table": atomic_write_text(out / "table.md", final_table(results)),
        "plot": png_path,
    }
    paths["html"] = atomic_write_text(out / "report.html", html_report(text, png_path.read_bytes()))
    return paths
