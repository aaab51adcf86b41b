"""The command-line flags ``aem train``, ``aem sft`` and ``aem bench`` share, defined once.

Why: train and sft start a training run from a model into an output directory that a later
run may resume or replace, and train and bench play episodes whose envs may live in Ray
actors; the same flag must mean the same thing, with the same help, everywhere.
"""

from __future__ import annotations

import argparse

from aem_cli.arguments import positive_float
from aem_envs.vector import LOCAL


def add_run_flags(
    parser: argparse.ArgumentParser,
    *,
    model: str | None = None,
    lr: float | None = None,
    seed: int | None = None,
    output_required: bool = False,
    overwrite: bool | None = None,
) -> None:
    """Add ``--model``, ``--lr``, ``--seed``, ``--output-dir``, ``--resume``, ``--overwrite``.

    The keywords are the defaults; ``None`` leaves a value to the run's config file.
    """
    parser.add_argument(
        "--model", default=model, help="'smollm2' (bundled, default) or a checkpoint directory"
    )
    parser.add_argument("--lr", type=positive_float, default=lr, help="learning rate")
    parser.add_argument(
        "--seed", type=int, default=seed, help="seed of tasks, sampling and initialisation"
    )
    parser.add_argument(
        "--output-dir", required=output_required, help="where checkpoints, model and metrics go"
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue from the newest checkpoint in --output-dir"
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        default=overwrite,
        help="replace an earlier run's outputs in --output-dir (without it a fresh run refuses)",
    )


def add_ray_flag(parser: argparse.ArgumentParser) -> None:
    """Add ``--ray [ADDRESS]`` (dest ``ray``): ``None`` without it, ``"local"`` alone."""
    parser.add_argument(
        "--ray",
        nargs="?",
        const=LOCAL,
        default=None,
        metavar="ADDRESS",
        help="play the envs in Ray actors: alone, on a local Ray started on loopback; with "
        "ADDRESS (auto, HOST:6379, ray://HOST:10001), on that cluster (needs aem[scale])",
    )
