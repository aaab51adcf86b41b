"""Choosing a learning grid's start on the training split alone.

Why: a grid can only compare arms that learn, so its start must leave RL something to gain
("often right by its most likely reply, but needs exploration to do better") while the task
check still holds; and since every run is scored on the held-out split, the start must be
chosen without it. This measures a candidate start — built as :func:`~benchmarks.learning.
start.build_start` builds a grid's, minus the held-out score — on training tasks only:

* ``train_greedy`` (greedy play) and ``train_sampled`` (exact success of the sampling
  policy, :mod:`benchmarks.learning.exact`) on ``tasks`` training tasks;
* the task check (:mod:`benchmarks.learning.taskcheck`);
* with ``--rl-steps N``: the exact sampled training success after N steps of a run from the
  start (the config's own ``train`` settings plus ``--rl-set`` ones; seed 100 by default,
  no grid's seed), and that run's per-step training success and entropy.

Every candidate is the config with ``--set`` overrides (``warmup.steps=300``), so the grid's
config is the chosen candidate spelled out::

    python -m benchmarks.learning.startsearch CONFIG --out DIR --set warmup.steps=300 \\
        [--rl-steps 60 [--rl-set entropy_coef=0.05]]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import yaml

from benchmarks.learning.config import START_DIR, ExperimentError, LearningConfig, parse_config
from benchmarks.learning.experiment import configure_torch, run_settings
from benchmarks.learning.heldout import ensure_env, evaluate

if TYPE_CHECKING:
    from aem_agent.rollout.groups import MultiTurnRollout

#: First reset seed of the scored training tasks: far from the warm-up's, the start probe's
#: and the task check's draws.
_SEED_BASE = 5_000_000
#: The short run's seed: none of a grid's.
SHORT_RUN_SEED = 100


def with_overrides(data: Mapping[str, Any], sets: Sequence[str]) -> dict[str, Any]:
    """``data`` (a learning config's mapping) with each ``section.key=value`` set (the value
    read as YAML: ``warmup.steps=300``, ``env.kwargs.n_wanted=2``)."""
    out = copy.deepcopy(dict(data))
    for item in sets:
        path, sep, raw = item.partition("=")
        keys = path.split(".")
        if not sep or not all(keys):
            raise ExperimentError(f"--set {item!r}: write section.key=value (warmup.steps=300)")
        node = out
        for key in keys[:-1]:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise ExperimentError(f"--set {item!r}: {key} is not a section")
        node[keys[-1]] = yaml.safe_load(raw)
    return out


def train_success(
    config: LearningConfig, start_dir: Path, scratch: Path, *, tasks: int = 128
) -> dict[str, float]:
    """Greedy and exact sampled success of the start on ``tasks`` training tasks."""
    trainer, specs = _trainer(config, start_dir, scratch, tasks=tasks)
    try:
        sampled = evaluate(
            trainer, specs, temperature=config.eval_temperature or 1.0, seed=0, method="exact"
        )
        greedy = evaluate(trainer, specs, temperature=0.0, seed=0, method="play")
    finally:
        cast("MultiTurnRollout", trainer.rollout_func).close()
    return {
        "train_greedy": greedy["heldout/success_rate"],
        "train_greedy_valid": greedy["heldout/valid_rate"],
        "train_sampled": sampled["heldout/success_rate"],
        "train_offlist_mass": sampled["heldout/offlist_mass"],
    }


def short_run(
    config: LearningConfig,
    start_dir: Path,
    scratch: Path,
    *,
    steps: int,
    train: Mapping[str, Any] | None = None,
    seed: int = SHORT_RUN_SEED,
    tasks: int = 128,
) -> dict[str, Any]:
    """Train ``steps`` steps from the start (GRPO unless ``train`` says ``algo``); return the
    exact sampled training success before and after, and the per-step training curve."""
    overrides = dict(train or {})
    algo = str(overrides.pop("algo", "grpo"))
    trainer, specs = _trainer(
        config, start_dir, scratch, tasks=tasks, algo=algo, seed=seed, max_steps=steps, **overrides
    )
    temperature = config.eval_temperature or 1.0
    try:
        before = evaluate(trainer, specs, temperature=temperature, seed=0, method="exact")
        trainer.train()
        after = evaluate(trainer, specs, temperature=temperature, seed=0, method="exact")
    finally:
        cast("MultiTurnRollout", trainer.rollout_func).close()
    logged = [h for h in trainer.state.log_history if "episode/success_rate" in h]
    return {
        "steps": steps,
        "seed": seed,
        "algo": algo,
        "train": overrides,
        "train_sampled_before": before["heldout/success_rate"],
        "train_sampled_after": after["heldout/success_rate"],
        "curve_success": [float(h["episode/success_rate"]) for h in logged],
        "curve_entropy": [float(h["entropy"]) for h in logged if "entropy" in h],
    }


def _trainer(
    config: LearningConfig,
    start_dir: Path,
    scratch: Path,
    *,
    tasks: int,
    algo: str = "grpo",
    seed: int = 0,
    **overrides: Any,
) -> tuple[Any, list[Any]]:
    """A trainer from the start with one run's settings (as the grid builds it), and the
    scored training tasks."""
    from aem_agent.grpo.run import build_config, build_trainer
    from aem_agent.rollout.records import EpisodeSpec

    ensure_env(config.env_id)
    settings = run_settings(config, algo, seed, scratch, save_strategy="no", **overrides)
    setup = build_config(settings)
    configure_torch(setup.run.torch_threads)
    trainer = build_trainer(setup.config, start_dir, model=setup.model)
    specs = [EpisodeSpec(config.env_id, _SEED_BASE + i, config.train_split) for i in range(tasks)]
    return trainer, specs


def probe(
    config: LearningConfig,
    root: Path,
    *,
    tasks: int = 128,
    rl_steps: int = 0,
    rl_train: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Build the candidate start in ``root`` (once) and measure it on the training split."""
    from benchmarks.learning.start import build_start
    from benchmarks.learning.taskcheck import task_check

    start_dir = root / START_DIR
    start = build_start(config, start_dir, log=lambda _: None, score_heldout=False)
    result: dict[str, Any] = {
        "warmup": config.warmup,
        "model": config.model,
        "env_kwargs": config.env_kwargs,
        "start": start.get("warmup"),
        "task_check": task_check(config, start_dir, root / ".scratch"),
        **train_success(config, start_dir, root / ".scratch", tasks=tasks),
    }
    if rl_steps:
        result["short_run"] = short_run(
            config, start_dir, root / ".scratch", steps=rl_steps, train=rl_train, tasks=tasks
        )
    shutil.rmtree(root / ".scratch", ignore_errors=True)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    from aem_envs.core.io import atomic_write_json
    from benchmarks.learning.config import load_config

    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    parser.add_argument("config", help="a learning config (the candidate's base)")
    parser.add_argument("--out", type=Path, required=True, help="folder of this candidate")
    parser.add_argument("--set", action="append", default=[], help="section.key=value")
    parser.add_argument("--tasks", type=int, default=128, help="training tasks scored")
    parser.add_argument("--rl-steps", type=int, default=0, help="steps of the short run")
    parser.add_argument("--rl-set", action="append", default=[], help="train key=value")
    args = parser.parse_args(argv)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    base = load_config(args.config)
    data = yaml.safe_load(Path(base.source).read_text(encoding="utf-8"))
    config = parse_config(with_overrides(data, args.set), source=base.source)
    rl_train = with_overrides({}, args.rl_set)
    result = {
        "config": base.source,
        "set": args.set,
        "rl_set": args.rl_set,
        **probe(config, args.out, tasks=args.tasks, rl_steps=args.rl_steps, rl_train=rl_train),
    }
    atomic_write_json(args.out / "probe.json", result)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
