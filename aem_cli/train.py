"""``aem train``: train a policy on aem envs with AEM (or plain GRPO) on TRL.

Examples::

    aem train --config cpu-smoke.yaml --output-dir runs/smoke
    aem train aem/ALFWorld-v0 --model smollm2 --algo grpo --steps 20 --output-dir runs/grpo
    aem train --config cpu-smoke.yaml --credit gigpo+aem --output-dir runs/gigpo-aem
    aem train --config cpu-smoke.yaml --output-dir runs/ray --ray   # envs in Ray actors
    accelerate launch -m aem_cli train --config qwen2.5-1.5b-alfworld.yaml

Values given on the command line override the YAML file; ``--resume`` continues from the
newest checkpoint in the output directory, ``--overwrite`` replaces an earlier run there.

This module is the driver (TRL's ``trl/scripts/grpo.py``): flags and YAML → settings →
:func:`train`, which strings together the library pieces of :mod:`aem_agent.grpo.run` (config,
model, trainer, outputs) and :mod:`aem_agent.grpo.metrics` (what a run logs). Under ``accelerate
launch`` every process runs this same driver.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from aem_agent.grpo.metrics import (
    MetricsWriter,
    log_line_callback,
    readable_terminal,
    tensorboard_callbacks,
    write_plot,
)
from aem_agent.grpo.run import (
    FINAL_DIR,
    METRICS_FILE,
    PLOT_FILE,
    SETTINGS_FILE,
    TENSORBOARD_DIR,
    build_config,
    build_trainer,
    check_output_dir,
    last_checkpoint,
    load_settings,
    prompt_layout,
    resolve_model,
    save_policy,
)
from aem_agent.prompts import write_prompt_layout
from aem_cli.arguments import positive_int
from aem_cli.run_flags import add_ray_flag, add_run_flags
from aem_envs.core.errors import AEMError
from aem_envs.core.io import atomic_write_json

if TYPE_CHECKING:  # torch and TRL load only when a run starts
    from peft import PeftModel
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from aem_agent.rollout.groups import MultiTurnRollout

#: Command-line flag → training setting (AEMConfig field or driver key).
FLAG_SETTINGS: dict[str, str] = {
    "model": "model",
    "algo": "algo",
    "group_size": "num_generations",
    "steps": "max_steps",
    "lr": "learning_rate",
    "lam": "aem_lambda",
    "credit": "credit",
    "seed": "seed",
    "output_dir": "output_dir",
    "overwrite": "overwrite",
    "ray": "env_ray_address",
}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a policy with AEM/GRPO (TRL) on aem envs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("env_ids", nargs="*", metavar="ENV_ID", help="env id(s) to train on")
    parser.add_argument(
        "--config", help="YAML of settings (a path, or a bundled name such as cpu-smoke.yaml)"
    )
    parser.add_argument("--algo", choices=("aem", "grpo"), help="aem (default) or plain grpo")
    parser.add_argument(
        "--group-size", type=positive_int, help="episodes per task (GRPO group size G)"
    )
    parser.add_argument("--steps", type=positive_int, help="optimizer steps to train")
    add_run_flags(parser)
    parser.add_argument("--lam", type=float, help="AEM strength λ (0 = GRPO)")
    parser.add_argument(
        "--credit",
        metavar="CHAIN",
        help="credit estimators joined by '+': aem (default), grpo, gigpo, gigpo+aem "
        "(docs/credit.md)",
    )
    add_ray_flag(parser)
    parser.set_defaults(func=run)


def settings_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The YAML settings with the command-line values laid over them."""
    settings = load_settings(args.config)
    if args.env_ids:
        settings["env_ids"] = list(args.env_ids)
    for flag, key in FLAG_SETTINGS.items():
        value = getattr(args, flag)
        if value is not None:
            settings[key] = value
    return settings


def run(args: argparse.Namespace) -> int:
    """``aem train``: one run, then where its outputs are."""
    result = train(settings_from_args(args), resume=args.resume)
    print(f"trained to step {result.global_step}; outputs in {result.output_dir}")
    print(f"  metrics: {result.metrics_csv}")
    print(f"  plot:    {result.plot}")
    return 0


@dataclass(frozen=True)
class TrainResult:
    """Where a finished run put its outputs, and the step it reached."""

    output_dir: Path
    metrics_csv: Path
    plot: Path
    global_step: int


def train(settings: Mapping[str, Any], *, resume: bool = False) -> TrainResult:
    """Run one training job described by ``settings`` (YAML keys, see :mod:`aem_agent.grpo.run`):
    check the output folder and env ids before a model loads, train, then save the final
    model with its prompt layout and plot the logged metrics (main process only)."""
    config, driver = build_config(settings)
    if driver.get("torch_threads"):
        import torch

        torch.set_num_threads(int(driver["torch_threads"]))
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    assert config.output_dir is not None  # build_config refuses settings without one
    output_dir = Path(config.output_dir)
    checkpoint = last_checkpoint(output_dir) if resume else None
    if resume and checkpoint is None:
        raise AEMError(f"--resume: no checkpoint-* directory in {output_dir}; start without it")
    if not resume:
        check_output_dir(output_dir, overwrite=bool(driver.get("overwrite")))

    from aem_envs.registration import resolve_env_id

    for env_id in config.env_ids:
        resolve_env_id(env_id)  # one clear line for an unknown id, before loading a model
    if config.env_ray_address is not None:
        from aem_envs.vector import cluster

        cluster.ray_module()  # likewise "install aem[scale]" (the rollout connects)
    model_dir = resolve_model(str(driver.get("model", "smollm2")))
    metrics = MetricsWriter(output_dir / METRICS_FILE, resume_step=_step_of(checkpoint))
    trainer = build_trainer(
        config,
        model_dir,
        callbacks=[
            metrics.callback(),
            log_line_callback(),
            *tensorboard_callbacks(output_dir / TENSORBOARD_DIR, wanted=driver["tensorboard"]),
        ],
    )
    readable_terminal(trainer)
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
            # the trainer loaded the model by name (a PreTrainedModel, PEFT-wrapped with
            # LoRA) and its tokenizer
            model = cast("PreTrainedModel | PeftModel", trainer.model)
            tokenizer = cast("PreTrainedTokenizerBase", trainer.processing_class)
            save_policy(model, tokenizer, output_dir / FINAL_DIR)
            write_prompt_layout(output_dir / FINAL_DIR, prompt_layout(config))
    finally:
        rollout.close()
    plot = output_dir / PLOT_FILE
    if trainer.is_world_process_zero():
        write_plot(metrics.rows, plot)
    return TrainResult(output_dir, metrics.path, plot, trainer.state.global_step)


def _step_of(checkpoint: Path | None) -> int | None:
    """The step a ``checkpoint-<step>`` directory was saved at."""
    return int(checkpoint.name.split("-")[1]) if checkpoint is not None else None


def _jsonable(data: dict[str, Any]) -> dict[str, Any]:
    """Settings as JSON values (enums and other objects as their string)."""
    return json.loads(json.dumps(data, default=str))
