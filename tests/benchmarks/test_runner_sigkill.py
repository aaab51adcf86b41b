"""``aem bench`` killed with SIGKILL leaves no worker, browser or driver behind, and a resumed
run then plays every episode exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.processes import kill_when_started

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SUITE = """\
name: sigkill
description: WebShop in Chromium, for the SIGKILL test.
seeds: [0]
envs:
  - env: aem/WebShopBrowser-v0
    split: test
    tasks: 4
"""


def _command(suite: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "aem_cli",
        "bench",
        "--suite",
        str(suite),
        "--policy",
        "expert",
        "--workers",
        "2",
        "--out",
        str(out),
        "--no-progress",
    ]


def test_sigkilled_bench_leaves_nothing_and_resumes_every_episode_once(
    browser: None, tmp_path: Path
) -> None:
    suite, out = tmp_path / "sigkill.yaml", tmp_path / "run"
    suite.write_text(SUITE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with (tmp_path / "killed.log").open("w") as log:
        run = subprocess.Popen(_command(suite, out), env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        assert kill_when_started(run, {"chromedriver", "chromium"}) == []
    finally:
        if run.poll() is None:
            run.kill()
    resumed = subprocess.run(
        _command(suite, out), env=env, capture_output=True, text=True, timeout=600
    )
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    results = json.loads((out / "results.json").read_text())
    keys = [episode["key"] for episode in results["episodes"]]
    assert len(keys) == len(set(keys)) == results["planned_episodes"] == 4
    assert all(episode["won"] for episode in results["episodes"])
