"""The learning experiment's report, generated from ``results.json`` alone.

Why only from results.json: the report can then be regenerated anywhere (``aem bench learning
CONFIG --report-only``), after the checkpoints are gone, and it shows exactly the numbers
that were committed. Outputs: ``report.md``, ``report.html`` (self-contained), ``table.md``
(the final-success table, to paste into docs/results.md or docs/mechanism.md) and
``plots/curves.png``; for a grid in the paper's shape (:mod:`~benchmarks.learning.paper`) also
``plots/learning.png``.
"""

from __future__ import annotations

import base64
import html
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aem_envs.core.io import atomic_write_text
from benchmarks.learning.heldout import scoring
from benchmarks.learning.paper import paper_markdown, reading, start_text
from benchmarks.learning.plots import (
    LEARNING_PANELS,
    lambda_arms,
    plot_curves,
    plot_dose,
    plot_drift,
    series,
)

PLOTS_DIR = "plots"
CURVES_PNG = "curves.png"
DRIFT_PNG = "drift.png"
DOSE_PNG = "dose.png"
#: The paper-shaped grids' figure: held-out success and token entropy per arm.
LEARNING_PNG = "learning.png"
#: Its alt text wherever a page shows it.
LEARNING_ALT = "training and held-out success and entropy per arm"


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
            f"{_fmt(warm.get('sampled_train_success'))} %, {scoring(config)} held-out success "
            f"{_fmt(start.get('heldout_success'))} %."
        )
    lines += [
        "",
        "## Final held-out success",
        "",
        final_table(results),
        *_paper_section(results),
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
    if results.get("cost"):
        lines += ["", "## Cost", "", cost_table(results)]
        left = remaining_line(results)
        if left:
            lines += [left, ""]
    lines += ["", f"Written {results.get('written', '')} from results.json.", ""]
    return "\n".join(lines)


def _paper_section(results: Mapping[str, Any]) -> list[str]:
    """The paper's table (estimator × {—, +AEM}) and its curves, for grids of that shape."""
    table = results.get("paper")
    if not table:
        return []
    return [
        "## The paper's table",
        "",
        paper_markdown(table),
        f"Start checkpoint (every run's): {start_text(table)}. {reading(table)}",
        "",
        f"![{LEARNING_ALT}]({PLOTS_DIR}/{LEARNING_PNG})",
        "",
    ]


def hours(seconds: float | None) -> str:
    """Seconds as hours: one decimal, two below an hour."""
    if seconds is None:
        return "—"
    return f"{seconds / 3600:.{1 if seconds >= 3600 else 2}f}"


def cost_table(results: Mapping[str, Any]) -> str:
    """Markdown table: each run's hours (TRL's ``step_time`` of its training steps and the
    wall of its held-out passes, from its metrics; wall and CPU of its recorded processes;
    its sampled pass's episode-hours) and the grid's total."""
    lines = [
        "| run | state | steps timed | `step_time` (h) | held-out wall (h) | "
        "process wall (h) | process CPU (h) | sampled pass (episode-h) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in results["runs"]:
        cost = run.get("cost") or {}
        if not cost:
            continue
        sampled = run.get("sampled")
        lines.append(
            f"| {run['name']} | {run.get('state', run['status'])} | {cost['steps_timed']} | "
            f"{hours(cost['step_s'])} | {hours(cost['heldout_s'])} | "
            f"{hours(cost['session_wall_s']) if cost['sessions'] else '—'} | "
            f"{hours(cost['cpu_s'])} | {hours(sampled['episode_s'] if sampled else None)} |"
        )
    total = results["cost"]
    lines.append(
        f"| **all** | | {total['steps_timed']} | {hours(total['step_s'])} | "
        f"{hours(total['heldout_s'])} | {hours(total['wall_s'])} | {hours(total['cpu_s'])} "
        f"({total['cpu_runs']}/{total['runs']} runs recorded) | "
        f"{hours(total['sampled_episode_s'])} (passes: {total['sampled_passes']}, the start's "
        "included) |"
    )
    return "\n".join(lines) + "\n"


def remaining_line(results: Mapping[str, Any]) -> str | None:
    """What is left of the grid, in lane-hours at the pace of its runs so far (the wall time
    of their processes per step logged, held-out passes included): what a session plans by.
    None before any run has recorded its processes, without a step budget, or when nothing is
    left."""
    runs = results["runs"]
    if any(r.get("max_steps") is None for r in runs):
        return None
    timed = [r for r in runs if (r.get("cost") or {}).get("sessions") and r.get("step")]
    left = sum(r["max_steps"] - (r.get("step") or 0) for r in runs if r["status"] != "done")
    if not timed or left <= 0:
        return None
    pace = sum(r["cost"]["session_wall_s"] for r in timed) / sum(r["step"] for r in timed)
    return (
        f"Left: {left} run-steps, about {hours(left * pace)} lane-hours at the pace so far "
        f"({pace / 60:.1f} min per step per lane, held-out passes included; arms with more "
        "updates per batch take longer)."
    )


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
    if results.get("paper"):
        plot_curves(results, out / PLOTS_DIR / LEARNING_PNG, panels=LEARNING_PANELS)
    text = markdown_report(results)
    paths = {
        "markdown": atomic_write_text(out / "report.md", text),
        "table": atomic_write_text(out / "table.md", final_table(results)),
        "plot": png_path,
    }
    paths["html"] = atomic_write_text(out / "report.html", html_report(text, png_path.read_bytes()))
    return paths
