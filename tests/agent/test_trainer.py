"""AEMGRPOTrainer on a tiny random model: GRPO equality at λ = 0, modulation, real steps."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer
from trl import GRPOTrainer

from aem_agent.config import AEMConfig, ConfigError
from aem_agent.rollout import MultiTurnRollout, episode_reward, task_dataset
from aem_agent.trainer import SOURCE_EXTRA_FORWARD, SOURCE_SAMPLER, AEMGRPOTrainer
from aem_envs.registration import landed_entries

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def length_reward(completion_ids: list[list[int]], **_) -> list[float]:
    """A reward that differs inside a group, so advantages are not all zero."""
    return [float(sum(ids) % 11) for ids in completion_ids]


def make_config(tmp_path: Path, env_id: str, **overrides) -> AEMConfig:
    settings = dict(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=96,
        max_steps=2,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=3,
        env_ids=[env_id],
        max_turns=2,
        max_turn_tokens=12,
        num_tasks=4,
        env_workers=1,
        temperature=1.0,
        top_k=0,
    )
    settings.update(overrides)
    return AEMConfig(**settings)


def make_trainer(cls, model_dir: Path, config: AEMConfig, reward=length_reward):
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rollout = MultiTurnRollout(
        tokenizer,
        layout=config.rollout_layout,
        max_turns=config.max_turns,
        max_turn_tokens=config.max_turn_tokens,
        max_total_tokens=config.max_completion_length,
        workers=1,
    )
    return cls(
        model=str(model_dir),
        reward_funcs=[reward],
        args=config,
        train_dataset=task_dataset(config.env_ids, config.num_tasks, seed=config.seed),
        processing_class=tokenizer,
        rollout_func=rollout,
    )


def batch_out(trainer, seed: int = 0) -> dict:
    inputs = [{"prompt": p} for p in trainer.train_dataset["prompt"][:1] for _ in range(4)]
    torch.manual_seed(seed)
    trainer.model.train()
    return trainer._generate_and_score_completions(inputs)


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], torch.Tensor):
            assert torch.equal(a[key], b[key]), key
        else:
            assert a[key] == b[key], key


def test_lambda_zero_equals_grpo_bit_for_bit(tiny_model_dir, tmp_path, doors_env_id) -> None:
    aem = make_trainer(
        AEMGRPOTrainer, tiny_model_dir, make_config(tmp_path, doors_env_id, aem_lambda=0.0)
    )
    grpo = make_trainer(GRPOTrainer, tiny_model_dir, make_config(tmp_path, doors_env_id))
    off = make_trainer(
        AEMGRPOTrainer, tiny_model_dir, make_config(tmp_path, doors_env_id, aem_enabled=False)
    )
    reference = batch_out(grpo)
    assert reference["advantages"].abs().sum() > 0  # a batch where AEM could change something
    assert_same(batch_out(aem), reference)
    assert_same(batch_out(off), reference)


@pytest.mark.parametrize("level", ["response", "turn"])
def test_aem_rescales_advantages_with_group_mean_one(
    tiny_model_dir, tmp_path, doors_env_id, level
) -> None:
    config = make_config(tmp_path, doors_env_id, aem_lambda=2.0, aem_level=level)
    aem = make_trainer(AEMGRPOTrainer, tiny_model_dir, config)
    grpo = make_trainer(GRPOTrainer, tiny_model_dir, make_config(tmp_path, doors_env_id))
    base = batch_out(grpo)["advantages"]
    out = batch_out(aem)
    modulated = out["advantages"]
    mask = out["completion_mask"] * out["tool_mask"]
    if level == "response":
        alpha = modulated / base
        assert alpha.mean().item() == pytest.approx(1.0, abs=1e-5)
        assert not torch.allclose(alpha, torch.ones_like(alpha))
    else:
        assert modulated.shape == out["completion_ids"].shape
        alpha = modulated / base.unsqueeze(1)
        assert not torch.allclose(alpha[mask.bool()], torch.ones(int(mask.sum())))
    assert torch.equal(
        torch.sign(modulated),
        torch.sign(base.reshape(-1, *[1] * (modulated.dim() - 1)).expand_as(modulated)),
    )
    metrics = aem._metrics["train"]
    assert metrics["aem/entropy_source"] == [SOURCE_SAMPLER]
    assert metrics["aem/alpha_min"][0] < 1.0 < metrics["aem/alpha_max"][0]


def test_extra_forward_when_no_entropies_are_at_hand(tiny_model_dir, tmp_path) -> None:
    """Plain single-turn prompts (no rollout): AEM runs one no-grad forward for entropies."""
    from datasets import Dataset

    config = make_config(tmp_path, "unused/Env-v0", max_completion_length=8)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    trainer = AEMGRPOTrainer(
        model=str(tiny_model_dir),
        reward_funcs=[length_reward],
        args=config,
        train_dataset=Dataset.from_dict({"prompt": ["look", "open"]}),
        processing_class=tokenizer,
    )
    torch.manual_seed(0)
    trainer.model.train()
    out = trainer._generate_and_score_completions([{"prompt": "look"}] * 4)
    assert out["advantages"].shape == (4,)
    assert trainer._metrics["train"]["aem/entropy_source"] == [SOURCE_EXTRA_FORWARD]


def test_training_steps_on_a_multi_turn_env(tiny_model_dir, tmp_path, doors_env_id) -> None:
    config = make_config(tmp_path, doors_env_id)
    trainer = make_trainer(AEMGRPOTrainer, tiny_model_dir, config, reward=episode_reward)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    logs = [row for row in trainer.state.log_history if "aem/alpha_min" in row]
    assert len(logs) == 2
    for row in logs:
        assert 0.0 <= row["episode/success_rate"] <= 1.0
        assert row["aem/entropy_mean"] > 0
        assert 1 <= row["episode/turns"] <= config.max_turns
    assert trainer.state.global_step == 2
    after = list(trainer.model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True)) or all(
        row["reward_std"] == 0 for row in logs
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "env_id",
    [
        pytest.param(item.id, id=item.id, marks=[getattr(pytest.mark, r) for r in item.resources])
        for item in landed_entries()
    ],
)
def test_real_training_step_on_each_landed_env(tiny_model_dir, tmp_path, env_id: str) -> None:
    """One real TRL step through multi-turn rollouts on the real environment."""
    config = make_config(
        tmp_path,
        env_id,
        max_steps=1,
        num_generations=2,
        per_device_train_batch_size=2,
        num_tasks=1,
        max_turns=2,
    )
    trainer = make_trainer(AEMGRPOTrainer, tiny_model_dir, config, reward=episode_reward)
    trainer.train()
    assert trainer.state.global_step == 1
    [row] = [row for row in trainer.state.log_history if "aem/alpha_min" in row]
    assert 1 <= row["episode/turns"] <= config.max_turns
    # The tiny random model emits no valid action: each turn costs the invalid penalty.
    assert row["reward"] == pytest.approx(-0.1 * row["episode/turns"], abs=1e-6)


def test_step_layout_trains_one_row_per_step(tiny_model_dir, tmp_path, doors_env_id) -> None:
    config = make_config(tmp_path, doors_env_id, rollout_layout="step", max_steps=1)
    trainer = make_trainer(AEMGRPOTrainer, tiny_model_dir, config)
    inputs = [{"prompt": p} for p in trainer.train_dataset["prompt"][:1] for _ in range(4)]
    torch.manual_seed(0)
    trainer.model.train()
    out = trainer._generate_and_score_completions(inputs)
    turns = [len(x["steps"]) for x in inputs]
    assert out["completion_ids"].shape[0] == sum(turns) > 4
    episode_of_row = torch.arange(4).repeat_interleave(torch.tensor(turns))
    for episode in range(4):
        assert out["advantages"][episode_of_row == episode].unique().numel() == 1
    assert "tool_mask" not in out
    trainer.train()
    assert trainer.state.global_step == 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"aem_level": "token"}, "aem_level"),
        ({"aem_lambda": -1.0}, "aem_lambda"),
        ({"rollout_layout": "step", "aem_level": "turn"}, "trajectory"),
        ({"max_turns": 0}, "max_turns"),
        ({"env_ids": []}, "env_ids"),
    ],
)
def test_bad_settings_name_the_problem(tmp_path, overrides: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_config(tmp_path, "x/Y-v0", **overrides)
