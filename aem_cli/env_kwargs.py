"""``--env-kwargs JSON``: extra env constructor arguments, one flag for every sub-command.

Why one place: ``aem play``, ``aem serve`` and ``aem sft`` all build envs from an id plus
keywords (``{"expert": "search"}``, ``{"engine": "upstream"}``); the flag must parse and fail
the same way in each.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from aem_envs.core.errors import ArgumentError


def add_env_kwargs_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--env-kwargs",
        default="{}",
        help='JSON object of extra env constructor arguments, e.g. \'{"expert": "search"}\'',
    )


def parse_env_kwargs(text: str) -> dict[str, Any]:
    """The JSON object ``text``, or a one-line error naming the flag and the expected shape."""
    try:
        kwargs = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ArgumentError(f"--env-kwargs is not valid JSON ({exc}); pass e.g. '{{}}'") from exc
    if not isinstance(kwargs, dict):
        raise ArgumentError(
            f"--env-kwargs must be a JSON object, got {type(kwargs).__name__}; "
            "pass e.g. '{\"max_steps\": 20}'"
        )
    return kwargs
