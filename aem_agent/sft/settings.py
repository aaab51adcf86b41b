"""The settings of an ``aem sft`` run (:class:`SFTSettings`, TRL's ``SFTConfig`` plus what aem adds)
and their check, apart from the run itself (:mod:`aem_agent.sft.finetune`): the CLI parses and
checks them before torch or a model loads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trl import SFTConfig

from aem_agent.grpo.run import (
    ADAPTER_DIR,
    METRICS_FILE,
    check_output_dir,
    last_checkpoint,
)
from aem_agent.prompts import PROMPT_FILE, PromptSettings
from aem_agent.rollout.batches import LAYOUTS, Layout
from aem_agent.sft.demonstrations import (
    expert_reply,
)
from aem_envs.core.base import TRAIN_SPLIT
from aem_envs.core.errors import AEMError

if TYPE_CHECKING:
    from aem_agent.grpo.config import AgentModelConfig

SETTINGS_FILE = "aem-sft.json"
#: What ``aem sft`` writes into an output directory; ``overwrite`` replaces exactly these.
OUTPUTS = (PROMPT_FILE, SETTINGS_FILE, ADAPTER_DIR, METRICS_FILE)
#: ``aem sft``'s model settings where they differ from ``AgentModelConfig``'s (``aem
#: train``'s): LoRA by default (``--full`` trains every weight), on every linear layer of the
#: blocks (whatever the architecture names them), with TRL's dropout (a supervised loss has
#: no importance ratio for it to disturb).
SFT_MODEL_DEFAULTS: dict[str, Any] = {
    "use_peft": True,
    "lora_target_modules": ["all-linear"],
    "lora_dropout": 0.05,
}


class SFTError(AEMError, ValueError):
    """An SFT run cannot start as configured (split, output directory, expert data)."""


def sft_model(**settings: Any) -> AgentModelConfig:
    """The model settings of an ``aem sft`` run: :data:`SFT_MODEL_DEFAULTS` under ``settings``."""
    from aem_agent.grpo.config import AgentModelConfig

    return AgentModelConfig(**{**SFT_MODEL_DEFAULTS, **settings})


@dataclass
class SFTSettings(SFTConfig, PromptSettings):
    """One ``aem sft`` run: TRL's ``SFTConfig``, the prompt settings of ``aem train``
    (:class:`PromptSettings`, one definition for both) and the expert data. The model and its
    LoRA adapter are TRL's ``ModelConfig`` (:func:`sft_model`).

    Defaults that differ from ``SFTConfig``'s, and why:

    * ``learning_rate`` 2e-4 (TRL: 2e-5): a LoRA adapter, or a small model trained whole,
      learns the reply format in one pass at this rate;
    * ``num_train_epochs`` 1 (TRL: 3): more expert episodes, not more passes, is the cheap way
      to more data here;
    * ``per_device_train_batch_size`` 2 and ``gradient_accumulation_steps`` 4 (TRL: 8 and 1):
      the same batch of 8, but the logits of long multi-turn contexts dominate memory, so 2
      rows at a time fit a CPU machine;
    * ``save_steps`` 100 and ``save_total_limit`` 2 (TRL: 500, all): a killed CPU run loses
      little and the folder keeps two checkpoints;
    * ``completion_only_loss`` on and ``max_length`` unset (TRL: 1024): the loss is on the
      reply tokens only, which sit at the end of a sample: never cut one;
    * ``shuffle_dataset`` on: the samples are built episode by episode;
    * ``seed`` 0 (TRL: 42): the seed of the expert episodes too (episode k is reset with
      ``seed + k``), as in every aem command;
    * ``lr_scheduler_type`` cosine with 5 % warm-up (TRL: linear, none);
    * ``activation_checkpointing`` off: recomputing costs more than it saves on small models;
    * ``bf16``: on a GPU, and on CPUs that multiply bf16 natively
      (:func:`aem_agent.models.bundled.cpu_bf16_supported`); ``use_cpu`` without a GPU;
    * ``disable_tqdm``: the progress is in ``metrics.csv`` and the log lines.
    """

    output_dir: str = field(
        kw_only=True,
        metadata={"help": "Where the model, adapter, checkpoints and metrics go."},
    )
    env_ids: list[str] = field(
        default_factory=list, metadata={"help": "Env ids whose expert is imitated."}
    )
    env_kwargs: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "Keyword arguments for gym.make of every env."}
    )
    episodes: int = field(default=100, metadata={"help": "Expert episodes to play."})
    layout: Layout = field(
        default="step",
        metadata={"help": "'step': one sample per turn; 'trajectory': one per episode."},
    )
    system_prompt: str | None = field(
        default=None, metadata={"help": "System prompt of every context (default: none)."}
    )
    think: str | None = field(
        default=None,
        metadata={
            "help": "Unset: replies are the action block only; else this <think> text first."
        },
    )
    explore: float = field(
        default=0.0,
        metadata={
            "help": "Share of turns that play a random admissible action instead of the "
            "expert's (still labelled with the expert's): shows recoveries."
        },
    )
    max_total_tokens: int = field(
        default=4096, metadata={"help": "Most tokens of one episode's context."}
    )
    split: str = field(
        default=TRAIN_SPLIT,
        metadata={"help": f"Task split of the expert episodes; only {TRAIN_SPLIT!r} is accepted."},
    )
    oversample: int = field(
        default=1,
        metadata={
            "help": "Repeat samples of actions rarer than the commonest (take vs go to) up to "
            "N times (1: off)."
        },
    )
    init_adapter: str | None = field(
        default=None,
        metadata={"help": "Go on training this LoRA adapter directory instead of a new one."},
    )
    torch_threads: int | None = field(
        default=None, metadata={"help": "CPU threads for torch (1 is fastest on shared cores)."}
    )
    overwrite: bool = field(
        default=False,
        metadata={"help": "Replace an earlier run's outputs in output_dir instead of refusing."},
    )
    resume: bool = field(
        default=False, metadata={"help": "Continue from the newest checkpoint-* in output_dir."}
    )
    # SFTConfig's fields whose defaults differ (the class docstring says why)
    learning_rate: float = field(default=2e-4, metadata={"help": "Learning rate (TRL: 2e-5)."})
    num_train_epochs: float = field(
        default=1.0, metadata={"help": "Passes over the samples (TRL: 3)."}
    )
    per_device_train_batch_size: int = field(
        default=2, metadata={"help": "Samples per forward (TRL: 8)."}
    )
    gradient_accumulation_steps: int = field(
        default=4, metadata={"help": "Forwards per optimizer step (TRL: 1)."}
    )
    save_steps: float = field(default=100, metadata={"help": "Checkpoint every N steps."})
    save_total_limit: int | None = field(
        default=2, metadata={"help": "Checkpoints kept (TRL: all)."}
    )
    completion_only_loss: bool | None = field(
        default=True, metadata={"help": "Loss on the reply tokens only."}
    )
    max_length: int | None = field(
        default=None, metadata={"help": "Cut samples to this length (default: never)."}
    )
    shuffle_dataset: bool = field(default=True, metadata={"help": "Shuffle the samples."})
    seed: int = field(
        default=0, metadata={"help": "Seed of the expert episodes, sampling and training."}
    )
    lr_scheduler_type: str = field(
        default="cosine", metadata={"help": "Learning-rate schedule (TRL: linear)."}
    )
    warmup_steps: float = field(
        default=0.05, metadata={"help": "Warm-up steps, or a share of them below 1 (TRL: 0)."}
    )
    activation_checkpointing: bool | None = field(
        default=False, metadata={"help": "Recompute activations in the backward pass."}
    )
    disable_tqdm: bool | None = field(
        default=True, metadata={"help": "No progress bars (the log lines say how far)."}
    )

    def __post_init__(self) -> None:
        import torch

        from aem_agent.models.bundled import cpu_bf16_supported

        cpu = not torch.cuda.is_available()
        self.use_cpu = self.use_cpu or cpu
        if self.bf16 is None:
            self.bf16 = not cpu or cpu_bf16_supported()
        super().__post_init__()


def check_settings(settings: SFTSettings, model: AgentModelConfig | None = None) -> None:
    """Fail in one line before anything is loaded: split, layout, sizes, output directory."""
    model = model or sft_model()
    if settings.split != TRAIN_SPLIT:
        raise SFTError(
            f"split={settings.split!r}: aem sft trains on the {TRAIN_SPLIT!r} split only "
            "(valid/test splits are for measuring the trained model)"
        )
    if settings.layout not in LAYOUTS:
        raise SFTError(f"layout={settings.layout!r}; choose one of {list(LAYOUTS)}")
    if not settings.env_ids:
        raise SFTError("no env id given; name at least one, e.g. aem/ALFWorld-v0")
    if settings.episodes < 1 or settings.num_train_epochs <= 0 or settings.history_window < 0:
        raise SFTError(
            f"need episodes >= 1, epochs > 0, history_window >= 0; got {settings.episodes}, "
            f"{settings.num_train_epochs}, {settings.history_window}"
        )
    adapter = settings.init_adapter
    if adapter is not None and (
        not model.use_peft or not (Path(adapter) / "adapter_config.json").exists()
    ):
        raise SFTError(
            f"init_adapter={settings.init_adapter!r} must be a LoRA adapter directory (with "
            "adapter_config.json, e.g. an earlier run's adapter/) and needs LoRA, not --full"
        )
    if settings.oversample < 1 or (settings.oversample > 1 and settings.layout != "step"):
        raise SFTError(
            f"oversample={settings.oversample}: give 1 (off) or more; it repeats step samples, "
            "so it needs layout='step'"
        )
    if not 0.0 <= settings.explore < 1.0:
        raise SFTError(f"explore={settings.explore}: give a share of turns in [0, 1)")
    if settings.explore and settings.layout != "step":
        raise SFTError("explore needs layout='step' (each turn is its own labelled sample)")
    prefix = settings.reply_prefix or ""
    if settings.think is not None and not expert_reply("a", settings.think).startswith(prefix):
        raise SFTError(
            f"reply_prefix {settings.reply_prefix!r} does not start a reply with a think "
            "block; drop --think or the prefix"
        )
    out = Path(settings.output_dir)
    if out.exists() and not out.is_dir():
        raise SFTError(f"output dir {out} is a file; give a directory")
    if settings.resume:
        if last_checkpoint(out) is None:
            raise SFTError(
                f"--resume: no whole checkpoint-* directory (one with trainer_state.json) in "
                f"{out}; start without it"
            )
    elif not settings.overwrite:
        check_output_dir(out, overwrite=False, outputs=OUTPUTS)
