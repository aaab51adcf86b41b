"""Checked argument types and the parser that reports a bad one in one line.

Why here, as argparse types: a value is refused while the command line is parsed, before a
sub-command builds an env, starts a browser or loads a model, so a typo costs nothing and
never ends in a traceback or after a progress bar. Each type's message says what was given
and what is accepted; :class:`Parser` adds where to read more.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from aem_envs.core.errors import ArgumentError, MissingDependencyError
from aem_envs.core.yaml_file import read_settings

try:  # TRL's parser, where the agent extra is installed: aem train and aem sft are built on it
    from trl import TrlParser as _BaseParser
except ImportError:  # the base install: aem envs, play, serve and bench need only argparse
    _BaseParser = argparse.ArgumentParser  # type: ignore[misc,assignment]


class UsageError(ArgumentError):
    """A command-line argument argparse refused (unknown flag, bad value, missing operand)."""


class Parser(_BaseParser):
    """An ``ArgumentParser`` whose errors are one line (no usage block), raised not exited;
    TRL's parser, so a sub-command's flags may be the fields of dataclasses (``aem train``,
    ``aem sft``), with a YAML file of them given by ``--config`` (TRL's ``TrlParser``).

    ``aem``'s entry point prints every :class:`~aem_envs.core.errors.AEMError` as
    ``aem: error: <line>`` with exit status 2, the status argparse itself uses.

    Why ``setup``: the dataclasses of ``aem train`` import torch and TRL's trainers (seconds);
    ``aem envs`` must not pay for them, so a sub-command's flags are added by ``setup(parser)``
    the first time that sub-command's parser is used (to parse or to print its help).
    """

    def __init__(self, *, setup: Callable[[Parser], None] | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.dataclass_types: list[Any] = getattr(self, "dataclass_types", [])
        self._setup = setup
        #: Where ``--config NAME`` finds a YAML file that is not a path.
        self.configs_dir: Path | None = None
        #: Gives a YAML file's old setting names the names of the fields they now are.
        self.rename: Callable[[Mapping[str, Any]], dict[str, Any]] = dict

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")

    def _ready(self) -> None:
        if self._setup is not None:
            setup, self._setup = self._setup, None
            try:
                setup(self)
            except ModuleNotFoundError as exc:  # a base install: no torch, TRL, transformers
                raise MissingDependencyError(
                    f"`{self.prog}` needs {exc.name!r}, which is not installed; install the "
                    "agent extra: pip install 'aem[agent]' (scripts/install.sh installs all)"
                ) from None

    def add_dataclasses(self, *types: Any) -> None:
        """Add the fields of ``types`` as flags (what ``HfArgumentParser(types)`` does)."""
        self.dataclass_types = [*self.dataclass_types, *types]
        for dtype in types:
            self._add_dataclass_arguments(dtype)
        for action in self._actions:  # --output-dir first: the spelling of aem's other flags
            action.option_strings = sorted(action.option_strings, key=lambda o: "_" in o)

    def add_short_flags(self, flags: Mapping[str, tuple[str, Callable[[str], Any]]]) -> None:
        """Add short flags (``--lr``) of dataclass fields, each with a checked type:
        flag → (field, type)."""
        for flag, (dest, kind) in flags.items():
            short = f"short for --{dest.replace('_', '-')}"
            self.add_argument(flag, dest=dest, type=kind, default=argparse.SUPPRESS, help=short)

    def format_help(self) -> str:
        self._ready()
        return super().format_help()

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse ``args``; a ``--config FILE`` among them sets the defaults of the other flags
        first (TRL's ``parse_args_and_config``, with the bundled-file fallback)."""
        self._ready()
        args = [part for arg in (sys.argv[1:] if args is None else args) for part in _split(arg)]
        if self.dataclass_types and "--config" in args:
            at = args.index("--config")
            if at + 1 >= len(args):
                self.error("argument --config: expected a YAML file")
            self.set_settings(self.read_config(args[at + 1]))
            del args[at : at + 2]
        return super().parse_known_args(args, namespace)

    def read_config(self, path: str) -> dict[str, Any]:
        """The settings of YAML file ``path`` (or of the bundled file of that name)."""
        bundled = self.configs_dir or Path(path).parent
        return read_settings(path, bundled=bundled, what=f"{self.prog} config")

    def set_settings(self, settings: Mapping[str, Any]) -> None:
        """Make ``settings`` (field name → value) the defaults of their flags; an unknown name
        is one line naming it (TRL's ``set_defaults_with_config``)."""
        settings = self.rename(settings)
        unknown = sorted(set(settings) - {a.dest for a in self._actions})
        if unknown:
            self.error(
                f"unknown setting(s) {unknown} in the config; `{self.prog} --help` lists them"
            )
        self.set_defaults_with_config(**settings)

    def retype(self, types: Mapping[str, Callable[[str], Any]]) -> None:
        """Give the flags of these fields a checked type of this module instead of the field's
        own (``int``, ``dict``), so a bad value is refused in the same words everywhere."""
        for action in self._actions:
            if action.dest in types and action.option_strings:
                action.type = types[action.dest]


def _split(arg: str) -> list[str]:
    """``--config=FILE`` as ``--config FILE``; any other argument as it is."""
    return arg.split("=", 1) if arg.startswith("--config=") else [arg]


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
