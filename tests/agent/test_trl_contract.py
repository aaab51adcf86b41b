"""What ``AEMGRPOTrainer`` relies on inside TRL, one test per private method or key it uses.

TRL's private API can change in any release; these tests make an upgrade fail here, with the
name of what changed, instead of silently inside a training run.
"""

from __future__ import annotations

import inspect

import pytest
from trl import GRPOTrainer

from aem_agent import steps
from aem_agent.trainer import AEMGRPOTrainer


def parameters(method) -> list[str]:
    return list(inspect.signature(method).parameters)


def test_generate_and_score_completions_takes_the_batch_of_inputs() -> None:
    assert parameters(GRPOTrainer._generate_and_score_completions) == ["self", "inputs"]


def test_per_token_logps_and_entropies_keeps_its_arguments() -> None:
    names = parameters(GRPOTrainer._get_per_token_logps_and_entropies)
    assert names[:5] == ["self", "model", "input_ids", "attention_mask", "logits_to_keep"]
    assert {"batch_size", "compute_entropy"} <= set(names)


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
    unknown = emitted - steps.PER_TOKEN_KEYS - steps.GLOBAL_KEYS - {"advantages"} - multimodal
    assert not unknown, f"TRL emits batch keys the step layout does not carry: {unknown}"


@pytest.mark.parametrize(
    "name", ["_generate_and_score_completions", "_get_per_token_logps_and_entropies"]
)
def test_the_overrides_still_override_something(name: str) -> None:
    assert getattr(AEMGRPOTrainer, name) is not getattr(GRPOTrainer, name)
    assert hasattr(GRPOTrainer, name)


def test_the_fused_head_reads_the_compact_predicate_by_module_name() -> None:
    """``aem_agent.head`` swaps ``trl.trainer.utils._use_triton`` to score reply positions only."""
    from trl.trainer import utils as trl_utils

    assert callable(trl_utils._use_triton)
    assert "compact = _use_triton(hidden_states.device)" in inspect.getsource(
        trl_utils.add_fused_lm_head
    )
