"""How much each estimator setting changes one rollout batch's update, from a start checkpoint.

Why: DAPO's clip-higher and GSPO's sequence-level ratio act only through the policy ratio,
which is 1 on a batch's first optimizer step; this measures, on the real task and start, which
settings leave the update as GRPO's and which change it (docs/small-agent.md, "DAPO and GSPO
arms"). Every setting trains the same batch: same seed, so the same episodes, and the same
weights until the first update. Run from the repository root::

    python -m benchmarks.learning.estimator_updates runs/small-start/act --episodes 16 --turns 10

It prints, per setting, the change of its weight update against its control's
(‖Δ − Δ_control‖ / ‖Δ_control‖) and the clipped shares TRL logged for each optimizer step.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from aem_agent.rollout.groups import MultiTurnRollout

#: (setting, its train settings, the setting it is compared with). The arms' settings are
#: the small-agent grid's own (``alfworld-small.yaml``).
ONE_UPDATE = "grpo, 1 update"
#: The update counts, set on every row: the grid's GRPO and AEM arms train in 4 mini-batches
#: themselves, so a row that left them unset would get the arm's.
ONE = {"steps_per_generation": 1, "gradient_accumulation_steps": 1}
FOUR_UPDATES = {"steps_per_generation": 4, "gradient_accumulation_steps": 1}


def comparisons(config: Any) -> list[tuple[str, dict[str, Any], str]]:
    arm = {name: dict(config.arm(name).train) for name in ("dapo", "gspo")}
    for settings in arm.values():
        settings.pop("per_device_train_batch_size")  # set from --episodes
    return [
        (ONE_UPDATE, dict(ONE), ONE_UPDATE),
        ("grpo, 1 update, again", dict(ONE), ONE_UPDATE),  # the same batch: 0 if deterministic
        ("epsilon_high 0.28, 1 update", {**ONE, "epsilon_high": 0.28}, ONE_UPDATE),
        ("sequence ratio, 1 update", {**ONE, "importance_sampling_level": "sequence"}, ONE_UPDATE),
        ("grpo (row-mean) loss, 1 update", {**ONE, "loss_type": "grpo"}, ONE_UPDATE),
        ("grpo, 4 updates", dict(FOUR_UPDATES), ONE_UPDATE),
        ("dapo arm", arm["dapo"], "grpo, 4 updates"),
        ("grpo (row-mean) loss, 4 updates", {**FOUR_UPDATES, "loss_type": "grpo"}, ONE_UPDATE),
        ("gspo arm", arm["gspo"], "grpo (row-mean) loss, 4 updates"),
    ]


def batch_update(
    config: Any, start: Path, settings: dict[str, Any], *, algo: str, episodes: int, turns: int
) -> tuple[Any, list[dict[str, float]]]:
    """The weight change after one rollout batch trained with ``settings``, and the clip
    metrics TRL logged for each of its optimizer steps."""
    import torch

    from aem_agent.grpo.run import build_config, build_trainer
    from benchmarks.learning.experiment import run_settings

    with TemporaryDirectory() as scratch:
        values = run_settings(config, algo, 0, Path(scratch), save_strategy="no", **settings)
        updates = build_config(values).config.updates_per_batch
        values.update(
            max_steps=updates,
            logging_steps=1,
            max_turns=turns,
            per_device_train_batch_size=episodes // updates,
        )
        setup = build_config(values)
        trainer = build_trainer(setup.config, start, model=setup.model)
        before = [p.detach().clone() for p in trainer.model.parameters()]
        rollout = cast("MultiTurnRollout", trainer.rollout_func)  # the one the trainer built
        try:
            trainer.train()
        finally:
            rollout.close()
        change = [
            (p.detach() - b).flatten()
            for p, b in zip(trainer.model.parameters(), before, strict=True)
        ]
    wanted = ("clip_ratio/low_mean", "clip_ratio/high_mean")
    clips = [
        {k: round(v, 5) for k, v in row.items() if k in wanted}
        for row in trainer.state.log_history
        if "loss" in row
    ]
    return torch.cat(change), clips


def main(argv: list[str] | None = None) -> int:
    from benchmarks.learning.config import load_config
    from benchmarks.learning.experiment import configure_torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("start", type=Path, help="the start checkpoint (runs/small-start/act)")
    parser.add_argument("--config", default="alfworld-small.yaml")
    parser.add_argument("--episodes", type=int, default=16, help="per batch, groups of 8")
    parser.add_argument("--turns", type=int, default=10, help="most turns per episode")
    parser.add_argument("--algo", default="aem", choices=["aem", "grpo"])
    args = parser.parse_args(argv)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    config = load_config(args.config)
    configure_torch(config.train.get("torch_threads"))
    changes: dict[str, Any] = {}
    report: dict[str, dict[str, Any]] = {}
    for name, settings, control in comparisons(config):
        changes[name], clips = batch_update(
            config, args.start, settings, algo=args.algo, episodes=args.episodes, turns=args.turns
        )
        base = changes[control]
        report[name] = {
            "against": control,
            "change": float((changes[name] - base).norm() / base.norm()),
            "update_norm": float(changes[name].norm()),
            "clipped_per_update": clips,
        }
        print(name, json.dumps(report[name]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
