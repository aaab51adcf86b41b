"""``--env-kwargs JSON``: extra env constructor arguments, one flag for every sub-command.

Why one place: ``aem play``, ``aem serve`` and ``aem sft`` all build envs from an id plus
keywords (``{"expert": "search"}``, ``{"engine": "upstream"}``); the flag must parse and fail
the same way in each. The parsed value is a ``dict``.
"""

from __future__ import annotations

import argparse

from aem_cli.arguments import json_object


def add_env_kwargs_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--env-kwargs",
        type=json_object,
        default="{}",
        help='JSON object of extra env constructor arguments, e.g. \'{"expert": "search"}\'',
    )
