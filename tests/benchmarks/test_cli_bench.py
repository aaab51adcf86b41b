"""``aem bench`` end to end: a run, a run killed halfway and resumed, compare, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aem_cli.main import main
from benchmarks.episodes import read_record
from tests.benchmarks.toy import ENV

REPO = Path(__file__).resolve().parents[2]


def write_suite(path: Path, **kwargs) -> Path:
    entry = {"env": ENV, "split": "eval", **kwargs}
    path.write_text(json.dumps({"name": "toy", "seeds": [0, 1], "envs": [entry]}))
    return path


def test_bench_writes_results_and_report_and_prints_where(tmp_path, capsys) -> None:
    suite = write_suite(tmp_path / "toy.yaml", tasks=2)
    out = tmp_path / "run"
    argv = ["bench", "--suite", str(suite), "--policy", "expert", "--policy", "random"]
    code = main([*argv, "--out", str(out), "--workers", "1", "--no-progress"])
    assert code == 0
    printed = capsys.readouterr().out
    assert f"report:  {out / 'report.html'}" in printed
    assert "played 8 episodes, reused 0, failed 0" in printed
    results = json.loads((out / "results.json").read_text())
    assert [p["name"] for p in results["policies"]] == ["expert", "random"]
    assert results["summary"][0]["success_rate"] == 100.0
    assert (out / "report.md").exists() and (out / "report.html").exists()

    assert main([*argv, "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    assert "played 0 episodes, reused 8, failed 0" in capsys.readouterr().out

    assert main(["bench", "compare", str(out), str(out / "results.json")]) == 0
    table = capsys.readouterr().out
    assert "| expert | aemtest/Counter-v0 | (all) | 4/4 | 100.0 → 100.0 (+0.0) |" in table


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--suite", "nope"], "unknown suite 'nope'; choose one of"),
        (["--suite", "alfworld-real"], "needs $ALFWORLD_DATA"),
        (["--suite", "{suite}", "--policy", "bogus"], "unknown policy 'bogus'"),
        (["--suite", "{suite}", "--limit", "0"], "--limit must be at least 1"),
        (["compare", "{out}", "{out}"], "does not exist"),
    ],
)
def test_bad_input_is_one_line_error(argv, message, capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    suite = write_suite(tmp_path / "toy.yaml", tasks=1)
    argv = [arg.format(suite=suite, out=tmp_path / "o") for arg in argv]
    options = [] if argv[0] == "compare" else ["--out", str(tmp_path / "o"), "--no-progress"]
    assert main(["bench", *argv, *options]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.slow
def test_run_killed_halfway_resumes_without_redoing_or_corrupting(tmp_path) -> None:
    suite = write_suite(tmp_path / "toy.yaml", kwargs={"delay": 0.15})
    out = tmp_path / "run"
    command = [sys.executable, "-m", "aem_cli", "bench", "--suite", str(suite), "--out", str(out)]
    command += ["--policy", "expert", "--workers", "2", "--no-progress"]
    episodes = out / "episodes"
    proc = subprocess.Popen(command, cwd=REPO, start_new_session=True, stdout=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while len(list(episodes.rglob("*.jsonl"))) < 4 and proc.poll() is None:
            assert time.monotonic() < deadline, "the run never finished 4 episodes"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    finished = {p: p.stat().st_mtime_ns for p in episodes.rglob("*.jsonl")}
    assert 4 <= len(finished) < 12
    assert all(read_record(p) is not None for p in finished)  # whole files only
    assert not (out / "results.json").exists()

    again = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"played {12 - len(finished)} episodes, reused {len(finished)}, failed 0" in again.stdout
    assert {p: p.stat().st_mtime_ns for p in finished} == finished
    results = json.loads((out / "results.json").read_text())
    assert results["finished_episodes"] == 12 and results["summary"][0]["success_rate"] == 100.0
    assert not list(episodes.rglob(".*.tmp"))
