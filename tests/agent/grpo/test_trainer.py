"""AEMGRPOTrainer on a tiny random model: GRPO equality at λ = 0, modulation, real steps."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer
from trl import GRPOTrainer, get_peft_config

from aem_agent.credit.modulation import scope_keys
from aem_agent.grpo.config import AEMConfig, AgentModelConfig, ConfigError
from aem_agent.grpo.step_layout import SOURCE_EXTRA_FORWARD, SOURCE_OLD_POLICY, SOURCE_SAMPLER
from aem_agent.grpo.trainer import AEMGRPOTrainer
from aem_agent.rollout.groups import MultiTurnRollout
from aem_agent.rollout.records import task_dataset
from aem_agent.rollout.samplers import model_generator
from aem_envs.registration import ENTRIES

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def reply_reward(completion_ids: list[list[int]], steps: list | None = None, **_) -> list[float]:
    """A reward that differs inside a group, so advantages are not all zero: a hash of the
    replies (of every turn in the step layout, whose TRL completions are stand-ins)."""
    if steps is not None:
        completion_ids = [[t for turn in turns for t in turn["completion_ids"]] for turns in steps]
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
        activation_checkpointing=False,
        seed=3,
        env_ids=[env_id],
        max_turns=2,
        max_turn_tokens=12,
        num_tasks=4,
        env_workers=1,
        temperature=1.0,
        top_k=0,
        rollout_layout="trajectory",
    )
    settings.update(overrides)
    return AEMConfig(**settings)


def make_trainer(
    model_dir: Path, config: AEMConfig, reward=reply_reward, trainer=AEMGRPOTrainer, **kwargs
):
    """The trainer (``trainer``, a subclass of aem's) as ``aem train`` builds it: rollout,
    tasks from the config."""
    return trainer(model=str(model_dir), reward_funcs=[reward], args=config, **kwargs)


def make_grpo(model_dir: Path, config: AEMConfig) -> GRPOTrainer:
    """TRL's own trainer over the same rollout and tasks (the baseline AEM must equal)."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return GRPOTrainer(
        model=str(model_dir),
        reward_funcs=[reply_reward],
        args=config,
        train_dataset=task_dataset(config.env_ids, config.num_tasks, seed=config.seed),
        processing_class=tokenizer,
        rollout_func=MultiTurnRollout.from_config(config, tokenizer),
    )


def batch_out(trainer, seed: int = 0) -> tuple[dict, list[dict]]:
    inputs = [{"prompt": p} for p in trainer.train_dataset["prompt"][:1] for _ in range(4)]
    torch.manual_seed(seed)
    trainer.model.train()
    return trainer._generate_and_score_completions(inputs), inputs


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], torch.Tensor):
            assert torch.equal(a[key], b[key]), key
        else:
            assert a[key] == b[key], key


def weights(model) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters() if p.requires_grad]


@pytest.mark.parametrize("scope", ["group", "trajectory", "batch"])
def test_the_ablations_reach_the_trainers_alpha(
    tiny_model_dir, tmp_path, doors_env_id, scope: str
) -> None:
    """Through the trainer: shuffled α keeps each scope's multiset of α and the mean of α is 1
    over the scope's units; the record keeps every unit's A, α, H̄ and surprisal."""
    runs = {}
    for shuffle in (False, True):
        config = make_config(
            tmp_path,
            doors_env_id,
            rollout_layout="step",
            max_turns=3,
            aem_min_range=0.0,
            aem_scope=scope,
            aem_shuffle=shuffle,
        )
        trainer = make_trainer(tiny_model_dir, config)
        batch_out(trainer)
        runs[shuffle] = trainer.aem_record
    plain, shuffled = runs[False], runs[True]
    assert torch.equal(plain.hbar, shuffled.hbar)  # the same sampled batch
    keys = scope_keys(plain.units, scope)
    for key in keys.unique():
        members = keys == key
        assert sorted(shuffled.alpha[members].tolist()) == pytest.approx(
            sorted(plain.alpha[members].tolist())
        )
        assert plain.alpha[members].mean().item() == pytest.approx(1.0)
    assert plain.surprisal is not None and (plain.surprisal >= 0).all()
    assert len(plain.advantage) == plain.units.count


def test_lambda_zero_equals_grpo_bit_for_bit(tiny_model_dir, tmp_path, doors_env_id) -> None:
    aem = make_trainer(tiny_model_dir, make_config(tmp_path, doors_env_id, aem_lambda=0.0))
    grpo = make_grpo(tiny_model_dir, make_config(tmp_path, doors_env_id))
    off = make_trainer(tiny_model_dir, make_config(tmp_path, doors_env_id, aem_enabled=False))
    reference, _ = batch_out(grpo)
    assert reference["advantages"].abs().sum() > 0  # a batch where AEM could change something
    assert_same(batch_out(aem)[0], reference)
    assert_same(batch_out(off)[0], reference)


@pytest.mark.parametrize("unit", ["trajectory", "turn"])
def test_aem_rescales_trajectory_rows_with_group_mean_one(
    tiny_model_dir, tmp_path, doors_env_id, unit
) -> None:
    config = make_config(tmp_path, doors_env_id, aem_lambda=2.0, aem_unit=unit, aem_min_range=0)
    aem = make_trainer(tiny_model_dir, config)
    base = batch_out(make_grpo(tiny_model_dir, make_config(tmp_path, doors_env_id)))[0]
    out, _ = batch_out(aem)
    base, modulated = base["advantages"], out["advantages"]
    mask = out["completion_mask"] * out["tool_mask"]
    if unit == "trajectory":
        alpha = modulated / base
        assert alpha.mean().item() == pytest.approx(1.0, abs=1e-5)
        assert not torch.allclose(alpha, torch.ones_like(alpha))
    else:  # per token where a row's turns differ, else one value per row
        if modulated.dim() == 1:
            modulated = modulated.unsqueeze(1).expand(out["completion_ids"].shape)
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


def step_alpha(out: dict, inputs: list[dict]) -> tuple[torch.Tensor, torch.Tensor]:
    """(α per real step row, episode of each row), read back as A'/A of the episode."""
    turns = torch.tensor([len(x["steps"]) for x in inputs])
    episode = torch.arange(len(inputs)).repeat_interleave(turns)
    return out["advantages"][: len(episode)], episode


def test_step_layout_gives_each_turn_its_own_alpha(tiny_model_dir, tmp_path, doors_env_id) -> None:
    overrides = dict(rollout_layout="step", max_turns=3, aem_min_range=0.0, aem_lambda=2.0)
    grpo_out, inputs = batch_out(
        make_trainer(
            tiny_model_dir, make_config(tmp_path, doors_env_id, aem_enabled=False, **overrides)
        )
    )
    aem = make_trainer(tiny_model_dir, make_config(tmp_path, doors_env_id, **overrides))
    out, _ = batch_out(aem)
    turns = [len(x["steps"]) for x in inputs]
    assert out["completion_ids"].shape[0] >= sum(turns) > 4  # one row per turn (+ padding)
    assert "tool_mask" not in out
    base, episode = step_alpha(grpo_out, inputs)
    modulated, _ = step_alpha(out, inputs)
    for e in range(4):  # the GRPO baseline: every turn carries its episode's advantage
        assert base[episode == e].unique().numel() == 1
    nonzero = base != 0
    alpha = modulated[nonzero] / base[nonzero]
    assert alpha.mean().item() == pytest.approx(1.0, abs=1e-5)  # one group: mean α is 1
    # Two turns of one episode get different α (AEM's per-turn credit assignment).
    by_episode = [alpha[episode[nonzero] == e] for e in range(4)]
    assert any(len(a) > 1 and a.max() - a.min() > 1e-4 for a in by_episode)
    assert (out["advantages"][sum(turns) :] == 0).all()  # padding rows carry nothing
    metrics = aem._metrics["train"]
    assert metrics["aem/units"] == [float(sum(turns))]
    assert metrics["aem/gated_share"] == [0.0]


def test_step_layout_gate_leaves_grpo(tiny_model_dir, tmp_path, doors_env_id) -> None:
    overrides = dict(rollout_layout="step", max_turns=3, aem_min_range=100.0)
    grpo_out, _ = batch_out(
        make_trainer(
            tiny_model_dir, make_config(tmp_path, doors_env_id, aem_enabled=False, **overrides)
        )
    )
    aem = make_trainer(tiny_model_dir, make_config(tmp_path, doors_env_id, **overrides))
    out, _ = batch_out(aem)
    assert torch.equal(out["advantages"], grpo_out["advantages"])
    assert aem._metrics["train"]["aem/gated_share"] == [1.0]


class StandInVLLM:
    """TRL's vLLM backend API (``generate``, ``sync_weights``) over the trainer's own model,
    reporting log-probs shifted by a known offset so the importance ratio is not 1."""

    max_completion_length = 12

    def __init__(self, trainer, shift: float = -0.05) -> None:
        self.trainer, self.shift = trainer, shift

    def sync_weights(self) -> None:
        pass

    def generate(self, prompts, images, num_generations):
        sample = model_generator(
            self.trainer.model,
            self.trainer.processing_class,
            self.trainer.generation_config,
            max_new_tokens=self.max_completion_length,
        )
        replies = sample(prompts)
        logprobs = [[[lp + self.shift] for lp in r.logprobs] for r in replies]
        return prompts, [r.ids for r in replies], logprobs, None


def test_step_layout_with_a_vllm_backend_recomputes_the_ratio_on_turn_rows(
    tiny_model_dir, tmp_path, doors_env_id
) -> None:
    config = make_config(tmp_path, doors_env_id, rollout_layout="step", max_turns=3)
    trainer = make_trainer(tiny_model_dir, config)
    trainer.use_vllm = True
    trainer.vllm_importance_sampling_correction = True
    trainer.vllm_importance_sampling_mode = "token_truncate"
    trainer.vllm_generation = StandInVLLM(trainer)
    trainer._last_loaded_step = -1  # what TRL's __init__ sets when vLLM is on
    out, inputs = batch_out(trainer)
    rows = sum(len(x["steps"]) for x in inputs)
    assert out["old_per_token_logps"].shape == out["completion_ids"].shape
    mask = out["completion_mask"].bool()
    ratio = out["importance_sampling_ratio"]
    assert ratio.shape == out["completion_ids"].shape
    # π_old / π_sampler on every real token: the stand-in reported log-probs 0.05 too low.
    expected = torch.exp(out["old_per_token_logps"] - out["sampling_per_token_logps"])
    assert torch.allclose(
        ratio[mask], expected[mask].clamp(max=config.vllm_importance_sampling_clip_max)
    )
    assert ratio[mask].mean().item() == pytest.approx(
        torch.exp(torch.tensor(0.05)).item(), rel=1e-3
    )
    assert out["completion_ids"][:rows].shape[0] == rows
    assert trainer._metrics["train"]["aem/entropy_source"] == [SOURCE_OLD_POLICY]


def test_step_layout_with_lora_and_beta_uses_the_base_as_reference(
    tiny_model_dir, tmp_path, doors_env_id
) -> None:
    config = make_config(
        tmp_path,
        doors_env_id,
        rollout_layout="step",
        beta=0.1,
        max_steps=1,
        learning_rate=5e-2,
    )
    lora = AgentModelConfig(use_peft=True, lora_target_modules=["q_proj", "v_proj"])
    trainer = make_trainer(tiny_model_dir, config, peft_config=get_peft_config(lora))
    assert trainer.model.peft_config["default"].r == lora.lora_r
    out, inputs = batch_out(trainer)
    mask = out["completion_mask"].bool()
    # A fresh LoRA adapter starts as the identity: the reference (adapter off) equals the policy.
    policy, _ = trainer._step_forward(trainer.model, _rows_of(out), 1, False)
    assert torch.allclose(
        out["ref_per_token_logps"][mask], policy[mask].to(out["ref_per_token_logps"]), atol=1e-5
    )
    base_before = [
        p.detach().clone() for n, p in trainer.model.named_parameters() if "lora" not in n
    ]
    lora_before = weights(trainer.model)
    trainer.train()
    assert trainer.state.global_step == 1
    lora_after = weights(trainer.model)
    assert any(not torch.equal(a, b) for a, b in zip(lora_before, lora_after, strict=True))
    base_after = [p for n, p in trainer.model.named_parameters() if "lora" not in n]
    assert all(torch.equal(a, b) for a, b in zip(base_before, base_after, strict=True))


def _rows_of(out: dict):
    from aem_agent.grpo.turn_rows import StepRows

    n = out["completion_ids"].shape[0]
    return StepRows(
        prompt_ids=out["prompt_ids"].cpu(),
        prompt_mask=out["prompt_mask"].cpu(),
        completion_ids=out["completion_ids"].cpu(),
        completion_mask=out["completion_mask"].cpu(),
        logprobs=torch.zeros(out["completion_ids"].shape),
        entropies=None,
        episode=torch.zeros(n, dtype=torch.long),
    )


def test_extra_forward_when_no_entropies_are_at_hand(tiny_model_dir, tmp_path) -> None:
    """Plain single-turn prompts (no rollout): AEM runs one no-grad forward for entropies."""
    from datasets import Dataset

    config = make_config(tmp_path, "unused/Env-v0", max_completion_length=8)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    trainer = AEMGRPOTrainer(
        model=str(tiny_model_dir),
        reward_funcs=[reply_reward],
        args=config,
        train_dataset=Dataset.from_dict({"prompt": ["look", "open"]}),
        processing_class=tokenizer,
    )
    torch.manual_seed(0)
    trainer.model.train()
    out = trainer._generate_and_score_completions([{"prompt": "look"}] * 4)
    assert out["advantages"].shape == (4,)
    assert trainer._metrics["train"]["aem/entropy_source"] == [SOURCE_EXTRA_FORWARD]


@pytest.mark.parametrize("layout", ["step", "trajectory"])
def test_training_steps_move_the_weights(tiny_model_dir, tmp_path, doors_env_id, layout) -> None:
    config = make_config(tmp_path, doors_env_id, rollout_layout=layout)
    trainer = make_trainer(tiny_model_dir, config)
    before = weights(trainer.model)
    trainer.train()
    logs = [row for row in trainer.state.log_history if "aem/alpha_min" in row]
    assert len(logs) == 2
    for row in logs:
        assert 0.0 <= row["episode/success_rate"] <= 1.0
        assert 0.0 <= row["episode/valid_rate"] <= 1.0
        assert row["aem/entropy_mean"] > 0
        assert 1 <= row["episode/turns"] <= config.max_turns
    assert trainer.state.global_step == 2
    assert any(row["reward_std"] > 0 for row in logs)  # non-zero advantages ...
    after = weights(trainer.model)
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))  # ... moved


@pytest.mark.slow
@pytest.mark.parametrize(
    "env_id",
    [
        pytest.param(item.id, id=item.id, marks=[getattr(pytest.mark, r) for r in item.resources])
        for item in ENTRIES
    ],
)
def test_real_training_step_on_each_env(tiny_model_dir, tmp_path, env_id: str) -> None:
    """One real TRL step through step-layout rollouts on the real environment."""
    config = make_config(
        tmp_path,
        env_id,
        max_steps=1,
        num_generations=2,
        per_device_train_batch_size=2,
        num_tasks=1,
        max_turns=2,
        rollout_layout="step",
        max_completion_length=12,
    )
    trainer = make_trainer(tiny_model_dir, config)
    before = weights(trainer.model)
    trainer.train()
    assert trainer.state.global_step == 1
    [row] = [row for row in trainer.state.log_history if "aem/alpha_min" in row]
    assert 1 <= row["episode/turns"] <= config.max_turns
    if row["reward_std"] > 0:
        after = weights(trainer.model)
        assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"aem_unit": "token"}, "aem_unit"),
        ({"aem_scope": "episode"}, "aem_scope"),
        ({"aem_min_range": -0.1}, "aem_min_range"),
        ({"rollout_layout": "steps"}, "rollout_layout"),
        ({"max_turns": 0}, "max_turns"),
        ({"env_ids": []}, "env_ids"),
    ],
)
def test_bad_settings_name_the_problem(tmp_path, overrides: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_config(tmp_path, "x/Y-v0", **overrides)


@pytest.fixture(scope="module")
def tiny_moe_dir(tiny_model_dir, tmp_path_factory) -> Path:
    """The tiny model's tokenizer over a 2-layer mixture-of-experts model (router aux loss on)."""
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

    directory = tmp_path_factory.mktemp("tiny-moe")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.save_pretrained(directory)
    torch.manual_seed(0)
    config = Qwen2MoeConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=32,
        moe_intermediate_size=16,
        shared_expert_intermediate_size=16,
        num_experts=4,
        num_experts_per_tok=2,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        # Off for generation (transformers' cached decoding fails with it); TRL turns it on in
        # its training forward, as it does for any model whose config has the attribute.
        output_router_logits=False,
        router_aux_loss_coef=0.5,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    Qwen2MoeForCausalLM(config).save_pretrained(directory)
    return directory


@pytest.mark.parametrize(
    ("term", "overrides"),
    [
        ("policy loss", {}),
        (
            "sequence-mean policy loss",
            {"loss_type": "grpo", "importance_sampling_level": "sequence"},
        ),
        ("KL term of a sequence-mean loss", {"loss_type": "grpo", "beta": 0.1}),
        ("entropy bonus", {"entropy_coef": 0.5}),
        ("high-entropy token mask", {"top_entropy_quantile": 0.2}),
        ("MoE auxiliary loss", {}),
    ],
)
def test_chunked_backward_gives_the_gradient_of_one_forward(
    tiny_model_dir, tiny_moe_dir, tmp_path, doors_env_id, term: str, overrides: dict
) -> None:
    """``loss_token_budget`` splits the training forward where that leaves the loss as it is;
    with each per-micro-batch term TRL adds, the gradient is still that of one forward."""
    config = make_config(tmp_path, doors_env_id, rollout_layout="step", max_turns=3, **overrides)
    model_dir = tiny_moe_dir if term == "MoE auxiliary loss" else tiny_model_dir
    trainer = make_trainer(model_dir, config)
    assert term != "MoE auxiliary loss" or trainer.aux_loss_enabled
    out, _ = batch_out(trainer)
    # In float64 the two are equal to rounding; float32 differs by ~1e-3 from summation order.
    # (The MoE experts' grouped matmul has no float64: a float32 run must match exactly.)
    if term != "MoE auxiliary loss":
        trainer.model.double()
        out = {
            k: v.double() if torch.is_tensor(v) and v.is_floating_point() else v
            for k, v in out.items()
        }
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop
    trainer._prepare_inputs = lambda _: dict(out)  # the same prepared batch for both budgets
    grads = {}
    for budget in (10**9, 64):
        trainer.args.loss_token_budget = budget
        trainer.model.zero_grad(set_to_none=True)
        calls: list = []
        forward = trainer.model.forward

        def counting(*args, _forward=forward, calls=calls, **kwargs):
            calls.append(kwargs.get("input_ids", args[0] if args else None).shape)
            return _forward(*args, **kwargs)

        trainer.model.forward = counting
        try:
            loss = trainer.training_step(trainer.model, [], out["num_items_in_batch"])
        finally:
            trainer.model.forward = forward
        grads[budget] = (loss.item(), [p.grad.clone() for p in trainer.model.parameters()], calls)
    (whole_loss, whole, whole_calls), (chunk_loss, chunked, chunk_calls) = grads.values()
    assert len(whole_calls) == 1
    if term.endswith("policy loss"):  # the cases chunks are exact: they are chunked
        assert len(chunk_calls) > 1
        assert max(r * t for r, t in chunk_calls) < whole_calls[0][0] * whole_calls[0][1]
    assert chunk_loss == pytest.approx(whole_loss, rel=1e-9, abs=1e-12)
    a, b = torch.cat([g.flatten() for g in whole]), torch.cat([g.flatten() for g in chunked])
    assert (a - b).norm() <= 1e-6 * a.norm()
