"""Every shipped learning-experiment config builds the trainer settings it promises, and the
GPU check refuses a machine without a GPU with one line naming what it needs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from aem_agent.credit import TurnPenalty, build
from aem_agent.grpo.run import build_config
from benchmarks.learning.config import SampledEval, load_config
from benchmarks.learning.experiment import run_settings, updates_per_batch

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


SMALL = ROOT / "benchmarks" / "learning" / "configs" / "alfworld-small.yaml"
#: Every setting the small-agent grid's GRPO and AEM runs were started with: later sessions
#: resume them with the code of the day, so these must never change (the runs of earlier starts
#: are archived with their configs, e.g. alfworld-small-oneupdate.yaml).
SMALL_RUN = {
    "save_strategy": "steps",
    "save_steps": 4,  # optimizer steps: every batch (4 updates)
    "save_total_limit": 1,
    "report_to": "none",
    "use_peft": False,
    "torch_threads": 1,
    "rollout_layout": "step",
    "max_turns": 30,
    "max_turn_tokens": 16,
    "prompt_style": "compact",
    "history_window": 1,
    "reply_prefix": "<action>",
    "num_tasks": 1024,
    "max_steps": 400,  # 100 batches
    "per_device_train_batch_size": 16,  # 4 mini-batches of a 64-episode rollout batch
    "steps_per_generation": 4,
    "gradient_accumulation_steps": 1,
    "num_generations": 8,
    "max_completion_length": 4096,
    "learning_rate": 1.0e-4,
    "scale_rewards": "batch",
    "lr_scheduler_type": "constant",
    "temperature": 1.0,
    "top_k": 0,
    "beta": 0.0,
    "env_workers": 1,
    "logging_steps": 4,
    "env_ids": ["aem/ALFWorld-v0"],
    "env_kwargs": {},
    "env_split": "train",
}


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("algo", ["grpo", "aem"])
def test_the_small_grids_grpo_and_aem_runs_keep_their_settings(
    algo: str, seed: int, tmp_path: Path
) -> None:
    config = load_config(SMALL)
    assert (algo, seed, f"{algo}-seed{seed}") in config.run_names()
    credit = {"grpo": "turn-penalty", "aem": "turn-penalty+aem"}[algo]
    expected = {
        **SMALL_RUN,
        "algo": algo,
        "seed": seed,
        "output_dir": str(tmp_path),
        "credit": credit,
    }
    assert run_settings(config, algo, seed, tmp_path) == expected
    assert config.baseline == "grpo" and config.arm(algo).estimator == "grpo"
    # sampled at step 50 in the run; step 100 is the grid script's pass of the final model
    assert config.sampled_eval == SampledEval(every=50, samples=10, at_last=False)


def test_the_small_grids_estimator_arms_see_the_same_batches(tmp_path: Path) -> None:
    """Every arm of the paper's table plays 64 episodes (8 groups of 8) per rollout batch and
    100 batches, checkpointed and logged after each, in 4 mini-batch updates per batch, so
    TRL counts 4 optimizer steps per grid step."""
    config = load_config(SMALL)
    estimators = {arm: config.arm(arm).estimator for arm in config.algorithms}
    assert estimators == {
        "grpo": "grpo",
        "aem": "grpo",
        "dapo": "dapo",
        "dapo-aem": "dapo",
        "gspo": "gspo",
        "gspo-aem": "gspo",
    }
    for arm in config.algorithms:
        train = build_config(run_settings(config, arm, 0, tmp_path)).config
        updates = updates_per_batch(config, arm)
        assert train.updates_per_batch == updates == 4
        assert (train.generation_batch_size, train.num_generations) == (64, 8)
        assert (train.max_steps, train.save_steps, train.logging_steps) == (
            100 * updates,
            updates,
            updates,
        )
        assert train.aem_enabled == arm.endswith("aem")
        # every arm charges each penalty to its own turn over a baseline over turns, scaled by
        # the batch; AEM arms then apply α
        assert train.credit_spec == ("turn-penalty+aem" if arm.endswith("aem") else "turn-penalty")
        assert build(train.credit_spec, train).estimators[0] == TurnPenalty(scale="batch")
    dapo = build_config(run_settings(config, "dapo-aem", 0, tmp_path)).config
    assert (dapo.loss_type, dapo.epsilon, dapo.epsilon_high) == ("dapo", 0.2, 0.28)
    gspo = build_config(run_settings(config, "gspo", 0, tmp_path)).config
    assert (gspo.importance_sampling_level, gspo.loss_type) == ("sequence", "grpo")
    assert (gspo.epsilon, gspo.epsilon_high) == (3e-4, 4e-4)


def test_the_estimator_update_measurement_sets_each_rows_update_count(tmp_path: Path) -> None:
    """``benchmarks.learning.estimator_updates`` compares one-update rows with four-update
    ones; the grid's own arms train in 4 mini-batches, so a row must not inherit them."""
    from benchmarks.learning.estimator_updates import comparisons

    config = load_config(SMALL)
    for name, settings, _ in comparisons(config):
        values = run_settings(config, "aem", 0, tmp_path, save_strategy="no", **settings)
        updates = build_config(values).config.updates_per_batch
        assert updates == (1 if "1 update" in name else 4), name
