"""``aem train``: train a policy on aem envs with AEM (or plain GRPO) on TRL.

Examples::

    aem train --config cpu-smoke.yaml --output-dir runs/smoke
    aem train aem/ALFWorld-v0 --model smollm2 --algo grpo --steps 20 --output-dir runs/grpo
    accelerate launch -m aem_cli train --config qwen2.5-1.5b-alfworld.yaml

Values given on the command line override the YAML file; ``--resume`` continues from the
newest checkpoint in the output directory, ``--overwrite`` replaces an earlier run there.
"""

from __future__ import annotations

import argparse
from typing import Any

from aem_cli.run_flags import add_run_flags

#: Command-line flag → training setting (AEMConfig field or driver key).
FLAG_SETTINGS: dict[str, str] = {
    "model": "model",
    "algo": "algo",
    "group_size": "num_generations",
    "steps": "max_steps",
    "lr": "learning_rate",
    "lam": "aem_lambda",
    "seed": "seed",
    "output_dir": "output_dir",
    "overwrite": "overwrite",
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
    parser.add_argument("--group-size", type=int, help="episodes per task (GRPO group size G)")
    parser.add_argument("--steps", type=int, help="optimizer steps to train")
    add_run_flags(parser)
    parser.add_argument("--lam", type=float, help="AEM strength λ (0 = GRPO)")
    parser.set_defaults(func=run)


def settings_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The YAML settings with the command-line values laid over them."""
    from aem_agent.train import load_settings

    settings = load_settings(args.config)
    if args.env_ids:
        settings["env_ids"] = list(args.env_ids)
    for flag, key in FLAG_SETTINGS.items():
        value = getattr(args, flag)
        if value is not None:
            settings[key] = value
    return settings


def run(args: argparse.Namespace) -> int:
    from aem_agent.train import train

    result = train(settings_from_args(args), resume=args.resume)
    print(f"trained to step {result.global_step}; outputs in {result.output_dir}")
    print(f"  metrics: {result.metrics_csv}")
    print(f"  plot:    {result.plot}")
    return 0
