"""The estimators' settings on real updates of the tiny model from one start and one seed:
DAPO's clip-higher and GSPO's sequence-level ratio change nothing while each rollout batch
gets one optimizer step (the policy ratio is 1), and change the update once it is split into
mini-batches, as the small-agent grid's DAPO and GSPO arms split it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from benchmarks.learning.config import load_config
from tests.agent.grpo.test_trainer import make_config, make_trainer, weights

ROOT = Path(__file__).resolve().parents[3]
SMALL = ROOT / "benchmarks" / "learning" / "configs" / "alfworld-small.yaml"
#: Episodes per rollout batch here (two groups of four).
EPISODES = 8


def update(model_dir: Path, tmp_path: Path, env_id: str, **settings: Any) -> torch.Tensor:
    """The change of every weight after one rollout batch trained with ``settings`` (its
    ``steps_per_generation`` optimizer steps), from the same start, tasks and sampling."""
    spg = int(settings.pop("steps_per_generation", 1))
    settings.pop("per_device_train_batch_size", None)  # the grid's 64 episodes: ours are 8
    settings = {"gradient_accumulation_steps": 1, **settings}
    config = make_config(
        tmp_path / f"run{len(list(tmp_path.iterdir()))}",
        env_id,
        rollout_layout="step",
        max_steps=spg,
        steps_per_generation=spg,
        per_device_train_batch_size=EPISODES // spg,
        learning_rate=0.05,  # far enough from the start for ratios outside [0.8, 1.28]
        **settings,
    )
    trainer = make_trainer(model_dir, config)
    before = weights(trainer.model)
    trainer.train()
    after = weights(trainer.model)
    assert trainer.state.global_step == spg == config.updates_per_batch
    return torch.cat([(a - b).flatten() for a, b in zip(after, before, strict=True)])


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def test_clip_settings_change_nothing_on_one_update_per_batch(
    tiny_model_dir, tmp_path, doors_env_id
) -> None:
    grpo = update(tiny_model_dir, tmp_path, doors_env_id)
    assert grpo.abs().sum() > 0
    for clip in ({"epsilon_high": 0.28}, {"epsilon": 3e-4, "epsilon_high": 4e-4}):
        assert torch.equal(update(tiny_model_dir, tmp_path, doors_env_id, **clip), grpo), clip
    # The sequence-level ratio's gradient is the token-level one, up to float rounding.
    sequence = update(tiny_model_dir, tmp_path, doors_env_id, importance_sampling_level="sequence")
    assert relative(sequence, grpo) < 1e-3


@pytest.mark.parametrize("arm", ["dapo", "gspo"])
def test_the_grids_dapo_and_gspo_arms_update_unlike_grpo(
    tiny_model_dir, tmp_path, doors_env_id, arm: str
) -> None:
    """Against GRPO with the same mini-batches, the arm's own settings (clip-higher; the
    sequence-level ratio with GSPO's clip range) change the update."""
    settings = dict(load_config(SMALL).arm(arm).train)
    assert settings["steps_per_generation"] > 1
    same_batches = {"steps_per_generation": settings["steps_per_generation"]}
    grpo = update(tiny_model_dir, tmp_path, doors_env_id, **same_batches)
    estimator = update(tiny_model_dir, tmp_path, doors_env_id, **settings)
    assert relative(estimator, grpo) > 1e-2
