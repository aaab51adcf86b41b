"""``aem sft``: warm-start a model by imitating the envs' experts (supervised, TRL SFTTrainer).

Examples::

    aem sft aem/ALFWorld-v0 --episodes 200 --output-dir runs/sft
    aem sft aem/WebShop-v0 --model runs/sft --full --epochs 1 --output-dir runs/sft-ws
    aem sft aem/ALFWorld-v0 --output-dir runs/sft --resume   # continue a killed run

Every flag is a field of ``SFTSettings`` (TRL's ``SFTConfig`` plus the expert data) or of
TRL's ``ModelConfig`` (the model, LoRA), parsed by TRL's ``TrlParser``; ``--config FILE`` sets
the same fields by name from YAML and the command line overrides it.

The expert is played through the same rollout code as ``aem train``, so every sample is the
exact context the model will be given there (history window, reply prefix, layout). The
output directory holds the merged model (``aem train --model DIR``,
``aem bench --policy hf:DIR``), the LoRA adapter in ``adapter/`` and ``aem-prompt.json``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from aem_cli.arguments import (
    Parser,
    json_object,
    non_negative_int,
    positive_float,
    positive_int,
)

if TYPE_CHECKING:  # the CLI imports the agent (torch, TRL) only when a command runs
    from aem_agent.grpo.config import AgentModelConfig
    from aem_agent.sft.settings import SFTSettings

#: Short flags of TRL fields, kept from before the flags were the dataclasses' own:
#: flag → (field, checked type).
SHORT_FLAGS: dict[str, tuple[str, Any]] = {
    "--lr": ("learning_rate", positive_float),
    "--epochs": ("num_train_epochs", positive_float),
    "--batch-size": ("per_device_train_batch_size", positive_int),
    "--grad-accum": ("gradient_accumulation_steps", positive_int),
}
#: Fields whose flags get a checked type: a bad value is one line while parsing.
CHECKED: dict[str, Any] = {
    "episodes": positive_int,
    "history_window": non_negative_int,
    "max_turns": positive_int,
    "max_turn_tokens": positive_int,
    "oversample": positive_int,
    "lora_r": positive_int,
    "lora_alpha": positive_int,
    "save_steps": positive_int,
    "torch_threads": positive_int,
    "env_kwargs": json_object,
}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    subparsers.add_parser(
        "sft",
        help="supervised warm start on expert trajectories (TRL SFTTrainer, LoRA by default)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        setup=_add_flags,
    ).set_defaults(func=run)


def _add_flags(parser: Parser) -> None:
    """Every field of ``SFTSettings`` (TRL's ``SFTConfig`` and aem's) and of TRL's
    ``ModelConfig`` as a flag, over ``aem sft``'s model defaults."""
    from aem_agent.grpo.config import AgentModelConfig
    from aem_agent.grpo.run import CONFIGS_DIR
    from aem_agent.sft.settings import SFT_MODEL_DEFAULTS, SFTSettings

    parser.add_argument(
        "env_id_args", nargs="*", metavar="ENV_ID", help="env id(s) to imitate (sets env_ids)"
    )
    parser.add_argument(
        "--config", metavar="YAML", help="settings file (a path); flags override it"
    )
    parser.add_short_flags(SHORT_FLAGS)
    parser.add_argument(
        "--full",
        dest="use_peft",
        action="store_false",
        default=argparse.SUPPRESS,
        help="train all weights instead of a LoRA adapter (--use_peft false)",
    )
    parser.add_argument(
        "--prompt-loss",
        dest="completion_only_loss",
        action="store_false",
        default=argparse.SUPPRESS,
        help="score the prompt tokens too, not only the replies (--completion_only_loss false): "
        "a model trained from scratch learns to read the env's text",
    )
    parser.add_dataclasses(SFTSettings, AgentModelConfig)
    parser.retype(CHECKED)
    parser.configs_dir = CONFIGS_DIR
    parser.set_defaults_with_config(**SFT_MODEL_DEFAULTS)


def settings_of(args: argparse.Namespace) -> tuple[SFTSettings, AgentModelConfig]:
    """The run the parsed command line describes (positional env ids set ``env_ids``)."""
    from aem_agent.grpo.config import AgentModelConfig
    from aem_agent.grpo.run import dataclass_of
    from aem_agent.sft.settings import SFTError, SFTSettings

    values = vars(args).copy()
    if values.get("env_id_args"):
        values["env_ids"] = list(values["env_id_args"])
    try:
        settings = dataclass_of(SFTSettings, values)
        model = dataclass_of(AgentModelConfig, values)
    except (TypeError, ValueError) as exc:
        raise SFTError(f"invalid sft settings: {exc}") from exc
    return settings, model


def run(args: argparse.Namespace) -> int:
    from aem_agent.sft.finetune import run_sft
    from aem_agent.sft.settings import check_settings

    settings, model = settings_of(args)
    check_settings(settings, model)  # one line for a bad split or output dir, before loading
    result = run_sft(settings, model)
    print(
        f"imitated {result.won}/{result.episodes} won expert episodes: {result.samples} samples, "
        f"{result.reply_tokens} reply tokens; trained to step {result.global_step}"
        + (f" (loss {result.train_loss:.4f})" if result.train_loss is not None else "")
    )
    print(f"model:   {result.output_dir}  (aem bench --policy hf:{result.output_dir})")
    if result.adapter_dir is not None:
        print(f"adapter: {result.adapter_dir}")
    return 0
