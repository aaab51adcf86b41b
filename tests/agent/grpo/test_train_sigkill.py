"""``aem train`` killed with SIGKILL mid-rollout leaves no env worker, browser or driver behind.

The envs run in Ray actors (``--ray``), each driving Chromium: the run's process tree holds
Ray's head (GCS, raylet, its agents), the env workers, and every worker's chromedriver and
Chromium. Ray ends its head and workers with the driver, but not its agents; the rollout's
marks (:mod:`sandboxes.lifetime`) end those, and the browsers.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent.grpo.test_train_cli import write_settings
from tests.fixtures.processes import kill_when_started

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_sigkilled_train_leaves_no_worker_browser_or_driver(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    pytest.importorskip("ray")
    config = write_settings(tmp_path, "aem/WebShopBrowser-v0", tiny_model_dir)
    command = [sys.executable, "-m", "aem_cli", "train", "--config", str(config), "--ray"]
    command += ["--steps", "50", "--output-dir", str(tmp_path / "run")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with (tmp_path / "train.log").open("w") as log:
        run = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        left = kill_when_started(run, {"raylet", "chromedriver", "chromium"})
    finally:
        if run.poll() is None:
            run.kill()
    assert left == [], (tmp_path / "train.log").read_text()[-2000:]
