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

Settings are TRL's way: dataclasses (``AEMConfig``, TRL's ``ModelConfig`` as
``AgentModelConfig``, :class:`RunArgs`) parsed by TRL's ``TrlParser``, a YAML file's keys laid
over :func:`train_defaults` and the command line laid over the file. Under ``accelerate launch``
each process runs the same driver; TRL and accelerate split the batch, the trainer gathers
whole groups before computing advantages, and only the main process writes metrics and plots.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from aem_envs.core.errors import AEMError, DataError

if TYPE_CHECKING:  # torch and TRL load only when a run starts
    from peft import PeftModel
    from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback
    from trl import TrlParser

    from aem_agent.grpo.config import AEMConfig, AgentModelConfig
    from aem_agent.grpo.trainer import AEMGRPOTrainer

T = TypeVar("T")

METRICS_FILE = "metrics.csv"
PLOT_FILE = "training.png"
SETTINGS_FILE = "aem-train.json"
FINAL_DIR = "final"
ADAPTER_DIR = "adapter"
TENSORBOARD_DIR = "tensorboard"
#: What the trainer writes last into a checkpoint (transformers' ``TRAINER_STATE_NAME``).
TRAINER_STATE = "trainer_state.json"
#: What a run writes into ``output_dir``; ``overwrite`` removes exactly these (and checkpoints).
OUTPUTS = (METRICS_FILE, PLOT_FILE, SETTINGS_FILE, FINAL_DIR, TENSORBOARD_DIR)


#: Where ``--config NAME`` finds a training YAML that is not a path.
CONFIGS_DIR = Path(__file__).parents[1].joinpath("configs")
#: Keys of earlier training YAMLs that now have TRL's name (the old one still loads).
RENAMED_KEYS = {"model": "model_name_or_path"}


@dataclass
class RunArgs:
    """What one ``aem train`` run needs besides its TRL settings (``AEMConfig``) and its
    model (``AgentModelConfig``)."""

    torch_threads: int | None = field(
        default=None,
        metadata={"help": "CPU threads for torch (1 is fastest on shared cores); unset: all."},
    )
    overwrite: bool = field(
        default=False,
        metadata={"help": "Replace an earlier run's outputs in output_dir instead of refusing."},
    )
    resume: bool = field(
        default=False,
        metadata={"help": "Continue from the newest checkpoint-* in output_dir."},
    )


class TrainRun(NamedTuple):
    """One run's settings, parsed and checked."""

    config: AEMConfig
    model: AgentModelConfig
    run: RunArgs
    #: TensorBoard events go to ``<output_dir>/tensorboard`` (``report_to`` named it).
    tensorboard: bool


def train_dataclasses() -> tuple[Any, ...]:
    """The dataclasses ``aem train`` is parsed into by TRL's ``TrlParser``."""
    from aem_agent.grpo.config import AEMConfig, AgentModelConfig

    return (AEMConfig, AgentModelConfig, RunArgs)


def train_defaults() -> dict[str, Any]:
    """``aem train``'s defaults where they differ from TRL's, and why (the YAML and the flags
    are laid over them)."""
    import torch

    defaults: dict[str, Any] = {
        # a step is seconds to minutes here, not TRL's milliseconds: log every one
        "logging_steps": 1,
        # wired by the driver, so the events land in <output_dir>/tensorboard
        "report_to": ["tensorboard"],
    }
    if not torch.cuda.is_available():
        defaults.update(
            use_cpu=True,
            # float32: bf16 autocast is twice as fast on CPUs with native bf16
            # (models.cpu_bf16_supported), but its rounding of the log-probs in GRPO's ratio
            # stopped the tiny model of tests/benchmarks/test_learning.py from learning.
            bf16=False,
            # LoRA: a fraction of the optimizer state and gradient work
            use_peft=True,
            # recomputing every forward costs time; memory is not the limit on CPU
            activation_checkpointing=False,
            # activations dominate a CPU step's memory and grow with a loss chunk's tokens:
            # 256 (one compact ALFWorld turn row) bound them at no cost in speed on one thread
            # (the measurement: docs/training.md, "What a step costs on CPU")
            loss_token_budget=256,
        )
    return defaults


def renamed(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with earlier key names (:data:`RENAMED_KEYS`) given their TRL name."""
    from aem_agent.grpo.config import ConfigError

    out = dict(settings)
    for old, new in RENAMED_KEYS.items():
        if old in out:
            if new in out:
                raise ConfigError(f"{old!r} and {new!r} name the same setting; keep {new!r}")
            out[new] = out.pop(old)
    return out


def train_parser() -> TrlParser:
    """TRL's parser over :func:`train_dataclasses`, with :func:`train_defaults` applied."""
    from trl import TrlParser

    parser = TrlParser(list(train_dataclasses()))
    parser.set_defaults_with_config(**train_defaults())
    return parser


def build_config(settings: Mapping[str, Any]) -> TrainRun:
    """The run of ``settings`` (YAML keys: fields of ``AEMConfig``, ``AgentModelConfig`` and
    :class:`RunArgs`), parsed as ``aem train --config`` parses its file; checked."""
    from aem_agent.grpo.config import ConfigError

    parser = train_parser()
    settings = renamed(settings)
    known = {action.dest for action in parser._actions}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ConfigError(
            f"unknown training setting(s) {unknown}; use AEMConfig / GRPOConfig / ModelConfig "
            "field names (aem train --help lists them)"
        )
    parser.set_defaults_with_config(**settings)
    namespace, _ = parser.parse_known_args([])
    return build_run(vars(namespace))


def build_run(values: Mapping[str, Any]) -> TrainRun:
    """The dataclasses of parsed ``values`` (a parser's namespace), checked; ``report_to``'s
    TensorBoard is taken out for the driver to wire, and the model's loading settings go to
    ``model_init_kwargs`` (as TRL's ``grpo.py`` script does)."""
    from aem_agent.grpo.config import AEMConfig, AgentModelConfig, ConfigError

    values = dict(values)
    if values.get("output_dir") is None:
        raise ConfigError("no output_dir: pass --output-dir or set output_dir in the config")
    report_to = values.get("report_to") or []
    report_to = [report_to] if isinstance(report_to, str) else list(report_to)
    tensorboard = "tensorboard" in report_to or "all" in report_to
    values["report_to"] = [r for r in report_to if r not in ("tensorboard", "none")] or "none"
    try:
        model = dataclass_of(AgentModelConfig, values)
        run = dataclass_of(RunArgs, values)
        config = dataclass_of(AEMConfig, values)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid training settings: {exc}") from exc
    config.model_init_kwargs = model.model_init_kwargs(config.model_init_kwargs)
    return TrainRun(config, model, run, tensorboard)


def dataclass_of(kind: type[T], values: Mapping[str, Any]) -> T:
    """``kind`` built from the ``values`` that are its init fields (a parsed namespace holds
    the fields of several dataclasses, as ``HfArgumentParser`` splits them)."""
    names = {f.name for f in fields(kind) if f.init}  # type: ignore[arg-type]
    return kind(**{k: v for k, v in values.items() if k in names})


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
    """The newest whole ``checkpoint-<step>`` directory of a run, if any.

    Whole means saved to the end: the trainer writes ``trainer_state.json`` last, so a folder
    without it is a save that was killed (a session ends by killing its runs) and resuming
    from it would fail on, or silently miss, what it never received.
    """
    steps = [
        (checkpoint_step(p), p)
        for p in output_dir.glob("checkpoint-*")
        if p.name.split("-")[1].isdigit() and (p / TRAINER_STATE).is_file()
    ]
    return max(steps)[1] if steps else None


def checkpoint_step(checkpoint: Path) -> int:
    """The optimizer step a ``checkpoint-<step>`` directory was saved at (TRL names it so)."""
    return int(checkpoint.name.split("-")[1])


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
    return {**config.prompt_record(), "layout": config.rollout_layout}


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
    config: AEMConfig,
    model_dir: Path,
    *,
    model: AgentModelConfig | None = None,
    callbacks: Sequence[TrainerCallback] = (),
) -> AEMGRPOTrainer:
    """The ``AEMGRPOTrainer`` of ``config`` on ``model_dir``: it builds its own rollout, tasks
    and reward; with ``model.use_peft`` a LoRA adapter (TRL's ``get_peft_config``). The caller
    closes ``trainer.rollout_func``."""
    from trl import get_peft_config

    from aem_agent.grpo.trainer import AEMGRPOTrainer

    return AEMGRPOTrainer(
        model=str(model_dir),
        args=config,
        callbacks=list(callbacks),
        peft_config=get_peft_config(model) if model is not None else None,
    )
