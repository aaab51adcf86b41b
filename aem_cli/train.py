"""``aem train``: train a policy on aem envs with AEM (or plain GRPO) on TRL.

Examples::

    aem train --config cpu-smoke.yaml --output-dir runs/smoke
    aem train aem/ALFWorld-v0 --model smollm2 --algo grpo --steps 20 --output-dir runs/grpo
    aem train --config cpu-smoke.yaml --credit gigpo+aem --output-dir runs/gigpo-aem
    aem train --config cpu-smoke.yaml --output-dir runs/ray --ray   # envs in Ray actors
    accelerate launch -m aem_cli train --config qwen2.5-1.5b-alfworld.yaml

Every flag is a field of ``AEMConfig`` (TRL's ``GRPOConfig`` and aem's settings), of TRL's
``ModelConfig`` (the model, LoRA) or of ``RunArgs``, parsed by TRL's ``TrlParser``; a YAML file
(``--config``) sets the same fields by name, the command line overrides it. ``--resume``
continues from the newest checkpoint in the output directory, ``--overwrite`` replaces an
earlier run there.

This module is the driver (TRL's ``trl/scripts/grpo.py``): flags and YAML → dataclasses →
:func:`train`, which strings together the library pieces of :mod:`aem_agent.grpo.run` (config,
model, trainer, outputs) and :mod:`aem_agent.grpo.metrics` (what a run logs). Under ``accelerate
launch`` every process runs this same driver.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict, dataclass
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
    CONFIGS_DIR,
    FINAL_DIR,
    METRICS_FILE,
    PLOT_FILE,
    SETTINGS_FILE,
    TENSORBOARD_DIR,
    TrainRun,
    build_run,
    build_trainer,
    check_output_dir,
    checkpoint_step,
    last_checkpoint,
    prompt_layout,
    renamed,
    resolve_model,
    save_policy,
    train_dataclasses,
    train_defaults,
)
from aem_agent.prompts import write_prompt_layout
from aem_cli.arguments import Parser, json_object, positive_float, positive_int
from aem_envs.core.errors import AEMError
from aem_envs.core.io import atomic_write_json

if TYPE_CHECKING:  # torch and TRL load only when a run starts
    from peft import PeftModel
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from aem_agent.rollout.groups import MultiTurnRollout

#: Short flags of TRL fields, kept from before the flags were the dataclasses' own:
#: flag → (field, checked type).
SHORT_FLAGS: dict[str, tuple[str, Any]] = {
    "--steps": ("max_steps", positive_int),
    "--group-size": ("num_generations", positive_int),
    "--lr": ("learning_rate", positive_float),
}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    subparsers.add_parser(
        "train",
        help="train a policy with AEM/GRPO (TRL) on aem envs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        setup=_add_flags,
    ).set_defaults(func=run)


def _add_flags(parser: Parser) -> None:
    """Every field of ``aem train``'s dataclasses as a flag, over ``aem train``'s defaults."""
    parser.add_argument(
        "env_id_args", nargs="*", metavar="ENV_ID", help="env id(s) to train on (sets env_ids)"
    )
    parser.add_argument(
        "--config",
        metavar="YAML",
        help="settings file: a path, or a bundled name such as cpu-smoke.yaml; flags override it",
    )
    parser.add_short_flags(SHORT_FLAGS)
    parser.add_dataclasses(*train_dataclasses())
    parser.retype({"env_kwargs": json_object})
    parser.configs_dir = CONFIGS_DIR
    parser.rename = renamed
    parser.set_defaults_with_config(**train_defaults())


def run_of(args: argparse.Namespace) -> TrainRun:
    """The run the parsed command line describes (positional env ids set ``env_ids``)."""
    values = vars(args).copy()
    if values.get("env_id_args"):
        values["env_ids"] = list(values["env_id_args"])
    return build_run(values)


def run(args: argparse.Namespace) -> int:
    """``aem train``: one run, then where its outputs are."""
    result = train(run_of(args))
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


def train(setup: TrainRun) -> TrainResult:
    """Run one training job (:func:`aem_agent.grpo.run.build_config` of YAML keys, or
    :func:`run_of` a command line): check the output folder and env ids before a model
    loads, train, then save the final model with its prompt layout and plot the logged
    metrics (main process only)."""
    config, model_args, driver, tensorboard = setup
    resume = driver.resume
    if driver.torch_threads:
        import torch

        torch.set_num_threads(driver.torch_threads)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    assert config.output_dir is not None  # build_run refuses settings without one
    output_dir = Path(config.output_dir)
    checkpoint = last_checkpoint(output_dir) if resume else None
    if resume and checkpoint is None:
        raise AEMError(
            f"--resume: no whole checkpoint-* directory (one with trainer_state.json) in "
            f"{output_dir}; start without it"
        )
    if not resume:
        check_output_dir(output_dir, overwrite=driver.overwrite)

    from aem_envs.registration import resolve_env_id

    for env_id in config.env_ids:
        resolve_env_id(env_id)  # one clear line for an unknown id, before loading a model
    if config.env_ray_address is not None:
        from aem_envs.vector import cluster

        cluster.ray_module()  # likewise "install aem[scale]" (the rollout connects)
    model_dir = resolve_model(model_args.model_name_or_path)
    metrics = MetricsWriter(
        output_dir / METRICS_FILE, resume_step=checkpoint_step(checkpoint) if checkpoint else None
    )
    trainer = build_trainer(
        config,
        model_dir,
        model=model_args,
        callbacks=[
            metrics.callback(),
            log_line_callback(),
            *tensorboard_callbacks(output_dir / TENSORBOARD_DIR, wanted=tensorboard),
        ],
    )
    readable_terminal(trainer)
    rollout = cast("MultiTurnRollout", trainer.rollout_func)  # the one the trainer built
    if trainer.is_world_process_zero():
        rollout.progress = print
        atomic_write_json(
            output_dir / SETTINGS_FILE,
            {
                "model": str(model_dir),
                **_jsonable(asdict(model_args)),
                **asdict(driver),
                "tensorboard": tensorboard,
                **_jsonable(config.to_dict()),
            },
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


def _jsonable(data: dict[str, Any]) -> dict[str, Any]:
    """Settings as JSON values (enums and other objects as their string)."""
    return json.loads(json.dumps(data, default=str))
