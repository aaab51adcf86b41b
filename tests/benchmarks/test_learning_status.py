"""``aem bench learning --status``: which runs of a grid are done, running, stopped (and where
each resumes) or waiting, read from the run folders alone."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from aem_cli.main import main
from benchmarks.learning import config as lc
from benchmarks.learning.collect import recent_mean
from benchmarks.learning.report import remaining_line
from benchmarks.learning.status import (
    RUNNING_MARKER,
    SESSIONS_FILE,
    format_status,
    run_status,
    running,
    start_status,
)

CONFIG = "name: t\nalgorithms: [grpo, aem]\nseeds: [0, 1, 2]\nenv: {id: aemtest/Unused-v0}\n"


def _run(out: Path, name: str, *, steps: int = 0, checkpoint: int | None = None) -> Path:
    run_dir = out / lc.RUNS_DIR / name
    run_dir.mkdir(parents=True)
    lines = [
        "step,heldout/success_rate,reward,episode/success_rate,episode/valid_rate",
        "0,0.25,,,",
    ]
    lines += [f"{s},,{s},{s / 100},0.5" for s in range(1, steps + 1)]
    (run_dir / "metrics.csv").write_text("\n".join(lines) + "\n")
    if checkpoint is not None:  # saved to the end: the trainer's state is written last
        (run_dir / f"checkpoint-{checkpoint}").mkdir()
        (run_dir / f"checkpoint-{checkpoint}" / "trainer_state.json").write_text("{}")
    return run_dir


def _owner(run_dir: Path, pid: int) -> None:
    marker = {"pid": pid, "host": socket.gethostname(), "started": 0.0}
    (run_dir / RUNNING_MARKER).write_text(json.dumps(marker))


@pytest.fixture()
def grid(tmp_path: Path) -> tuple[lc.LearningConfig, Path]:
    (tmp_path / "exp.yaml").write_text(CONFIG)
    out = tmp_path / "out"
    done = _run(out, "grpo-seed0", steps=4)
    (done / lc.DONE_MARKER).write_text(json.dumps({"global_step": 4}))
    _owner(_run(out, "aem-seed0", steps=3, checkpoint=3), os.getpid())  # alive: this test
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                          capture_output=True, text=True)  # fmt: skip
    _owner(_run(out, "grpo-seed1", steps=2, checkpoint=2), int(gone.stdout))  # killed
    _run(out, "aem-seed1", steps=5, checkpoint=4)  # stopped between processes
    return lc.load_config(tmp_path / "exp.yaml"), out


def test_each_run_says_where_it_stands(grid: tuple[lc.LearningConfig, Path]) -> None:
    config, out = grid
    status = {s.name: s for s in run_status(config, out)}
    assert {name: s.state for name, s in status.items()} == {
        "grpo-seed0": "done",
        "aem-seed0": "running",
        "grpo-seed1": "stopped",
        "aem-seed1": "stopped",
        "grpo-seed2": "waiting",
        "aem-seed2": "waiting",
    }
    assert status["aem-seed0"].note == f"pid {os.getpid()}"
    assert "process" in status["grpo-seed1"].note and "is gone" in status["grpo-seed1"].note
    assert status["aem-seed1"].note == "resumes from checkpoint-4"
    assert (status["aem-seed1"].step, status["aem-seed1"].checkpoint) == (5, 4)
    assert status["grpo-seed0"].heldout_success == pytest.approx(0.25)
    table = format_status(list(status.values()), 10)
    assert status["aem-seed1"].train_success == pytest.approx(0.03)  # steps 1-5: 0.01..0.05
    row = "| aem-seed1 | stopped | 5 / 10 | 4 | 0.030 | 0.500 | 0.250 | resumes from checkpoint-4 |"
    assert row in table
    assert table.rstrip().endswith(
        "1 done, 1 running, 2 stopped, 2 waiting\n"
        "not carried at their newest checkpoint: aem-seed0, grpo-seed1, aem-seed1 (--carry)"
    )


def test_the_status_command_rewrites_results_from_the_runs_done(
    grid: tuple[lc.LearningConfig, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = grid
    code = main(["bench", "learning", str(tmp_path / "exp.yaml"), "--out", str(out), "--status"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "start: not built; task check: not done" in printed
    assert "| grpo-seed2 | waiting | — | — | — | — | — |  |" in printed
    results = json.loads((out / lc.RESULTS_FILE).read_text())
    assert [r["status"] for r in results["runs"]][:2] == ["done", "partial"]
    assert (out / "report.md").is_file()
    blind = ["bench", "learning", str(tmp_path / "exp.yaml"), "--out", str(out), "--status"]
    assert main([*blind, "--training-only"]) == 0
    printed = capsys.readouterr().out
    assert "held-out success" not in printed  # neither the column nor the start's score
    assert "| grpo-seed2 | waiting | — | — | — | — |  |" in printed
    row = "| aem-seed1 | stopped | 5 | 4 | 0.030 | 0.500 | resumes from checkpoint-4 |"
    assert row in printed
    assert main(["bench", "learning", str(tmp_path / "exp.yaml"), "--training-only"])
    assert "--training-only shapes what --status prints: add --status" in capsys.readouterr().err
    empty = tmp_path / "none"
    assert main(["bench", "learning", str(tmp_path / "exp.yaml"), "--out", str(empty), "--status"])
    assert "holds no grid yet; start it without --status" in capsys.readouterr().err


def test_the_start_says_whether_it_is_built(tmp_path: Path) -> None:
    assert start_status(tmp_path) == "start: not built; task check: not done"
    (tmp_path / ".start.building").mkdir()
    assert start_status(tmp_path).startswith("start: being built")
    (tmp_path / lc.START_DIR).mkdir()
    (tmp_path / lc.START_DIR / lc.START_MARKER).write_text(json.dumps({"heldout_success": 0.25}))
    (tmp_path / lc.TASK_CHECK_FILE).write_text("{}")
    assert start_status(tmp_path) == "start: ready (held-out success 0.250); task check: done"
    assert start_status(tmp_path, heldout=False) == "start: ready; task check: done"


def test_the_running_marker_lives_as_long_as_the_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "grpo-seed0"
    with pytest.raises(KeyboardInterrupt), running(run_dir):
        assert json.loads((run_dir / RUNNING_MARKER).read_text())["pid"] == os.getpid()
        raise KeyboardInterrupt  # a killed run leaves no marker claiming it still runs
    assert not (run_dir / RUNNING_MARKER).exists()


def test_each_session_of_a_run_records_its_wall_and_cpu_seconds(tmp_path: Path) -> None:
    """Rewritten while the run trains (a killed session keeps its record up to then) and at
    its end; a resumed run's next session is added to the earlier ones."""
    run_dir = tmp_path / "runs" / "grpo-seed0"
    log = run_dir / SESSIONS_FILE
    with running(run_dir, every=0.01):
        while not log.is_file():  # the keeper's first record, written while the run trains
            sum(i * i for i in range(10_000))
        assert len(json.loads(log.read_text())) == 1
    with pytest.raises(KeyboardInterrupt), running(run_dir, every=60):
        raise KeyboardInterrupt
    sessions = json.loads(log.read_text())
    assert len(sessions) == 2
    assert all(s["wall_s"] >= 0 and s["cpu_s"] >= 0 and s["started"] > 0 for s in sessions)
    assert sessions[0]["started"] <= sessions[1]["started"]


def test_an_arm_with_mini_batch_updates_stands_at_its_rollout_batch(tmp_path: Path) -> None:
    """Two optimizer steps per rollout batch: checkpoint-8 is batch 4, as metrics.csv counts."""
    mini_batches = "{steps_per_generation: 2, per_device_train_batch_size: 4}"
    (tmp_path / "exp.yaml").write_text(
        "name: t\nseeds: [0]\nenv: {id: aemtest/Unused-v0}\n"
        "train: {per_device_train_batch_size: 8, num_generations: 4, max_steps: 10}\n"
        f"arms:\n  grpo: {{algo: grpo}}\n  dapo: {{algo: grpo, train: {mini_batches}}}\n"
    )
    out = tmp_path / "out"
    _run(out, "grpo-seed0", steps=5, checkpoint=4)
    _run(out, "dapo-seed0", steps=5, checkpoint=8)
    status = {s.name: s for s in run_status(lc.load_config(tmp_path / "exp.yaml"), out)}
    assert (status["grpo-seed0"].step, status["grpo-seed0"].checkpoint) == (5, 4)
    assert (status["dapo-seed0"].step, status["dapo-seed0"].checkpoint) == (5, 4)
    assert status["dapo-seed0"].note == "resumes from checkpoint-8"


def test_a_recent_mean_reads_the_last_values_logged() -> None:
    rows = [{"step": s, "x": float(s)} for s in range(1, 16)] + [{"step": 16}]
    assert recent_mean(rows, "x", 10) == pytest.approx(sum(range(6, 16)) / 10)
    assert recent_mean(rows[:3], "x", 10) == pytest.approx(2.0)
    assert recent_mean(rows, "y", 10) is None


def test_what_is_left_is_priced_at_the_pace_of_the_runs_so_far() -> None:
    def run(status: str, step: int | None, wall: float | None) -> dict:
        cost = {"sessions": 1, "session_wall_s": wall} if wall else {"sessions": 0}
        return {"status": status, "step": step, "max_steps": 100, "cost": cost}

    # 100 + 50 steps took 150 * 120 s: 2 min a step; 50 + 100 steps are left.
    runs = [run("done", 100, 12_000.0), run("partial", 50, 6_000.0), run("pending", None, None)]
    line = remaining_line({"runs": runs})
    assert line is not None and line.startswith("Left: 150 run-steps, about 5.0 lane-hours")
    assert "(2.0 min per step per lane" in line
    assert remaining_line({"runs": [run("pending", None, None)]}) is None  # no pace yet
    assert remaining_line({"runs": [run("done", 100, 12_000.0)]}) is None  # nothing left


def test_carry_copies_each_unfinished_runs_newest_checkpoint_where_status_finds_it(
    grid: tuple[lc.LearningConfig, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, out = grid
    (out / lc.RUNS_DIR / "aem-seed1" / "checkpoint-5").mkdir()  # a save still being written
    carry = ["bench", "learning", str(tmp_path / "exp.yaml"), "--out", str(out), "--carry"]
    assert main(carry) == 0
    assert capsys.readouterr().out.splitlines() == [  # the done run carries nothing
        "aem-seed0: carries checkpoint-3",
        "aem-seed1: carries checkpoint-4",
        "grpo-seed1: carries checkpoint-2",
    ]
    held = out / lc.RUNS_DIR / "aem-seed1" / "carried" / "checkpoint-4" / "trainer_state.json"
    assert held.read_text() == "{}"
    for name in ("checkpoint-4", "checkpoint-5"):  # what a fresh machine's clone lacks
        shutil.rmtree(out / lc.RUNS_DIR / "aem-seed1" / name)
    status = {s.name: s for s in run_status(config, out)}
    assert status["aem-seed1"].note == "resumes from carried/checkpoint-4"
    assert status["aem-seed1"].checkpoint == status["aem-seed1"].carried == 4
    assert "not carried" not in format_status(list(status.values()), 10)
    assert main([*carry, "--status"])
    assert "--carry copies checkpoints and does nothing else" in capsys.readouterr().err


def test_carry_says_so_when_every_try_lost_its_source(
    grid: tuple[lc.LearningConfig, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks.learning import carry

    _, out = grid

    def rotated(source: Path, target: Path) -> None:  # a newer save removed it mid-copy
        raise FileNotFoundError(source)

    monkeypatch.setattr(carry.shutil, "copytree", rotated)
    assert "aem-seed1: not carried (its checkpoints kept changing; rerun)" in carry.carry(out)
    assert not (out / lc.RUNS_DIR / "aem-seed1" / carry.CARRIED_DIR).exists()
