"""Samplers for the rollout: one reply per context, as token ids with log-probs and entropies.

Why a module of their own: :class:`aem_agent.rollout.groups.MultiTurnRollout` only needs *a*
:data:`Generate`; which model answers (``model.generate`` on a checkpoint, the trainer's
current weights, TRL's vLLM backend) is chosen by the caller, and tests pass a script instead.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import torch

if TYPE_CHECKING:  # transformers and TRL load when a model does
    from transformers import (
        GenerationConfig,
        GenerationMixin,
        PreTrainedModel,
        PreTrainedTokenizerBase,
    )
    from trl import GRPOConfig, GRPOTrainer


@dataclass
class Generated:
    """One sampled reply: its token ids and, per token, log-probability and entropy.

    ``entropies`` is None when the sampler does not report them (vLLM); the trainer then
    takes them from a forward pass.
    """

    ids: list[int]
    logprobs: list[float]
    entropies: list[float] | None


#: Generates one reply per context (a list of token ids); contexts are whole sequences so far.
Generate = Callable[[list[list[int]]], list[Generated]]


def model_generator(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    generation_config: GenerationConfig,
    *,
    max_new_tokens: int,
) -> Generate:
    """A :data:`Generate` that samples with ``model.generate`` on left-padded contexts.

    Per-token log-probabilities and entropies come from the raw logits divided by the
    temperature, the same quantity TRL's training forward computes, so AEM can use them
    without another forward pass.
    """
    config = copy.deepcopy(generation_config)
    config.max_new_tokens = max_new_tokens
    config.output_logits = True
    config.return_dict_in_generate = True
    temperature = float(getattr(config, "temperature", None) or 1.0)
    eos = config.eos_token_id if config.eos_token_id is not None else tokenizer.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos])
    pad_id = (
        tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    )

    def generate(contexts: list[list[int]]) -> list[Generated]:
        if not contexts:  # a process with no active episode, kept in lockstep with the others
            return []
        device = next(model.parameters()).device
        width = max(len(c) for c in contexts)
        input_ids = torch.tensor([[pad_id] * (width - len(c)) + c for c in contexts], device=device)
        attention = torch.tensor(
            [[0] * (width - len(c)) + [1] * len(c) for c in contexts], device=device
        )
        with torch.no_grad():
            # a causal LM is a PreTrainedModel that is also a GenerationMixin
            out = cast("GenerationMixin", model).generate(
                input_ids=input_ids, attention_mask=attention, generation_config=config
            )
        sampled = out.sequences[:, width:]
        chosen_steps, entropy_steps = [], []
        for step, logits in enumerate(out.logits):  # one (B, V) slice at a time: bounded memory
            logp = torch.log_softmax(logits.float() / temperature, dim=-1)
            chosen_steps.append(logp.gather(-1, sampled[:, step : step + 1]).squeeze(-1))
            entropy_steps.append(-(logp.exp() * logp).sum(-1))
        chosen = torch.stack(chosen_steps, dim=1).tolist()
        entropy = torch.stack(entropy_steps, dim=1).tolist()
        new = sampled.tolist()
        results = []
        for row, ids in enumerate(new):
            end = next((k + 1 for k, t in enumerate(ids) if t in eos_ids), len(ids))
            results.append(Generated(ids[:end], chosen[row][:end], entropy[row][:end]))
        return results

    return generate


def trainer_generator(
    trainer: GRPOTrainer, tokenizer: PreTrainedTokenizerBase, max_new_tokens: int
) -> Generate:
    """:func:`model_generator` on the trainer's current weights, unwrapped for generation,
    under the trainer's mixed precision (so a bf16 run samples as fast as it trains), with a
    LoRA adapter merged into its base for the call (:func:`merged_adapter`)."""
    from trl.models import unwrap_model_for_generation

    sharded = bool(getattr(trainer, "is_deepspeed_enabled", False)) or bool(
        getattr(trainer, "is_fsdp_enabled", False)
    )

    def generate(contexts: list[list[int]]) -> list[Generated]:
        with (
            unwrap_model_for_generation(
                trainer.model_wrapped,
                trainer.accelerator,
                gather_deepspeed3_params=cast("GRPOConfig", trainer.args).ds3_gather_for_generation,
            ) as model,
            trainer.accelerator.autocast(),
            merged_adapter(model, enabled=not sharded),
        ):
            sample = model_generator(
                model, tokenizer, trainer.generation_config, max_new_tokens=max_new_tokens
            )
            return sample(contexts)

    return generate


@contextmanager
def merged_adapter(model: object, *, enabled: bool = True) -> Iterator[None]:
    """Within: a PEFT model's LoRA weights added into its base weights, taken out after.

    Why: sampling is one token at a time, where the adapter's two extra small matrix products
    per layer cost about a fifth of each decoding step on CPU; merged, each layer is one
    product. TRL does the same merge and unmerge around every weight sync to vLLM. Taking the
    adapter out again restores the base weights up to float rounding (about one unit in the
    last place per merge). Off for sharded models (DeepSpeed, FSDP), whose weights a merge
    would have to gather first, and for models without an adapter or already merged.
    """
    merge = getattr(model, "merge_adapter", None)
    if not enabled or merge is None or _is_merged(model):
        yield
        return
    merge()
    try:
        yield
    finally:
        model.unmerge_adapter()  # type: ignore[attr-defined]  # a PeftModel: it has merge_adapter


def _is_merged(model: object) -> bool:
    from peft.tuners.tuners_utils import BaseTunerLayer

    modules = cast("torch.nn.Module", model).modules()
    return any(isinstance(m, BaseTunerLayer) and m.merged for m in modules)


def vllm_generator(trainer: GRPOTrainer, max_new_tokens: int) -> Generate:
    """A :data:`Generate` on TRL's vLLM backend (server or colocate), one reply per context.

    vLLM returns the sampled tokens' log-probabilities but no entropies; TRL already syncs
    the trainer's weights to vLLM before calling the rollout.
    """
    backend = trainer.vllm_generation

    def generate(contexts: list[list[int]]) -> list[Generated]:
        limit, backend.max_completion_length = backend.max_completion_length, max_new_tokens
        try:
            _, completion_ids, logprobs, _ = backend.generate(contexts, None, 1)
        finally:
            backend.max_completion_length = limit
        return [
            Generated(
                list(ids),
                [float("nan") if p[0] is None else float(p[0]) for p in lps]
                if lps is not None
                else [0.0] * len(ids),
                None,
            )
            for ids, lps in zip(
                completion_ids, logprobs or [None] * len(completion_ids), strict=True
            )
        ]

    return generate
