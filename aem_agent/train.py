"""The training driver behind ``aem train``: settings → model → rollouts → trainer → outputs.

What a run leaves in ``output_dir``: TRL checkpoints (``checkpoint-<step>/``, resumable), the
final model in ``final/`` (a plain Hugging Face checkpoint — with LoRA the adapter merged in,
the adapter alone in ``final/adapter/`` — and ``aem-prompt.json``, the prompt settings it was
trained with, which ``aem bench --policy hf:final`` applies),
``metrics.csv`` (one row per logged step, rewritten atomically so a killed run
never leaves half a file), TensorBoard events under ``tensorboard/``, the resolved settings
(``aem-train.json``) and ``training.png`` (success rate, reward and entropy per step).

Settings come from a YAML file (every ``AEMConfig`` field, plus the driver keys in
:data:`DRIVER_KEYS`) and are overridden by command-line values. Under ``accelerate launch``
each process runs this same driver; TRL and accelerate split the batch, the trainer gathers
whole groups before computing advantages, and only the main process writes metrics and plots.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from aem_agent.prompts import write_prompt_layout
from aem_envs.core.errors import AEMError, DataError
from aem_envs.core.io import atomic_write_bytes, atomic_write_json, atomic_write_text

if TYPE_CHECKING:  # torch and TRL load only when a run starts
    from transformers import TrainerCallback

    from aem_agent.config import AEMConfig
    from aem_agent.rollout import MultiTurnRollout
    from aem_agent.trainer import AEMGRPOTrainer

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
#: Plotted panels: (title, metric keys tried in order).
PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("success rate", ("episode/success_rate",)),
    ("reward", ("reward",)),
    ("entropy", ("aem/entropy_mean", "entropy")),
)


@dataclass(frozen=True)
class TrainResult:
    """Where a finished run put its outputs, and the step it reached."""

    output_dir: Path
    metrics_csv: Path
    plot: Path
    global_step: int


def load_settings(path: str | os.PathLike[str] | None) -> dict[str, Any]:
    """Read a training YAML into a flat dict (empty when ``path`` is None)."""
    if path is None:
        return {}
    import yaml

    file = Path(path)
    if not file.is_file():
        bundled = Path(__file__).with_name("configs") / Path(path).name
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


def build_config(settings: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Split ``settings`` into an ``AEMConfig`` and the driver keys; check both."""
    import torch

    from aem_agent.config import AEMConfig, ConfigError

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
        values.setdefault("bf16", False)
        # CPU defaults: LoRA (a fraction of the optimizer state and gradient work) and no
        # gradient checkpointing (it recomputes every forward; memory is not the limit here).
        values.setdefault("use_peft", True)
        values.setdefault("gradient_checkpointing", False)
        # Activations of SmolLM2-135M cost about 1.7 MB per token in a training forward:
        # 1024 tokens a chunk keeps a step near 2 GB of memory.
        values.setdefault("loss_token_budget", 1024)
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
    """``smollm2`` → the converted bundled checkpoint; anything else must be a local directory."""
    if spec == "smollm2":
        from aem_agent.models import smollm2_checkpoint

        return smollm2_checkpoint()
    path = Path(spec).expanduser()
    if not (path / "config.json").is_file():
        raise DataError(
            f"model {spec!r} is not a checkpoint directory (no config.json there); give "
            "'smollm2' or the path of a local Hugging Face checkpoint"
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


def train(settings: Mapping[str, Any], *, resume: bool = False) -> TrainResult:
    """Run one training job described by ``settings`` (see the module docstring)."""
    config, driver = build_config(settings)
    if driver.get("torch_threads"):
        import torch

        torch.set_num_threads(int(driver["torch_threads"]))
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    output_dir = Path(config.output_dir)
    checkpoint = last_checkpoint(output_dir) if resume else None
    if resume and checkpoint is None:
        raise AEMError(f"--resume: no checkpoint-* directory in {output_dir}; start without it")
    if not resume:
        check_output_dir(output_dir, overwrite=bool(driver.get("overwrite")))

    from aem_envs.registration import resolve_env_id

    for env_id in config.env_ids:
        resolve_env_id(env_id)  # one clear line for an unknown id, before loading a model
    model_dir = resolve_model(str(driver.get("model", "smollm2")))
    metrics = MetricsWriter(output_dir / METRICS_FILE, resume_step=_step_of(checkpoint))
    trainer = build_trainer(
        config,
        model_dir,
        callbacks=[metrics.callback(), log_line_callback(), *_tensorboard(output_dir, driver)],
    )
    rollout = cast("MultiTurnRollout", trainer.rollout_func)  # the one the trainer built
    if trainer.is_world_process_zero():
        rollout.progress = print
        atomic_write_json(
            output_dir / SETTINGS_FILE,
            {"model": str(model_dir), **driver, **_jsonable(config.to_dict())},
        )
    try:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        if trainer.is_world_process_zero():
            save_policy(trainer.model, trainer.processing_class, output_dir / FINAL_DIR)
            write_prompt_layout(output_dir / FINAL_DIR, prompt_layout(config))
    finally:
        rollout.close()
    plot = output_dir / PLOT_FILE
    if trainer.is_world_process_zero():
        write_plot(metrics.rows, plot)
    return TrainResult(output_dir, metrics.path, plot, trainer.state.global_step)


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


def prompt_layout(config: Any) -> dict[str, Any]:
    """The prompt settings a trained model must be played with (``aem-prompt.json``)."""
    return {
        "history_window": config.history_window,
        "reply_prefix": config.reply_prefix or "",
        "max_turn_tokens": config.max_turn_tokens,
        "layout": config.rollout_layout,
    }


def save_policy(model: Any, tokenizer: Any, out: Path) -> Path | None:
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
    from aem_agent.trainer import AEMGRPOTrainer

    return AEMGRPOTrainer(model=str(model_dir), args=config, callbacks=list(callbacks))


def log_line_callback() -> Any:
    """A ``TrainerCallback`` printing one readable line per logged step (main process)."""
    from transformers import TrainerCallback

    shown = (
        ("reward", "reward"),
        ("episode/success_rate", "success"),
        ("episode/valid_rate", "valid"),
        ("aem/entropy_mean", "entropy"),
        ("aem/alpha_min", "alpha_min"),
        ("aem/alpha_max", "alpha_max"),
        ("aem/gated_share", "gated"),
        ("loss", "loss"),
    )

    class _LogLine(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs or "train_runtime" in logs:
                return
            parts = [
                f"{label} {logs[key]:.3g}"
                for key, label in shown
                if _number(logs.get(key)) is not None
            ]
            if parts:
                head = f"step {state.global_step}/{state.max_steps}: "
                print(head + ", ".join(parts), flush=True)

    return _LogLine()


class MetricsWriter:
    """Keeps every logged step and rewrites ``metrics.csv`` atomically after each log.

    On resume it keeps the rows of the earlier run up to the checkpoint's step, so the file
    reads as one run.
    """

    def __init__(self, path: Path, *, resume_step: int | None = None) -> None:
        self.path = path
        self.rows: list[dict[str, Any]] = []
        if resume_step is not None and path.is_file():
            with path.open(newline="") as handle:
                self.rows = [r for r in csv.DictReader(handle) if int(r["step"]) <= resume_step]

    def add(self, step: int, logs: Mapping[str, Any]) -> None:
        scalars = {k: v for k, v in logs.items() if isinstance(v, int | float)}
        if not scalars or "train_runtime" in scalars:  # the end-of-run summary is no step
            return
        self.rows.append({"step": step, **scalars})
        columns = list(dict.fromkeys(k for row in self.rows for k in row))
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns)
        writer.writeheader()
        writer.writerows(self.rows)
        atomic_write_text(self.path, buffer.getvalue())

    def callback(self) -> Any:
        from transformers import TrainerCallback

        writer = self

        class _Callback(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kwargs):
                if state.is_world_process_zero and logs:
                    writer.add(state.global_step, logs)

        return _Callback()


def write_plot(rows: list[dict[str, Any]], path: Path) -> Path:
    """Success rate, reward and entropy against step, one panel each, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(PANELS), figsize=(4 * len(PANELS), 3.2))
    for axis, (title, keys) in zip(axes, PANELS, strict=True):
        key = next((k for k in keys if any(_number(r.get(k)) is not None for r in rows)), None)
        points = [(int(r["step"]), _number(r.get(key))) for r in rows if key is not None]
        points = [(s, v) for s, v in points if v is not None]
        if points:
            axis.plot(*zip(*points, strict=True), marker="o", markersize=3)
        else:
            axis.text(0.5, 0.5, "not logged", ha="center", va="center", transform=axis.transAxes)
        if title == "success rate":
            axis.set_ylim(-0.02, 1.02)
        else:
            axis.ticklabel_format(axis="y", useOffset=False)
        axis.set_title(title)
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    return atomic_write_bytes(path, buffer.getvalue())


def _tensorboard(output_dir: Path, driver: Mapping[str, Any]) -> list[Any]:
    """A TensorBoard callback writing to ``<output_dir>/tensorboard`` when it is wanted."""
    if not driver.get("tensorboard"):
        return []
    from torch.utils.tensorboard import SummaryWriter
    from transformers.integrations import TensorBoardCallback

    writer = SummaryWriter(log_dir=str(output_dir / TENSORBOARD_DIR))
    return [TensorBoardCallback(tb_writer=writer)]


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _step_of(checkpoint: Path | None) -> int | None:
    return int(checkpoint.name.split("-")[1]) if checkpoint is not None else None


def _jsonable(data: dict[str, Any]) -> dict[str, Any]:
    """Settings as JSON values (enums and other objects as their string)."""
    return json.loads(json.dumps(data, default=str))
