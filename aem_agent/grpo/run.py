"""The pieces of a training run, as a library: settings → ``AEMConfig`` → trainer → outputs.

The ``aem train`` driver that strings them together (settings from YAML and flags, output
folder checks, callbacks, the final model and plot) is :mod:`aem_cli.train`, the way TRL keeps
``trl/scripts/grpo.py`` over ``trl/trainer/``; ``aem sft`` and the learning experiments
(``benchmarks/learning``) build their runs from the same pieces. What a run logs while it runs
is :mod:`aem_agent.grpo.metrics`.

What a run leaves in ``output_dir``: TRL checkpoints (``checkpoint-<step>/``, resumable), the
final model in ``final/`` (a plain Hugging Face checkpoint — with LoRA the adapter merged in,
the adapter alone in ``final/adapter/`` — and ``aem-prompt.json``, the prompt settings it was
trained with, which ``aem bench --policy hf:final`` applies),
``metrics.csv`` (one row per logged step, rewritten atomically so a killed run
never leaves half a file), TensorBoard events under ``tensorboard/``, the resolved settings
(``aem-train.json``) and ``training.png`` (success rate, reward and entropy per step).

Settings come from a YAML file (every ``AEMConfig`` field, plus the driver keys in
:data:`DRIVER_KEYS`) and are overridden by command-line values. Under ``accelerate launch``
each process runs the same driver; TRL and accelerate split the batch, the trainer gathers
whole groups before computing advantages, and only the main process writes metrics and plots.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aem_envs.core.errors import AEMError, DataError

if TYPE_CHECKING:  # torch and TRL load only when a run starts
    from peft import PeftModel
    from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback

    from aem_agent.grpo.config import AEMConfig
    from aem_agent.grpo.trainer import AEMGRPOTrainer

#: Keys of a training YAML that are not ``AEMConfig`` fields.
DRIVER_KEYS: dict[str, str] = {
    "model": "'smollm2' (the bundled SmolLM2-135M-Instruct) or a local checkpoint directory",
    "algo": "'aem' or 'grpo' (GRPO = AEM off)",
    "torch_threads": "CPU threads for torch (1 is fastest on 2 shared cores); unset = default",
    "overwrite": "replace an earlier run's outputs in output_dir instead of refusing to start",
}
ALGOS = ("aem", "grpo")
METRICS_FILE = "metrics.csv"
PLOT_FILE = "training.png"
SETTINGS_FILE = "aem-train.json"
FINAL_DIR = "final"
ADAPTER_DIR = "adapter"
TENSORBOARD_DIR = "tensorboard"
#: What a run writes into ``output_dir``; ``overwrite`` removes exactly these (and checkpoints).
OUTPUTS = (METRICS_FILE, PLOT_FILE, SETTINGS_FILE, FINAL_DIR, TENSORBOARD_DIR)


def load_settings(path: str | os.PathLike[str] | None) -> dict[str, Any]:
    """Read a training YAML into a flat dict (empty when ``path`` is None)."""
    if path is None:
        return {}
    import yaml

    file = Path(path)
    if not file.is_file():
        bundled = Path(__file__).parents[1].joinpath("configs") / Path(path).name
        if bundled.is_file():
            file = bundled
        else:
            raise DataError(
                f"training config {path} does not exist; bundled configs: "
                + ", ".join(p.name for p in sorted(bundled.parent.glob("*.yaml")))
            )
    try:
        data = yaml.safe_load(file.read_text()) or {}
    except yaml.YAMLError as exc:
        raise DataError(f"training config {file} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise DataError(f"training config {file} must be a mapping of settings")
    return data


def build_config(settings: Mapping[str, Any]) -> tuple[AEMConfig, dict[str, Any]]:
    """Split ``settings`` into an ``AEMConfig`` and the driver keys; check both."""
    import torch

    from aem_agent.grpo.config import AEMConfig, ConfigError

    known = {f.name for f in fields(AEMConfig) if f.init}
    unknown = sorted(set(settings) - known - set(DRIVER_KEYS))
    if unknown:
        raise ConfigError(
            f"unknown training setting(s) {unknown}; use AEMConfig / GRPOConfig field names "
            f"or one of {sorted(DRIVER_KEYS)}"
        )
    driver = {k: settings[k] for k in DRIVER_KEYS if k in settings}
    values = {k: v for k, v in settings.items() if k in known}
    algo = driver.setdefault("algo", "aem")
    if algo not in ALGOS:
        raise ConfigError(f"algo={algo!r}; choose one of {list(ALGOS)}")
    if algo == "grpo":
        values["aem_enabled"] = False
    if "output_dir" not in values:
        raise ConfigError("no output_dir: pass --output-dir or set output_dir in the config")
    if not torch.cuda.is_available():
        values.setdefault("use_cpu", True)
        # float32: bf16 autocast is twice as fast on CPUs with native bf16
        # (models.cpu_bf16_supported), but its rounding of the log-probs in GRPO's ratio stopped
        # the tiny model of tests/benchmarks/test_learning.py from learning; opt in with bf16.
        values.setdefault("bf16", False)
        # CPU defaults: LoRA (a fraction of the optimizer state and gradient work) and no
        # gradient checkpointing (it recomputes every forward; memory is not the limit here).
        values.setdefault("use_peft", True)
        if "gradient_checkpointing" not in values:  # the deprecated name, if the user gave it
            values.setdefault("activation_checkpointing", False)
        # Activations dominate a CPU step's memory and grow with the tokens of a loss chunk:
        # 256 tokens (one compact ALFWorld turn row) bounds them at no cost in speed on one
        # thread (the measurement: docs/training.md, "What a step costs on CPU").
        values.setdefault("loss_token_budget", 256)
    values.setdefault("logging_steps", 1)
    report_to = values.get("report_to", ["tensorboard"])
    report_to = [report_to] if isinstance(report_to, str) else list(report_to)
    # TensorBoard is wired by the driver so its events land in <output_dir>/tensorboard.
    driver["tensorboard"] = "tensorboard" in report_to or "all" in report_to
    values["report_to"] = [r for r in report_to if r not in ("tensorboard", "none")] or "none"
    try:
        config = AEMConfig(**values)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid training settings: {exc}") from exc
    return config, driver


def resolve_model(spec: str) -> Path:
    """A bundled model's name (``smollm2``, ``aem-ref``) → its checkpoint, built on first use;
    anything else must be a local checkpoint directory."""
    from aem_agent.models.bundled import BUNDLED_MODELS

    if spec in BUNDLED_MODELS:
        return BUNDLED_MODELS[spec]()
    path = Path(spec).expanduser()
    if not (path / "config.json").is_file():
        raise DataError(
            f"model {spec!r} is not a checkpoint directory (no config.json there); give "
            f"{' or '.join(map(repr, BUNDLED_MODELS))} or the path of a local Hugging Face "
            "checkpoint"
        )
    return path


def last_checkpoint(output_dir: Path) -> Path | None:
    """The newest ``checkpoint-<step>`` directory of a run, if any."""
    steps = [
        (int(p.name.split("-")[1]), p)
        for p in output_dir.glob("checkpoint-*")
        if p.is_dir() and p.name.split("-")[1].isdigit()
    ]
    return max(steps)[1] if steps else None


def check_output_dir(
    output_dir: Path, *, overwrite: bool, outputs: Sequence[str] = OUTPUTS
) -> None:
    """Refuse to start a fresh run over an earlier one, or (``overwrite``) remove its outputs.

    Why: a second run into the same folder used to overwrite ``metrics.csv`` and mix its
    TensorBoard events with the first run's. Files that are not a run's outputs are kept.
    """
    if output_dir.exists() and not output_dir.is_dir():
        raise AEMError(f"output dir {output_dir} is a file; give a directory")
    earlier = [
        p for p in output_dir.glob("*") if p.name in outputs or p.name.startswith("checkpoint-")
    ]
    if not earlier:
        return
    if not overwrite:
        names = ", ".join(sorted(p.name for p in earlier))
        raise AEMError(
            f"output dir {output_dir} holds an earlier run ({names}); "
            "pass --resume to continue it, --overwrite to replace it, or another --output-dir"
        )
    for path in earlier:
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def prompt_layout(config: AEMConfig) -> dict[str, Any]:
    """The prompt settings a trained model must be played with (``aem-prompt.json``)."""
    return {
        "history_window": config.history_window,
        "prompt_style": config.prompt_style,
        "reply_prefix": config.reply_prefix or "",
        "max_turn_tokens": config.max_turn_tokens,
        "layout": config.rollout_layout,
    }


def save_policy(
    model: PreTrainedModel | PeftModel, tokenizer: PreTrainedTokenizerBase, out: Path
) -> Path | None:
    """Save ``model`` as a plain checkpoint in ``out``; a PEFT model also as its adapter alone.

    Why both: every loader (``aem train --model``, ``hf:DIR``, vLLM) reads a plain
    checkpoint, while the adapter (a few MB) is what is small enough to ship. Returns the
    adapter directory, or None for a full model.
    """
    from peft import PeftModel

    adapter_dir = None
    if isinstance(model, PeftModel):
        adapter_dir = out / ADAPTER_DIR
        model.save_pretrained(str(adapter_dir))
        model = model.merge_and_unload()  # the trainer is done with it
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return adapter_dir


def build_trainer(
    config: AEMConfig, model_dir: Path, *, callbacks: Sequence[TrainerCallback] = ()
) -> AEMGRPOTrainer:
    """The ``AEMGRPOTrainer`` of ``config`` on ``model_dir``: it builds its own rollout, tasks,
    reward and (``use_peft``) LoRA adapter. The caller closes ``trainer.rollout_func``."""
    from aem_agent.grpo.trainer import AEMGRPOTrainer

    return AEMGRPOTrainer(model=str(model_dir), args=config, callbacks=list(callbacks))
