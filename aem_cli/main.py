"""Entry point of ``aem``: dispatches to one module per sub-command.

Each sub-command module defines ``add_parser(subparsers)`` and is imported only when the
distribution ships it, so ``aem`` starts fast and works with only some extras installed.
Arguments are checked while parsing (:mod:`aem_cli.arguments`), so a bad one is one line
before any env or model is built.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Sequence

from aem_cli.arguments import Parser
from aem_envs.core.errors import AEMError
from sandboxes.errors import SandboxError

SUBCOMMANDS: tuple[str, ...] = ("envs", "play", "serve", "bench", "train", "sft", "sandbox")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="aem",
        description="aem: Gymnasium environments, the AEM agent and a benchmark harness.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUBCOMMANDS:
        module_name = f"aem_cli.{name}"
        if importlib.util.find_spec(module_name) is not None:
            importlib.import_module(module_name).add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return int(args.func(args) or 0)
    except (AEMError, SandboxError) as exc:  # the two families of one-line errors
        print(f"aem: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("aem: interrupted", file=sys.stderr)
        return 130
