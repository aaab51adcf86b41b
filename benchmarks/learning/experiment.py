"""The learning experiment: a grid of {algorithm} × {seed} runs from one start checkpoint.

Why a harness of its own: "does AEM learn better than GRPO?" is only answered by several seeds
of both algorithms from the same start, on the same tasks, with the same compute, scored on
tasks no run trained on. The harness holds everything but the algorithm fixed:

* one start checkpoint (``start/``), built once — a tiny model from a config (or a local
  checkpoint) plus an optional supervised warm-up to "valid but random" actions — and read by
  every run;
* every run goes through :func:`aem_agent.grpo.run.build_config` / ``build_trainer`` (the code
  path of ``aem train``) with the same ``train`` settings; a run's seed drives its task draw,
  data order and sampling, so the AEM and GRPO runs of one seed see the same tasks;
* the held-out split is scored every ``eval.every`` steps on a fixed list of distinct tasks,
  greedily (or by sampling with a fixed seed, isolated from the training RNG).

Resumable at every level: a run folder with ``done.json`` (written last, atomically) is
skipped; a killed run resumes from its newest TRL checkpoint, its ``metrics.csv`` cut back to
that step (on another machine, from the checkpoint :mod:`~benchmarks.learning.carry` committed
in ``carried/``); the start checkpoint is built in a scratch folder and renamed into place. Nothing
half-written is ever read back.

Layout of the output folder::

    start/                  model + tokenizer every run starts from; start.json (marker)
    runs/<arm>-seed<s>/     metrics.csv, units.csv.gz (:mod:`~benchmarks.learning.drift`),
                            checkpoint-*/ (while running), carried/ (a stopped run's
                            newest checkpoint, committed), final/, done.json
    results.json            everything the report needs (:mod:`benchmarks.learning.collect`)
    report.md, report.html, table.md, plots/*.png

This module trains one run (:func:`run_one`); the config and folder names are in
:mod:`~benchmarks.learning.config`, the held-out scoring in :mod:`~benchmarks.learning.heldout`,
``results.json`` in :mod:`~benchmarks.learning.collect` and the grid in
:mod:`~benchmarks.learning.grid`.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from aem_envs.core.io import atomic_write_json
from benchmarks.learning.carry import CARRIED_DIR, drop, restore
from benchmarks.learning.collect import last_value
from benchmarks.learning.config import DONE_MARKER, LearningConfig
from benchmarks.learning.drift import UNITS_FILE, UnitsWriter, drift_callback
from benchmarks.learning.heldout import (
    HELDOUT_KEYS,
    SAMPLED_PREFIX,
    ensure_env,
    heldout_callback,
    heldout_specs,
    start_heldout_row,
)

if TYPE_CHECKING:
    from aem_agent.rollout.groups import MultiTurnRollout


# ---------------------------------------------------------------------------- trainer settings
def run_settings(
    config: LearningConfig, algo: str, seed: int, output_dir: Path, **overrides: Any
) -> dict[str, Any]:
    """The ``aem train`` settings of one run: the shared ``train`` block plus what varies
    (``algo`` names an arm of ``config``: its algorithm and its own settings)."""
    return in_optimizer_steps(_batch_settings(config, algo, seed, output_dir, **overrides))


def _batch_settings(
    config: LearningConfig, algo: str, seed: int, output_dir: Path, **overrides: Any
) -> dict[str, Any]:
    """:func:`run_settings` before its counts are turned into optimizer steps."""
    arm = config.arm(algo)
    return {
        "save_strategy": "steps",
        "save_steps": config.eval_every,
        "save_total_limit": 1,
        "report_to": "none",
        # Full fine-tuning unless the config asks for LoRA: the tiny models learn from scratch.
        "use_peft": False,
        **config.train,
        **arm.train,
        **overrides,
        "algo": arm.algo,
        "seed": seed,
        "output_dir": str(output_dir),
        "env_ids": [config.env_id],
        "env_kwargs": dict(config.env_kwargs),
        "env_split": config.train_split,
    }


#: Trainer settings a learning config counts in rollout batches (the grid's "steps").
BATCH_COUNTED = ("max_steps", "save_steps", "logging_steps")


def in_optimizer_steps(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` with the counts of :data:`BATCH_COUNTED` turned into TRL's optimizer steps.

    Why: an arm that takes several optimizer steps per rollout batch (PPO mini-batches, as
    the DAPO and GSPO arms do) must still run as many batches, be scored and checkpointed
    after the same batches, and log one row per batch, as an arm that takes one; arms are
    compared by the batches they have seen. An arm with one update per batch is unchanged.
    A count below 1 (TRL's share of the run) is already relative and left as it is.
    """
    from aem_agent.grpo.run import build_config

    train = build_config(settings).config
    updates = train.updates_per_batch
    if updates == 1:
        return settings
    scaled = {key: getattr(train, key) for key in BATCH_COUNTED}
    return {
        **settings,
        **{key: int(value * updates) for key, value in scaled.items() if value >= 1},
    }


def updates_per_batch(config: LearningConfig, arm: str) -> int:
    """Optimizer steps each rollout batch of ``arm`` takes (checkpoint names count these)."""
    from aem_agent.grpo.run import build_config

    settings = _batch_settings(config, arm, config.arm(arm).seeds[0], Path("unused"))
    return build_config(settings).config.updates_per_batch


def configure_torch(threads: int | None) -> None:
    """Apply a run's ``torch_threads`` (a run on a shared machine keeps to its share)."""
    import torch

    if threads:
        torch.set_num_threads(int(threads))


# ---------------------------------------------------------------------------- one run
def run_one(
    config: LearningConfig,
    algo: str,
    seed: int,
    start_dir: Path,
    run_dir: Path,
    *,
    callbacks: Sequence[Any] = (),
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Train one (algo, seed) run to its end, resuming from its newest checkpoint if any.

    Returns the run's ``done.json`` content. A run already marked done is returned as is.
    ``callbacks`` are extra ``TrainerCallback`` objects (tests use one to kill a run).
    """
    from aem_agent.grpo.metrics import MetricsWriter, log_line_callback
    from aem_agent.grpo.run import (
        FINAL_DIR,
        METRICS_FILE,
        build_config,
        build_trainer,
        checkpoint_step,
        last_checkpoint,
    )

    done = run_dir / DONE_MARKER
    if done.is_file():
        return json.loads(done.read_text(encoding="utf-8"))
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    ensure_env(config.env_id)
    setup = build_config(run_settings(config, algo, seed, run_dir))
    train_config = setup.config
    configure_torch(setup.run.torch_threads)
    # metrics.csv, units.csv.gz, held-out cadence and done.json count rollout batches;
    # TRL's global_step and checkpoint names count optimizer steps, ``updates`` per batch
    updates = train_config.updates_per_batch
    if restored := restore(run_dir):  # committed by `--carry` on the machine it stopped on
        log(f"[{algo}-seed{seed}] restored {restored.name} from {CARRIED_DIR}/")
    checkpoint = last_checkpoint(run_dir)
    resume_step = checkpoint_step(checkpoint) // updates if checkpoint else None
    writer = MetricsWriter(run_dir / METRICS_FILE, resume_step=resume_step, updates=updates)
    if resume_step is None:
        writer.add(0, start_heldout_row(start_dir))  # its step 0 is the start's score
    specs = heldout_specs(config)
    heldout = heldout_callback(
        specs,
        config.eval_every,
        temperature=config.eval_temperature,
        seed=config.eval_seed,
        writer=writer,
        method=config.eval_method,
        updates=updates,
    )
    evaluations = [heldout]
    if config.sampled_eval is not None:  # each held-out task ``samples`` times, not at step 0
        sampled = config.sampled_eval
        evaluations.append(
            heldout_callback(
                specs * sampled.samples,
                sampled.every,
                temperature=sampled.temperature,
                seed=sampled.seed,
                writer=writer,
                updates=updates,
                prefix=SAMPLED_PREFIX,
                at_start=False,
                at_last=sampled.at_last,
                batch=len(specs),
            )
        )
    units = UnitsWriter(run_dir / UNITS_FILE, resume_step=resume_step)
    drift = drift_callback(writer, units, updates=updates, every=config.drift_every)
    tag = f"[{algo}-seed{seed}]"
    trainer = build_trainer(
        train_config,
        start_dir,
        model=setup.model,
        callbacks=[
            writer.callback(),
            log_line_callback(lambda line: log(f"{tag} {line}")),
            drift,
            *evaluations,
            *callbacks,
        ],
    )
    for evaluation in evaluations:
        evaluation.bind(trainer)
    drift.bind(trainer)
    rollout = cast("MultiTurnRollout", trainer.rollout_func)  # the one the trainer built
    rollout.progress = lambda line: log(f"{tag} {line}")  # minutes-long rollouts say how far
    log(
        f"{tag} "
        + (f"resuming from {checkpoint.name}" if checkpoint else "starting")
        + f" ({train_config.max_steps // updates} steps"
        + (f" of {updates} optimizer updates each)" if updates > 1 else ")")
    )
    started = time.perf_counter()
    try:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    finally:
        rollout.close()
    if trainer.is_world_process_zero():
        save_final(trainer, train_config, run_dir / FINAL_DIR)
    rows = writer.rows
    final = last_value(rows, HELDOUT_KEYS[0])
    summary = {
        "algo": algo,
        "seed": seed,
        "global_step": trainer.state.global_step // updates,  # rollout batches
        "optimizer_steps": trainer.state.global_step,
        "final_heldout_success": final,
        "resumed_from": checkpoint.name if checkpoint else None,
        "seconds_last_session": round(time.perf_counter() - started, 1),
        "heldout_episodes": len(specs),
    }
    atomic_write_json(done, summary)  # the marker: written last, atomically
    for stale in run_dir.glob("checkpoint-*"):  # done runs are never resumed
        shutil.rmtree(stale, ignore_errors=True)
    drop(run_dir)
    # TRL's model card, written beside each checkpoint, names no base model here: not a result
    (run_dir / "README.md").unlink(missing_ok=True)
    log(f"{tag} done at step {summary['global_step']}: held-out success {final}")
    return summary


def save_final(trainer: Any, train_config: Any, out: Path) -> Path:
    """Save the run's trained weights in ``out`` with the prompt layout they were trained in.

    Why only the weights that changed: a PEFT run saves its LoRA adapter alone (a few MB, to
    be applied to ``start/``), a full run its whole model; the start checkpoint is already
    on disk once for every run. Written in a scratch folder and renamed into place, so a
    killed save never leaves a partial ``final/``.
    """
    from aem_agent.grpo.run import prompt_layout
    from aem_agent.prompts import write_prompt_layout

    scratch = out.with_name(out.name + ".partial")
    shutil.rmtree(scratch, ignore_errors=True)
    trainer.model.save_pretrained(str(scratch))
    trainer.processing_class.save_pretrained(str(scratch))
    write_prompt_layout(scratch, prompt_layout(train_config))
    shutil.rmtree(out, ignore_errors=True)
    scratch.rename(out)
    return out
