"""The bundled reference agent (``aem-ref``): SmolLM2 with the shipped LoRA adapter merged in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aem_agent.models import bundled
from aem_agent.models.bundled import MARKER, REFERENCE_DIR, SMOLLM2_DIRNAME, reference_checkpoint

pytestmark = pytest.mark.slow


def test_the_shipped_adapter_is_small_and_carries_its_card_and_prompt_layout() -> None:
    weights = REFERENCE_DIR / "adapter_model.safetensors"
    assert weights.stat().st_size < 12e6, "the reference adapter should stay a few MB"
    config = json.loads((REFERENCE_DIR / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA"
    layout = json.loads((REFERENCE_DIR / "aem-prompt.json").read_text())
    assert layout["prompt_style"] == "compact" and layout["reply_prefix"] == "<action>"
    card = (REFERENCE_DIR / "README.md").read_text()
    for fact in ("valid_unseen", "aem sft", "aem bench --suite benchmarks/suites/aem-ref.yaml"):
        assert fact in card


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache root whose SmolLM2 is the already converted one (no second conversion)."""
    base = bundled.smollm2_checkpoint()
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / SMOLLM2_DIRNAME).symlink_to(base)
    monkeypatch.setenv("AEM_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_reference_checkpoint_is_smollm2_plus_the_adapter_and_is_built_once(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from aem_agent.policies import HFPolicy, PolicyInput, load_policy

    path = reference_checkpoint()
    assert path.parent == cache / "models" and path.name.startswith("aem-ref-")
    assert (path / MARKER).is_file()
    assert json.loads((path / "aem-prompt.json").read_text())["prompt_style"] == "compact"

    # One merged weight equals the base weight plus the adapter's scaled B·A.
    adapter = load_file(REFERENCE_DIR / "adapter_model.safetensors")
    config = json.loads((REFERENCE_DIR / "adapter_config.json").read_text())
    scale = config["lora_alpha"] / config["r"]
    prefix = "base_model.model.model.layers.0.self_attn.q_proj"
    delta = adapter[f"{prefix}.lora_B.weight"].float() @ adapter[f"{prefix}.lora_A.weight"].float()
    base = AutoModelForCausalLM.from_pretrained(bundled.smollm2_checkpoint())
    merged = AutoModelForCausalLM.from_pretrained(path)
    name = "model.layers.0.self_attn.q_proj.weight"
    got = merged.get_parameter(name) - base.get_parameter(name)
    assert delta.abs().max() > 0
    torch.testing.assert_close(got, scale * delta, atol=1e-4, rtol=1e-3)

    # Built once: a second call reuses it; the policy plays with the trained prompt layout.
    monkeypatch.setattr(bundled, "_merge_adapter", pytest.fail)
    assert reference_checkpoint() == path
    policy = load_policy("aem-ref", temperature=0.0)
    assert isinstance(policy, HFPolicy) and policy.source == str(path)
    assert policy.prompt_style == "compact" and policy.reply_prefix == "<action>"
    inp = PolicyInput(
        "aem/ALFWorld-v0",
        "put a mug in shelf",
        "You are in the middle of a room. Looking quickly around you, you see a cabinet 1, "
        "and a shelf 1.",
        admissible_actions=["go to cabinet 1", "go to shelf 1"],
    )
    (out,) = policy.act([inp])
    assert out.reply.startswith("<action>go to ")
