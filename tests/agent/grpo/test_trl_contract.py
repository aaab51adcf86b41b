"""What ``AEMGRPOTrainer`` relies on inside TRL, one test per private method or key it uses.

TRL's private API can change in any release; these tests make an upgrade fail here, with the
name of what changed, instead of silently inside a training run. Everything they guard is used
in one module, ``aem_agent/grpo/trl_private.py`` (``tests/agent/grpo/test_trl_private.py`` keeps it
so).
"""

from __future__ import annotations

import inspect

import pytest
import torch
from trl import GRPOTrainer
from trl.trainer.utils import shuffle_sequence_dict, split_tensor_dict

from aem_agent.grpo import turn_rows
from aem_agent.grpo.trainer import AEMGRPOTrainer
from aem_agent.grpo.trl_private import ADVANTAGE_HOOK, GRPOInternals, advantage_path, rows_first


def parameters(method) -> list[str]:
    return list(inspect.signature(method).parameters)


def test_generate_and_score_completions_takes_the_batch_of_inputs() -> None:
    assert parameters(GRPOTrainer._generate_and_score_completions) == ["self", "inputs"]


def test_per_token_logps_and_entropies_keeps_its_arguments() -> None:
    names = parameters(GRPOTrainer._get_per_token_logps_and_entropies)
    assert names[:5] == ["self", "model", "input_ids", "attention_mask", "logits_to_keep"]
    assert {"batch_size", "compute_entropy"} <= set(names)


def test_resume_reports_missing_keys_through_one_method() -> None:
    """``TiedHeadResume`` overrides the Trainer's report of a resumed checkpoint's keys."""
    from transformers import Trainer

    assert parameters(Trainer._issue_warnings_after_load) == ["self", "load_result"]
    assert "self._issue_warnings_after_load(load_result)" in inspect.getsource(
        Trainer._load_from_checkpoint
    )


def test_compute_loss_reads_per_token_advantages() -> None:
    """Trajectory rows at ``aem_unit="turn"`` hand TRL (B, T) advantages."""
    source = inspect.getsource(GRPOTrainer._compute_loss)
    assert 'advantages = inputs["advantages"]' in source
    assert "advantages.dim() == 1" in source  # (B,) is unsqueezed, (B, T) is used as is


def test_reference_and_importance_sampling_attributes_exist() -> None:
    source = inspect.getsource(GRPOTrainer.__init__)
    for name in (
        "self.vllm_importance_sampling_correction",
        "self.vllm_importance_sampling_mode",
        "self.vllm_importance_sampling_clip_min",
        "self.vllm_importance_sampling_clip_max",
        "self.num_generations_eval",
        "self.ref_model",
    ):
        assert name in source, name


def test_every_batch_key_trl_emits_is_known_to_the_step_layout() -> None:
    source = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    emitted = set()
    for line in source.splitlines():
        line = line.strip()
        if line.startswith('output["') and "=" in line:
            emitted.add(line.split('"')[1])
    emitted |= {"prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages"}
    # Image inputs: the text environments never produce them (check_keys refuses them).
    multimodal = {k for k in emitted if "image" in k or "pixel" in k or k.endswith("type_ids")}
    multimodal |= {"spatial_shapes", "num_tiles"}
    unknown = (
        emitted - turn_rows.PER_TOKEN_KEYS - turn_rows.GLOBAL_KEYS - {"advantages"} - multimodal
    )
    assert not unknown, f"TRL emits batch keys the step layout does not carry: {unknown}"


@pytest.mark.parametrize(
    "name", ["_generate_and_score_completions", "_get_per_token_logps_and_entropies"]
)
def test_the_overrides_still_override_something(name: str) -> None:
    assert getattr(GRPOInternals, name) is not getattr(GRPOTrainer, name)
    assert getattr(AEMGRPOTrainer, name) is getattr(GRPOInternals, name)  # no other override
    assert hasattr(GRPOTrainer, name)


def test_step_counter_and_buffer_semantics() -> None:
    """The chunked training step rewinds ``_step``; generation happens when ``_step`` is a
    multiple of ``steps_per_generation * num_iterations``, else the buffered slice is used."""
    assert "self._step += 1" in inspect.getsource(GRPOTrainer.training_step)
    prepare = inspect.getsource(GRPOTrainer._prepare_inputs)
    assert "if self._step % generate_every == 0 or self._buffered_inputs is None:" in prepare
    assert "self._buffered_inputs[self._step % self.args.steps_per_generation]" in prepare


def test_the_step_timer_accumulates_until_the_optimizer_step() -> None:
    """The chunked step adds its batch's preparation (the rollout) to
    ``_current_train_step_time``, which TRL adds each call's time to and logs as
    ``step_time`` at an optimizer step."""
    source = inspect.getsource(GRPOTrainer.training_step)
    assert "self._current_train_step_time += time_after - time_before" in source
    assert 'self._metrics["train"]["step_time"].append(self._current_train_step_time)' in source


def test_metrics_are_lists_per_mode_and_name() -> None:
    source = inspect.getsource(GRPOTrainer.__init__)
    assert 'self._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}' in source


def test_batch_size_comes_from_the_first_value_of_a_batch() -> None:
    """``rows_first`` exists because TRL reads the batch size from the first value."""
    rows = {"completion_ids": torch.arange(4), "num_items_in_batch": torch.tensor(9)}
    with pytest.raises(TypeError):  # a 0-d tensor first: len() of it fails
        shuffle_sequence_dict({"num_items_in_batch": torch.tensor(9), **rows})
    reordered = rows_first({"num_items_in_batch": torch.tensor(9), **rows})
    assert next(iter(reordered)) == "completion_ids"
    assert len(shuffle_sequence_dict(reordered)["completion_ids"]) == 4
    assert [len(p["completion_ids"]) for p in split_tensor_dict(reordered, 2)] == [2, 2]


def test_groups_are_consecutive_gathered_rows() -> None:
    """``GRPOInternals.group_of``: rewards are gathered process after process and viewed as
    (-1, num_generations); each process then keeps its own contiguous slice."""
    source = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    assert "rewards.view(-1, num_generations)" in source
    assert "self.accelerator.process_index * len(prompts)," in source


def test_unscorable_rows_leave_the_baseline_with_advantage_zero() -> None:
    """Infrastructure-failed episodes get reward ``None``; TRL makes that NaN, leaves it out
    of the group mean and std (nan-aware) and zeroes its advantage."""
    source = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    assert "unscorable_mask = torch.isnan(rewards_per_func).all(dim=1)" in source
    assert "torch.nanmean(rewards.view(-1, num_generations), dim=1)" in source
    assert "advantages = torch.nan_to_num(advantages, nan=0.0)" in source


def test_the_tool_loops_environments_stay_on_the_trainer_in_input_order() -> None:
    """``GRPOInternals.tool_environments``: the batch's environment instances, one per input
    in order, stay in ``self.environments`` after scoring (the trainer reads their traces)."""
    source = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    assert "self.environments = []" in source
    assert "for name in self._batch_environments:" in source
    assert "self.environments.append(pool[index])" in source
    assert "zip(prompts, self.environments, inputs, strict=True)" in source


def test_old_policy_forward_condition() -> None:
    """``GRPOInternals.old_policy_forward_runs`` repeats this condition."""
    source = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    assert "if self.args.gradient_accumulation_steps % generate_every != 0 or (" in source
    assert "self.use_vllm and self.vllm_importance_sampling_correction" in source


def test_token_normalised_losses_divide_by_the_batch_token_count() -> None:
    """The chunked backward and the infra exclusion (which recounts ``num_items_in_batch``)
    rely on dapo/cispo/vespo dividing the masked loss sum by the gathered token count."""
    source = inspect.getsource(GRPOTrainer._compute_loss)
    assert 'elif self.loss_type in ["cispo", "dapo", "vespo"]:' in source
    assert 'inputs["num_items_in_batch"].clamp(min=1.0) / self.accelerator.num_processes' in source
    assert "loss = (per_token_loss * mask).sum() / normalizer" in source


def test_the_fused_head_reads_the_compact_predicate_by_module_name() -> None:
    """``aem_agent.grpo.lm_head`` swaps ``trl.trainer.utils._use_triton`` to score reply positions
    only."""
    from trl.trainer import utils as trl_utils

    assert callable(trl_utils._use_triton)
    assert "compact = _use_triton(hidden_states.device)" in inspect.getsource(
        trl_utils.add_fused_lm_head
    )


class FutureGRPOTrainer(GRPOTrainer):
    """A stand-in for a TRL release with the advantage hook of TRL PR #7298 (test-only; TRL
    1.16 has no such hook): TRL 1.16's scoring, then the hook called as the PR calls it — on
    every process, with the gathered per-completion advantages after the group normalisation
    — and each process keeping its slice of what it returns."""

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        n = len(out["advantages"])
        gathered = self._transform_advantages(self.accelerator.gather(out["advantages"]))
        start = self.accelerator.process_index * n
        return {**out, "advantages": gathered[start : start + n]}

    def _transform_advantages(self, advantages: torch.Tensor) -> torch.Tensor:
        return advantages


def test_the_advantage_path_is_the_one_trl_offers() -> None:
    """TRL 1.16 has no advantage hook: aem takes TRL's group advantage from the batch its
    override gets back. With a TRL that calls PR #7298's hook (the stand-in above) it takes
    it from the hook (``tests/agent/grpo/test_trl_private.py`` trains through both). When a TRL
    release adds the hook, the first line fails: check that TRL calls it as the stand-in
    does, then expect ``"hook"`` here."""
    assert advantage_path() == "override"
    assert advantage_path(FutureGRPOTrainer) == "hook"
    assert ADVANTAGE_HOOK in vars(GRPOInternals)  # aem's side of the hook
