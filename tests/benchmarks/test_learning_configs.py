"""Every shipped learning-experiment config builds the trainer settings it promises, and the
GPU check refuses a machine without a GPU with one line naming what it needs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from aem_agent.grpo.run import build_config
from benchmarks.learning.config import load_config
from benchmarks.learning.experiment import run_settings

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "benchmarks" / "learning" / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
@pytest.mark.parametrize("algo", ["grpo", "aem"])
def test_shipped_config_builds_its_runs(path: Path, algo: str, tmp_path: Path) -> None:
    config = load_config(path)
    assert config.train_split != config.eval_split
    train = build_config(run_settings(config, algo, 0, tmp_path)).config
    assert train.algo == algo and train.aem_enabled == (algo == "aem")
    assert train.env_ids == [config.env_id]


def test_gpu_check_plays_the_papers_batch_shape(tmp_path: Path) -> None:
    config = load_config(ROOT / "benchmarks" / "learning" / "configs" / "gpu-check.yaml")
    train = build_config(run_settings(config, "aem", 0, tmp_path)).config
    assert (train.generation_batch_size // train.num_generations, train.num_generations) == (16, 8)
    assert config.model == {"path": "smollm2"} and train.aem_unit == "turn"


def test_gpu_check_without_a_gpu_says_so() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the script would train")
    done = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "learning" / "gpu_check.sh"), "unused"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable},
        timeout=120,
    )
    assert done.returncode == 2
    assert "no CUDA GPU visible" in done.stderr and "Traceback" not in done.stderr
