"""Does the task exercise AEM's mechanism? Measured on the start checkpoint, before any RL.

AEM weighs each turn-response by its mean token entropy H̄ inside its GRPO group. That weight
says "how typical was this response" only if, inside a group, H̄ rises with the response's
surprisal S̄ (mean −log π per token); and it only acts on groups whose H̄ range reaches the
0.1-nat gate. So, on groups of episodes sampled from the start (the same task and seed, G
episodes each, as in training), this reports:

* ``within_group_correlation``: Pearson correlation of H̄ with S̄ over every unit, each
  centred on its group's mean (so differences between tasks do not count);
* ``first_turn_correlation``: the same over first turns only, where every member of a group
  saw the same state, so any link is the sampled response's own;
* ``hbar_range_median`` / ``hbar_range_mean``: the H̄ range (max − min) inside groups;
* ``gated_share``: the share of groups whose range is under the gate (α = 1 for all there).

:func:`alpha_by_command` breaks the same groups' α down by the command a reply sent (its first
word), whether the env refused it and whether its episode was won: which replies AEM weighs
up or down before any RL. ``python -m benchmarks.learning.taskcheck CONFIG START --groups N``
prints that table.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import TYPE_CHECKING, Any, cast

from benchmarks.actionmix import reply_command
from benchmarks.learning.config import LearningConfig, load_config
from benchmarks.learning.experiment import configure_torch, run_settings
from benchmarks.learning.heldout import isolated_rng

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from aem_agent.rollout.groups import MultiTurnRollout
    from aem_agent.rollout.records import Episode

#: First reset seed of the checked groups: far from the training draws and the warm-up's.
_SEED_BASE = 3_000_000


def task_check(
    config: LearningConfig, start_dir: Path, scratch: Path, *, groups: int = 40, seed: int = 0
) -> dict[str, Any]:
    """Play ``groups`` GRPO groups from the start on training tasks; return the check."""
    grouped, size, _, gate = play_groups(config, start_dir, scratch, groups=groups, seed=seed)
    return {
        "groups": groups,
        "group_size": size,
        "gate": gate,
        **group_statistics(grouped, gate=gate),
    }


def play_groups(
    config: LearningConfig, start_dir: Path, scratch: Path, *, groups: int, seed: int = 0
) -> tuple[list[list[Episode]], int, float, float]:
    """``groups`` GRPO groups sampled from the start on training tasks (as a training step
    samples them), the group size and AEM's λ and gate of the grid's training settings."""
    from aem_agent.grpo.run import build_config, build_trainer
    from aem_agent.rollout.records import EpisodeSpec
    from aem_agent.rollout.samplers import model_generator

    train_config = build_config(run_settings(config, "grpo", 0, scratch, save_strategy="no")).config
    trainer = build_trainer(train_config, start_dir)
    rollout = cast("MultiTurnRollout", trainer.rollout_func)
    size = int(train_config.num_generations or 1)
    specs = [
        EpisodeSpec(config.env_id, _SEED_BASE + g, config.train_split)
        for g in range(groups)
        for _ in range(size)
    ]
    generate = model_generator(
        cast("PreTrainedModel", trainer.model),
        cast("PreTrainedTokenizerBase", trainer.processing_class),
        trainer.generation_config,
        max_new_tokens=train_config.max_turn_tokens,
    )
    try:
        with isolated_rng(seed):
            episodes = rollout.play(specs, generate)
    finally:
        rollout.close()
    grouped = [episodes[g * size : (g + 1) * size] for g in range(groups)]
    return grouped, size, float(train_config.aem_lambda), float(train_config.aem_min_range)


def alpha_by_command(
    groups: Sequence[Sequence[Episode]], *, lam: float, gate: float
) -> list[dict[str, Any]]:
    """Per (command, refused, won): turns, mean H̄ and mean AEM weight α (each group's α as
    the trainer computes it at ``lam`` and ``gate``), most turns first."""
    import torch

    from aem_agent.credit.modulation import group_alpha

    units = [
        (g, pair[0], turn, episode.won)
        for g, episodes in enumerate(groups)
        for episode in episodes
        for turn in episode.turns
        if (pair := _hbar_surprisal(turn)) is not None
    ]
    if not units:
        return []
    alpha, _ = group_alpha(
        torch.tensor([h for _, h, _, _ in units]),
        torch.tensor([g for g, _, _, _ in units]),
        torch.ones(len(units), dtype=torch.bool),
        lam=lam,
        min_range=gate,
    )
    cells: dict[tuple[str, bool, bool], list[tuple[float, float]]] = defaultdict(list)
    for (_, hbar, turn, won), a in zip(units, alpha.tolist(), strict=True):
        key = (reply_command(turn.text), not turn.action_valid, won)
        cells[key].append((hbar, a))
    rows = [
        {
            "command": key[0],
            "refused": key[1],
            "won": key[2],
            "turns": len(cell),
            "hbar": statistics.fmean(h for h, _ in cell),
            "alpha": statistics.fmean(a for _, a in cell),
        }
        for key, cell in cells.items()
    ]
    return sorted(rows, key=lambda r: (-r["turns"], r["command"], r["refused"], r["won"]))


def alpha_table(rows: Sequence[dict[str, Any]], *, least: int = 1) -> str:
    """Markdown of :func:`alpha_by_command`'s rows with at least ``least`` turns."""
    lines = [
        "| command | refused | episode | turns | mean H̄ | mean α |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["turns"] >= least:
            lines.append(
                f"| `{r['command'] or '?'}` | {'yes' if r['refused'] else 'no'} "
                f"| {'won' if r['won'] else 'lost'} | {r['turns']} | {r['hbar']:.3f} "
                f"| {r['alpha']:.3f} |"
            )
    return "\n".join(lines)


def group_statistics(groups: Sequence[Sequence[Episode]], *, gate: float) -> dict[str, Any]:
    """The check's numbers for played groups (see the module docstring)."""
    centred: list[tuple[float, float]] = []
    first: list[tuple[float, float]] = []
    ranges: list[float] = []
    for episodes in groups:
        units = [(ep_turn, turn) for ep in episodes for ep_turn, turn in enumerate(ep.turns)]
        pairs = [p for _, turn in units if (p := _hbar_surprisal(turn)) is not None]
        if not pairs:
            continue
        ranges.append(max(h for h, _ in pairs) - min(h for h, _ in pairs))
        centred += _centre(pairs)
        first += _centre([p for i, t in units if i == 0 and (p := _hbar_surprisal(t))])
    return {
        "units": len(centred),
        "within_group_correlation": _correlation(centred),
        "first_turn_correlation": _correlation(first),
        "hbar_range_median": statistics.median(ranges) if ranges else None,
        "hbar_range_mean": statistics.fmean(ranges) if ranges else None,
        "gated_share": sum(r < gate for r in ranges) / len(ranges) if ranges else None,
    }


def _hbar_surprisal(turn: Any) -> tuple[float, float] | None:
    entropies, logprobs = turn.reply.entropies, turn.reply.logprobs
    if not entropies:
        return None
    return statistics.fmean(entropies), -statistics.fmean(logprobs)


def _centre(pairs: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    if not pairs:
        return []
    mh = statistics.fmean(h for h, _ in pairs)
    ms = statistics.fmean(s for _, s in pairs)
    return [(h - mh, s - ms) for h, s in pairs]


def _correlation(pairs: Sequence[tuple[float, float]]) -> float | None:
    if len(pairs) < 3:
        return None
    try:
        return statistics.correlation([h for h, _ in pairs], [s for _, s in pairs])
    except statistics.StatisticsError:  # no spread at all
        return None


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.learning.taskcheck",
        description="AEM's weights per command on groups sampled from a start checkpoint.",
    )
    parser.add_argument("config", type=Path, help="a learning config (its env and settings)")
    parser.add_argument("start", type=Path, help="the start checkpoint (runs/small-start/act)")
    parser.add_argument("--groups", type=int, default=16, help="GRPO groups to sample")
    parser.add_argument(
        "--lam", type=float, default=None, help="AEM's λ (default: the config's training λ)"
    )
    parser.add_argument("--least", type=int, default=20, help="hide cells with fewer turns")
    args = parser.parse_args(argv)
    if not (args.start / "config.json").is_file():
        parser.error(f"{args.start} holds no config.json: give a checkpoint folder")
    config = load_config(args.config)
    configure_torch(config.train.get("torch_threads"))
    with TemporaryDirectory() as scratch:
        groups, _, lam, gate = play_groups(config, args.start, Path(scratch), groups=args.groups)
    lam = lam if args.lam is None else args.lam
    print(alpha_table(alpha_by_command(groups, lam=lam, gate=gate), least=args.least))


if __name__ == "__main__":
    main()
