"""``aem bench`` end to end: a run, a run killed halfway and resumed, compare, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from aem_agent.rollout import engine
from aem_cli.main import main
from aem_envs import vector
from aem_envs.wrappers import read_trajectory
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


def _without_times(value: Any) -> Any:
    """``value`` with every timing field left out (they differ from run to run)."""
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if "time" not in k}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


@pytest.mark.ray
def test_bench_with_ray_gives_the_same_results_and_trajectories(
    ray_cluster: ModuleType,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[str] = []  # envs made in Ray actors

    def make_ray_env(env_id: str, *args: Any, **kwargs: Any) -> Any:
        made.append(env_id)
        return vector.make_ray_env(env_id, *args, **kwargs)

    monkeypatch.setattr(engine, "make_ray_env", make_ray_env)
    suite = tmp_path / "tiny.yaml"
    entry = {"env": "aem/ALFWorld-v0", "split": "valid_unseen", "tasks": 2, "max_steps": 20}
    raw = {"name": "tiny", "seeds": [0, 1], "policies": {"random": {"seed": 0}}, "envs": [entry]}
    suite.write_text(json.dumps(raw))
    runs = {}
    for name, flags in (("here", []), ("ray", ["--ray"])):
        out = tmp_path / name
        argv = ["bench", "--suite", str(suite), "--policy", "expert", "--policy", "random"]
        assert main([*argv, "--workers", "1", "--no-progress", "--out", str(out), *flags]) == 0
        assert "played 8 episodes, reused 0, failed 0" in capsys.readouterr().out
        assert len(made) == (0 if name == "here" else 2)  # one per policy, reused
        runs[name] = json.loads((out / "results.json").read_text())
        runs[name]["trajectories"] = [
            read_trajectory(out / record["trajectory"]) for record in runs[name]["episodes"]
        ]
    here, there = runs["here"], runs["ray"]
    assert there["settings"].pop("ray") == "local" and here["settings"].pop("ray") is None
    for key in ("summary", "by_task_type", "episodes", "trajectories", "settings"):
        assert _without_times(there[key]) == _without_times(here[key]), key
    assert here["summary"][0]["success_rate"] == 100.0  # the expert, through the actors too
    assert ray_cluster.is_initialized()  # the session's Ray: joined, not stopped


def test_bench_ray_errors_are_one_line_naming_the_fix(tmp_path, monkeypatch, capsys) -> None:
    """An unreachable address (in a fresh process: this one may be connected already) and
    Ray not installed."""
    suite = write_suite(tmp_path / "toy.yaml", tasks=1)
    argv = ["bench", "--suite", str(suite), "--no-progress", "--out", str(tmp_path / "o")]
    proc = subprocess.run(
        [sys.executable, "-m", "aem_cli", *argv, "--ray", "127.0.0.1:1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("aem: error: no Ray cluster answers at '127.0.0.1:1'")
    assert "ray start --head" in proc.stderr and proc.stderr.count("\n") == 1
    monkeypatch.setitem(sys.modules, "ray", None)
    assert main([*argv, "--ray"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'aem[scale]'" in err and err.count("\n") == 1


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
