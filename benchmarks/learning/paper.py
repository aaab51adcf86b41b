"""The paper's table: advantage estimator (GRPO, DAPO, GSPO) × {without, with AEM}, final
held-out success over seeds, seed by seed, and the paired AEM − base difference.

Why its own module: the table exists only for grids whose arms map one-to-one onto
(estimator, with/without AEM) cells; :mod:`~benchmarks.learning.collect` builds it into
results.json and the report, the README's block and the docs draw it from there, so the
cell rules (what counts as finished, which seeds pair) live here once. Two scorings where
available: ``greedy`` (the harness's own held-out passes) and ``sampled`` (the grid script's
720-episode pass of each final model, ``OUT/sampled/NAME``).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks.learning.collect import paired_differences
from benchmarks.learning.config import ESTIMATORS, LearningConfig

#: Scoring → the run's field holding its final held-out success under that scoring.
SCORINGS = {"greedy": "final_heldout_success", "sampled": "final_sampled_success"}
#: The table's columns: the arm without AEM, the arm with it.
COLUMNS = (("base", "—"), ("aem", "+AEM"))


def paper_cells(config: LearningConfig) -> dict[tuple[str, str], str] | None:
    """``(estimator, "base" | "aem") → arm name``, or None when two arms share a cell (a
    grid of AEM variants, such as mechanism-fetch2's, is not the paper's table)."""
    cells: dict[tuple[str, str], str] = {}
    for name in config.algorithms:
        arm = config.arm(name)
        cell = (arm.estimator, "aem" if arm.algo == "aem" else "base")
        if cell in cells:
            return None
        cells[cell] = name
    return cells


def paper_table(
    config: LearningConfig,
    runs: Sequence[Mapping[str, Any]],
    start: Mapping[str, float | None],
) -> dict[str, Any] | None:
    """The table's content for results.json: per estimator the two cells and, where both
    arms have finished seeds in common, their paired difference under each scoring.
    ``start`` is the start checkpoint's success per scoring. None when the arms do not map
    one-to-one onto the table's cells."""
    cells = paper_cells(config)
    if cells is None:
        return None
    rows = []
    for estimator in ESTIMATORS:
        names = {column: cells.get((estimator, column)) for column, _ in COLUMNS}
        if not any(names.values()):
            continue
        row: dict[str, Any] = {"estimator": estimator}
        for column, name in names.items():
            row[column] = _cell(name, runs) if name else None
        base, aem = names["base"], names["aem"]
        row["paired"] = {
            scoring: paired_differences(runs, base, [aem], key=key)[0] if base and aem else None
            for scoring, key in SCORINGS.items()
        }
        rows.append(row)
    return {"scorings": list(SCORINGS), "start": dict(start), "rows": rows}


def _cell(arm: str, runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One arm's seeds: per scoring the finished seeds' values, mean and sample std (none
    for a single seed, which has no spread to show); and
    where each unfinished run stands (never mixed into the means)."""
    mine = [r for r in runs if r["algo"] == arm]
    cell: dict[str, Any] = {"arm": arm, "runs_planned": len(mine)}
    for scoring, key in SCORINGS.items():
        per_seed = {
            str(r["seed"]): r[key] for r in mine if r["status"] == "done" and r[key] is not None
        }
        values = list(per_seed.values())
        cell[scoring] = {
            "per_seed": per_seed,
            "n": len(values),
            "mean": statistics.fmean(values) if values else None,
            "std": statistics.stdev(values) if len(values) > 1 else None,  # none for one seed
        }
    cell["unfinished"] = [
        {
            "seed": r["seed"],
            "state": r["state"],
            "step": r["step"],
            "max_steps": r["max_steps"],
            "latest_heldout_success": r["latest_heldout_success"],
        }
        for r in mine
        if r["status"] != "done"
    ]
    return cell


# ------------------------------------------------------------------------------- markdown
def paper_markdown(table: Mapping[str, Any]) -> str:
    """The table: rows the estimators, columns without and with AEM. Each cell gives, per
    scoring with a finished seed, the mean ± std over finished seeds (%) and each seed's
    value, then where every unfinished run stands; the last column the paired difference
    (points, 95 % t interval over the seeds both arms finished)."""
    lines = [
        "| estimator | — (without AEM), held-out success % | +AEM | "
        "+AEM − — (points, 95 % interval) |",
        "|---|---|---|---|",
    ]
    for row in table["rows"]:
        cells = [_cell_text(row[column], table["scorings"]) for column, _ in COLUMNS]
        paired = [
            f"{scoring} {_paired_text(row['paired'][scoring])}"
            for scoring in table["scorings"]
            if row["paired"][scoring] and row["paired"][scoring]["n"]
        ]
        lines.append(
            f"| {row['estimator'].upper()} | {cells[0]} | {cells[1]} | "
            f"{'<br>'.join(paired) or '—'} |"
        )
    return "\n".join(lines) + "\n"


def start_text(table: Mapping[str, Any]) -> str:
    """The start checkpoint's held-out success under each scoring it has."""
    scores = [f"{s} {_pct(v)} %" for s, v in table["start"].items() if v is not None]
    return ", ".join(scores) or "not scored"


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def _cell_text(cell: Mapping[str, Any] | None, scorings: Sequence[str]) -> str:
    if cell is None:
        return "not in this grid"
    parts = []
    for scoring in scorings:
        scored = cell[scoring]
        if scored["n"]:
            seeds = ", ".join(f"s{s} {_pct(v)}" for s, v in sorted(scored["per_seed"].items()))
            spread = "" if scored["std"] is None else f" ± {_pct(scored['std'])}"
            parts.append(f"{scoring} **{_pct(scored['mean'])}{spread}** ({seeds})")
    parts += [unfinished_text(run) for run in cell["unfinished"]]
    return "<br>".join(parts) or "finished, not yet scored"


def unfinished_text(run: Mapping[str, Any]) -> str:
    """Where an unfinished run stands, e.g. ``s1 running, step 23/100, latest greedy 1.4 %``."""
    text = f"s{run['seed']} {run['state']}"
    if run["step"]:
        text += f", step {run['step']}/{run['max_steps']}"
        if run["latest_heldout_success"] is not None:
            text += f", latest greedy {_pct(run['latest_heldout_success'])} %"
    return text


def _paired_text(paired: Mapping[str, Any]) -> str:
    text = f"{100 * paired['mean']:+.1f}"
    if paired["low"] is not None:
        text += f" [{100 * paired['low']:+.1f}, {100 * paired['high']:+.1f}]"
    return f"{text} ({paired['n']} seed{'s' if paired['n'] > 1 else ''})"


def reading(table: Mapping[str, Any]) -> str:
    """One honest sentence per estimator on what the paired differences show so far."""
    sentences = []
    for row in table["rows"]:
        name = row["estimator"].upper()
        for scoring in table["scorings"]:
            paired = row["paired"][scoring]
            if paired is None or paired["n"] < 2:
                continue
            if paired["low"] > 0:
                verdict = "AEM ahead"
            elif paired["high"] < 0:
                verdict = "AEM behind"
            else:
                verdict = "no difference shown (the interval holds 0)"
            sentences.append(f"{name} {scoring}: {verdict} over {paired['n']} paired seeds")
    if not sentences:
        return "Too few paired seeds finished yet to say whether AEM changes held-out success."
    return "; ".join(sentences) + "."
