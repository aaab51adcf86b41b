"""The paper's table (estimator × {—, +AEM}) built from a grid's run folders: finished seeds'
means and paired differences under both scorings, unfinished runs shown apart, the cost."""

from __future__ import annotations

import json
import os
import socket
import statistics
from pathlib import Path

import pytest

from benchmarks.learning import config as lc
from benchmarks.learning.collect import SAMPLED_DIR, run_cost, write_results
from benchmarks.learning.paper import paper_markdown, reading
from benchmarks.learning.report import LEARNING_PNG, PLOTS_DIR, markdown_report, write_report
from benchmarks.learning.status import RUNNING_MARKER, SESSIONS_FILE
from benchmarks.results import build_results
from benchmarks.suite import parse_suite
from tests.benchmarks.conftest import record

#: Arm → (estimator, algo): GRPO and DAPO rows, GSPO absent.
ARMS = {
    "grpo": ("grpo", "grpo"),
    "aem": ("grpo", "aem"),
    "dapo": ("dapo", "grpo"),
    "dapo-aem": ("dapo", "aem"),
}
#: Final greedy held-out success of the finished runs; the others are unfinished.
GREEDY = {
    ("grpo", 0): 0.10,
    ("grpo", 1): 0.20,
    ("grpo", 2): 0.30,
    ("aem", 0): 0.25,
    ("aem", 1): 0.30,
    ("aem", 2): 0.50,
    ("dapo", 0): 0.40,
}
#: Wins out of 20 of the sampled passes (finished runs only; dapo-seed0 not yet scored).
SAMPLED = {("grpo", s): 2 + s for s in range(3)} | {("aem", s): 4 + s for s in range(3)}


def _config(arms: dict[str, tuple[str, str]]) -> lc.LearningConfig:
    return lc.parse_config(
        {
            "name": "paper",
            "seeds": [0, 1, 2],
            "env": {"id": "aemtest/Unused-v0"},
            "arms": {name: {"estimator": e, "algo": a} for name, (e, a) in arms.items()},
            "train": {"max_steps": 10},
        }
    )


def _run(out: Path, name: str, final: float | None, *, steps: int, step_time: float) -> Path:
    """A run folder: held-out scores at steps 0 (the start's) and ``steps`` (if ``final``),
    one train row per step taking ``step_time`` seconds."""
    run_dir = out / lc.RUNS_DIR / name
    run_dir.mkdir(parents=True)
    lines = ["step,heldout/success_rate,heldout/seconds,aem/entropy_mean,step_time", "0,0.05,60,,"]
    lines += [f"{s},,,{0.3 - s / 100},{step_time}" for s in range(1, steps + 1)]
    if final is not None:
        lines.append(f"{steps},{final},30,,")
    (run_dir / "metrics.csv").write_text("\n".join(lines) + "\n")
    return run_dir


def _sampled(out: Path, name: str, wins: int, episodes: int = 20) -> None:
    suite = parse_suite({"name": "u", "envs": [{"env": "aem/ALFWorld-v0", "split": "eval"}]})
    records = [
        record("hf:x", "aem/ALFWorld-v0", "pick_and_place_simple", i, won=i < wins)
        for i in range(episodes)
    ]
    bench = build_results(suite, [("hf:x", True)], records, planned=episodes, settings={})
    folder = out / SAMPLED_DIR / name
    folder.mkdir(parents=True)
    (folder / lc.RESULTS_FILE).write_text(json.dumps(bench))


@pytest.fixture()
def grid(tmp_path: Path) -> tuple[lc.LearningConfig, Path]:
    out = tmp_path / "out"
    config = _config(ARMS)
    for arm, seed, name in config.run_names():
        final = GREEDY.get((arm, seed))
        if final is not None:
            run_dir = _run(out, name, final, steps=10, step_time=360.0)
            (run_dir / lc.DONE_MARKER).write_text(json.dumps({"global_step": 10}))
        elif (arm, seed) == ("dapo", 1):  # training now, in this process
            run_dir = _run(out, name, None, steps=3, step_time=360.0)
            marker = {"pid": os.getpid(), "host": socket.gethostname(), "started": 0.0}
            (run_dir / RUNNING_MARKER).write_text(json.dumps(marker))
        elif (arm, seed) == ("dapo-aem", 0):  # stopped with a held-out pass at step 4
            run_dir = _run(out, name, 0.125, steps=4, step_time=360.0)
    for (arm, seed), wins in SAMPLED.items():
        _sampled(out, f"{arm}-seed{seed}", wins)
    _sampled(out, "start", 1)
    sessions = [{"started": 0.0, "wall_s": 3600.0, "cpu_s": 1800.0}] * 2
    (out / lc.RUNS_DIR / "grpo-seed0" / SESSIONS_FILE).write_text(json.dumps(sessions))
    (out / lc.START_DIR).mkdir(parents=True)
    start = {"heldout_success": 0.05, "parameters": 1000}
    (out / lc.START_DIR / lc.START_MARKER).write_text(json.dumps(start))
    return config, out


def test_the_table_crosses_estimators_with_aem_from_the_finished_seeds(grid) -> None:
    config, out = grid
    table = write_results(out, config)["paper"]
    assert [row["estimator"] for row in table["rows"]] == ["grpo", "dapo"]  # GSPO: no arm
    assert table["start"] == {"greedy": 0.05, "sampled": pytest.approx(0.05)}
    grpo, dapo = table["rows"]
    assert grpo["base"]["greedy"]["per_seed"] == {"0": 0.1, "1": 0.2, "2": 0.3}
    assert grpo["aem"]["greedy"]["mean"] == pytest.approx(statistics.fmean([0.25, 0.3, 0.5]))
    assert grpo["aem"]["greedy"]["std"] == pytest.approx(statistics.stdev([0.25, 0.3, 0.5]))
    assert grpo["aem"]["sampled"]["per_seed"] == {"0": 0.2, "1": 0.25, "2": 0.3}
    # AEM − GRPO seed by seed: +0.15, +0.10, +0.20; t(2) = 4.303.
    paired = grpo["paired"]["greedy"]
    assert paired["seeds"] == [0, 1, 2] and paired["mean"] == pytest.approx(0.15)
    assert paired["high"] - paired["mean"] == pytest.approx(4.303 * 0.05 / 3**0.5)
    assert grpo["paired"]["sampled"]["mean"] == pytest.approx(0.1)
    # DAPO: one seed finished (greedy only, its sampled pass not yet run); the rest apart.
    assert dapo["base"]["greedy"]["per_seed"] == {"0": 0.4}
    assert dapo["base"]["greedy"]["std"] is None
    assert dapo["base"]["sampled"]["n"] == 0
    assert dapo["aem"]["greedy"]["n"] == 0  # a stopped run's last score is never a final
    assert dapo["paired"]["greedy"]["n"] == 0
    assert [(u["seed"], u["state"], u["step"]) for u in dapo["base"]["unfinished"]] == [
        (1, "running", 3),
        (2, "waiting", None),
    ]
    stopped = dapo["aem"]["unfinished"][0]
    assert (stopped["state"], stopped["latest_heldout_success"]) == ("stopped", 0.125)


def test_the_markdown_shows_both_scorings_and_where_unfinished_runs_stand(grid) -> None:
    config, out = grid
    results = write_results(out, config)
    text = paper_markdown(results["paper"])
    grpo, dapo = text.splitlines()[2:]
    assert grpo.startswith("| GRPO | greedy **20.0 ± 10.0** (s0 10.0, s1 20.0, s2 30.0)<br>")
    assert "sampled **25.0 ± 5.0** (s0 20.0, s1 25.0, s2 30.0) |" in grpo
    assert grpo.endswith(
        "| greedy +15.0 [+2.6, +27.4] (3 seeds)<br>sampled +10.0 [+10.0, +10.0] (3 seeds) |"
    )
    assert "s1 running, step 3/10<br>s2 waiting" in dapo
    assert dapo.startswith("| DAPO | greedy **40.0** (s0 40.0)<br>")  # one seed: no spread
    assert "s0 stopped, step 4/10, latest greedy 12.5 %" in dapo
    assert dapo.endswith("| — |")
    assert reading(results["paper"]) == (
        "GRPO greedy: AEM ahead over 3 paired seeds; GRPO sampled: AEM ahead over 3 paired seeds."
    )
    report = markdown_report(results)
    assert "## The paper's table" in report and f"{PLOTS_DIR}/{LEARNING_PNG}" in report


def test_the_cost_adds_what_the_runs_recorded(grid) -> None:
    config, out = grid
    results = write_results(out, config)
    by_name = {r["name"]: r["cost"] for r in results["runs"]}
    assert by_name["grpo-seed0"] == {
        "steps_timed": 10,
        "step_s": 3600.0,
        "heldout_s": 30.0,  # the start's pass at step 0 is not the run's
        "sessions": 2,
        "session_wall_s": 7200.0,
        "cpu_s": 3600.0,
    }
    assert by_name["dapo-seed1"]["steps_timed"] == 3 and by_name["dapo-seed1"]["cpu_s"] is None
    total = results["cost"]
    assert total["steps_timed"] == 7 * 10 + 3 + 4
    assert total["step_s"] == pytest.approx(360.0 * (7 * 10 + 3 + 4))
    assert (total["cpu_runs"], total["cpu_s"], total["wall_s"]) == (1, 3600.0, 7200.0)
    # Six runs' sampled passes and the start's, 20 episodes of 0.2 s each.
    assert total["sampled_passes"] == 7
    assert total["sampled_episode_s"] == pytest.approx(7 * 20 * 0.2)
    paths = write_report(out, results)
    report = paths["markdown"].read_text()
    assert "| grpo-seed0 | done | 10 | 1.0 | 0.01 | 2.0 | 1.0 | 0.00 |" in report
    assert "| dapo-seed1 | running | 3 | 0.30 | 0.00 | — | — | — |" in report
    assert (out / PLOTS_DIR / LEARNING_PNG).stat().st_size > 1000


def test_a_done_runs_final_sampled_pass_ends_its_sampled_curve(grid) -> None:
    """The grid script scores each final model's sampled success (the start's suite); the
    run does not score its last step itself, so that pass is the curve's last point."""
    config, out = grid
    runs = {r["name"]: r for r in write_results(out, config)["runs"]}
    done = runs["grpo-seed0"]
    assert done["curves"]["heldout_sampled/success_rate"] == [[10, done["final_sampled_success"]]]
    assert "heldout_sampled/success_rate" not in runs["dapo-seed1"]["curves"]  # still training


def test_a_batch_of_mini_batch_updates_costs_its_updates_times_their_mean_step_time() -> None:
    """TRL logs the mean ``step_time`` of the optimizer steps a row covers; a DAPO or GSPO
    arm's row covers a rollout batch of ``updates`` of them."""
    rows = [{"step": 1, "step_time": 10.0}, {"step": 2, "step_time": 12.0}]
    assert run_cost(rows, [])["step_s"] == 22.0
    assert run_cost(rows, [], updates=4)["step_s"] == 88.0


def test_a_runs_held_out_hours_count_its_sampled_passes_but_not_the_starts() -> None:
    rows = [
        {"step": 0, "heldout/seconds": 60.0},  # the start's pass, copied into every run
        {"step": 10, "heldout/seconds": 30.0},
        {"step": 50, "heldout/seconds": 30.0, "heldout_sampled/seconds": 300.0},
    ]
    assert run_cost(rows, [])["heldout_s"] == 360.0


def test_a_grid_of_variants_is_not_the_papers_table(tmp_path: Path) -> None:
    """Two arms in one cell (AEM at two λ, as in mechanism-fetch2): no table, no section."""
    config = _config(
        {"grpo": ("grpo", "grpo"), "aem-l1": ("grpo", "aem"), "aem-l2": ("grpo", "aem")}
    )
    out = tmp_path / "out"
    _run(out, "grpo-seed0", 0.5, steps=2, step_time=1.0)
    results = write_results(out, config)
    assert results["paper"] is None
    report = write_report(out, results)["markdown"].read_text()
    assert "paper's table" not in report and not (out / PLOTS_DIR / LEARNING_PNG).exists()
