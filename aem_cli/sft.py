"""``aem sft``: warm-start a model by imitating the envs' experts (supervised, TRL SFTTrainer).

Examples::

    aem sft aem/ALFWorld-v0 --episodes 200 --output-dir runs/sft
    aem sft aem/WebShop-v0 --model runs/sft --full --epochs 1 --output-dir runs/sft-ws
    aem sft aem/ALFWorld-v0 --output-dir runs/sft --resume   # continue a killed run

The expert is played through the same rollout code as ``aem train``, so every sample is the
exact context the model will be given there (history window, reply prefix, layout). The
output directory holds the merged model (``aem train --model DIR``,
``aem bench --policy hf:DIR``), the LoRA adapter in ``adapter/`` and ``aem-prompt.json``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from aem_cli.arguments import non_negative_int, positive_float, positive_int
from aem_cli.env_kwargs import add_env_kwargs_flag
from aem_cli.run_flags import add_run_flags
from aem_envs.reply import REPLY_FORMAT

if TYPE_CHECKING:  # the CLI imports the agent (torch, TRL) only when a command runs
    from aem_agent.sft import SFTSettings


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from aem_agent.batches import LAYOUTS
    from aem_agent.prompts import PROMPT_STYLES
    from aem_agent.sft import TRAIN_SPLIT, SFTSettings

    defaults = SFTSettings(env_ids=(), output_dir="")
    parser = subparsers.add_parser(
        "sft",
        help="supervised warm start on expert trajectories (TRL SFTTrainer, LoRA by default)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("env_ids", nargs="+", metavar="ENV_ID", help="env id(s) to imitate")
    add_env_kwargs_flag(parser)
    add_run_flags(
        parser,
        model=defaults.model,
        lr=defaults.learning_rate,
        seed=defaults.seed,
        output_required=True,
        overwrite=False,
    )
    parser.add_argument(
        "--episodes", type=positive_int, default=defaults.episodes, help="expert episodes to play"
    )
    parser.add_argument(
        "--epochs", type=positive_float, default=defaults.epochs, help="passes over them"
    )
    parser.add_argument(
        "--layout",
        choices=LAYOUTS,
        default=defaults.layout,
        help="step: one sample per turn (default); trajectory: one per episode",
    )
    parser.add_argument(
        "--history-window",
        type=non_negative_int,
        default=defaults.history_window,
        help="recent steps shown in each prompt (as in aem train)",
    )
    parser.add_argument(
        "--prompt-style",
        choices=PROMPT_STYLES,
        default=defaults.prompt_style,
        help="prompt layout: full (default) or compact (a few lines, for small models)",
    )
    parser.add_argument(
        "--reply-prefix",
        default=defaults.reply_prefix,
        help=f"text pre-filled at the start of every reply, e.g. {REPLY_FORMAT.action_open!r}",
    )
    parser.add_argument(
        "--explore",
        type=float,
        default=defaults.explore,
        help="share of turns that play a random admissible action instead of the expert's "
        "(still labelled with the expert's): shows recoveries (default 0)",
    )
    parser.add_argument(
        "--max-turns", type=positive_int, default=defaults.max_turns, help="episode step limit"
    )
    parser.add_argument(
        "--max-turn-tokens",
        type=positive_int,
        default=defaults.max_turn_tokens,
        help="new tokens per turn the model will be given (recorded in aem-prompt.json)",
    )
    parser.add_argument(
        "--split",
        default=TRAIN_SPLIT,
        help=f"task split of the expert episodes; only {TRAIN_SPLIT!r} is accepted",
    )
    parser.add_argument("--full", action="store_true", help="train all weights instead of LoRA")
    parser.add_argument(
        "--prompt-loss",
        action="store_true",
        help="score the prompt tokens too, not only the replies (a model trained from scratch "
        "learns to read the env's text)",
    )
    parser.add_argument(
        "--oversample",
        type=positive_int,
        default=defaults.oversample,
        help="repeat samples of actions rarer than the commonest (take vs go to) up to N times",
    )
    parser.add_argument(
        "--init-adapter", help="go on training this LoRA adapter directory instead of a new one"
    )
    parser.add_argument("--lora-r", type=positive_int, default=defaults.lora_r, help="LoRA rank")
    parser.add_argument(
        "--lora-alpha", type=positive_int, default=defaults.lora_alpha, help="LoRA alpha"
    )
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=defaults.batch_size,
        help="samples per device step",
    )
    parser.add_argument(
        "--grad-accum",
        type=positive_int,
        default=defaults.gradient_accumulation_steps,
        help="batches per optimizer step",
    )
    parser.add_argument(
        "--save-steps",
        type=positive_int,
        default=defaults.save_steps,
        help="checkpoint every N steps",
    )
    parser.add_argument(
        "--torch-threads",
        type=positive_int,
        help="CPU threads for torch (1 is fastest on shared cores)",
    )
    parser.set_defaults(func=run)


def settings_from_args(args: argparse.Namespace) -> SFTSettings:
    from aem_agent.sft import SFTSettings

    return SFTSettings(
        env_ids=list(args.env_ids),
        output_dir=args.output_dir,
        model=args.model,
        episodes=args.episodes,
        epochs=args.epochs,
        learning_rate=args.lr,
        layout=args.layout,
        history_window=args.history_window,
        prompt_style=args.prompt_style,
        reply_prefix=args.reply_prefix,
        explore=args.explore,
        max_turns=args.max_turns,
        max_turn_tokens=args.max_turn_tokens,
        split=args.split,
        seed=args.seed,
        full=args.full,
        prompt_loss=args.prompt_loss,
        oversample=args.oversample,
        init_adapter=args.init_adapter,
        lora_r=args.lora_r,
        lora_alpha=args.lora_alpha,
        batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum,
        save_steps=args.save_steps,
        torch_threads=args.torch_threads,
        overwrite=args.overwrite,
        resume=args.resume,
        env_kwargs=dict(args.env_kwargs),
    )


def run(args: argparse.Namespace) -> int:
    from aem_agent.sft import check_settings, run_sft

    settings = settings_from_args(args)
    check_settings(settings)  # one line for a bad split or output dir, before loading anything
    result = run_sft(settings)
    print(
        f"imitated {result.won}/{result.episodes} won expert episodes: {result.samples} samples, "
        f"{result.reply_tokens} reply tokens; trained to step {result.global_step}"
        + (f" (loss {result.train_loss:.4f})" if result.train_loss is not None else "")
    )
    print(f"model:   {result.output_dir}  (aem bench --policy hf:{result.output_dir})")
    if result.adapter_dir is not None:
        print(f"adapter: {result.adapter_dir}")
    return 0
