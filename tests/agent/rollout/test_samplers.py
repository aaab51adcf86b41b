"""Samplers: a LoRA adapter merged for generation samples what the adapter samples, and the
base weights come back."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from aem_agent.rollout.samplers import Generated, merged_adapter, model_generator

CONTEXTS = [[5, 6, 7, 8, 9], [10, 11, 12]]


@pytest.fixture
def lora_model(tiny_model_dir: Path):
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    # init_lora_weights=False: B is random too, so the adapter changes what is sampled.
    config = LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False)
    return get_peft_model(base, config)


def sample(model, tiny_model_dir: Path) -> list[Generated]:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    greedy = GenerationConfig(do_sample=False, pad_token_id=tokenizer.pad_token_id)
    return model_generator(model, tokenizer, greedy, max_new_tokens=6)(CONTEXTS)


def base_weights(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" not in n}


def merged_flags(model) -> set[bool]:
    return {m.merged for m in model.modules() if hasattr(m, "merged")}


def test_merged_sampling_equals_the_adapter_and_restores_the_base(
    lora_model, tiny_model_dir: Path
) -> None:
    before = base_weights(lora_model)
    plain = sample(lora_model, tiny_model_dir)
    with merged_adapter(lora_model):
        assert merged_flags(lora_model) == {True}
        merged = sample(lora_model, tiny_model_dir)
    with lora_model.disable_adapter():  # proof that the adapter matters here
        without = sample(lora_model, tiny_model_dir)
    assert merged_flags(lora_model) == {False}
    assert [g.ids for g in merged] == [g.ids for g in plain]
    for ours, theirs in zip(merged, plain, strict=True):
        torch.testing.assert_close(torch.tensor(ours.logprobs), torch.tensor(theirs.logprobs))
    assert [g.ids for g in without] != [g.ids for g in plain]
    for name, weight in base_weights(lora_model).items():
        torch.testing.assert_close(weight, before[name], rtol=0, atol=1e-6)


def test_off_or_already_merged_leaves_the_model_as_it_is(lora_model) -> None:
    with merged_adapter(lora_model, enabled=False):
        assert merged_flags(lora_model) == {False}
    lora_model.merge_adapter()
    with merged_adapter(lora_model):
        pass
    assert merged_flags(lora_model) == {True}  # not taken out by a context that did not merge
    plain = torch.nn.Linear(2, 2)
    with merged_adapter(plain):  # no adapter: nothing to do
        pass
