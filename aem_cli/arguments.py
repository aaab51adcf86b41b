"""Checked argument types and the parser that reports a bad one in one line.

Why here, as argparse types: a value is refused while the command line is parsed, before a
sub-command builds an env, starts a browser or loads a model, so a typo costs nothing and
never ends in a traceback or after a progress bar. Each type's message says what was given
and what is accepted; :class:`Parser` adds where to read more.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any, NoReturn

from aem_envs.core.errors import ArgumentError


class UsageError(ArgumentError):
    """A command-line argument argparse refused (unknown flag, bad value, missing operand)."""


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (no usage block), raised not exited.

    ``aem``'s entry point prints every :class:`~aem_envs.core.errors.AEMError` as
    ``aem: error: <line>`` with exit status 2, the status argparse itself uses.
    """

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def at_least(minimum: int) -> Callable[[str], int]:
    """An integer type refusing values below ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


positive_int = at_least(1)
non_negative_int = at_least(0)


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number above 0 (a learning rate, a number of epochs)."""
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number of at least 0 (seconds, where 0 means "never")."""
    value = _number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def port(text: str) -> int:
    """A TCP port number a server can listen on (1-65535)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {value} is outside 1-65535")
    return value


def json_object(text: str) -> dict[str, Any]:
    """A JSON object (constructor keywords)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc}); pass e.g. '{{}}'") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(
            f"must be a JSON object, got {type(value).__name__}; pass e.g. '{{\"max_steps\": 20}}'"
        )
    return value


def policy_spec(text: str) -> str:
    """A ``--policy`` spec whose form is known and whose checkpoint directory exists."""
    from aem_agent.policies.loader import check_spec

    try:
        check_spec(text)
    except ArgumentError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text
