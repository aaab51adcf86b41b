"""Errors users meet, each phrased as one line that names the problem and the fix."""

from __future__ import annotations

import importlib
from types import ModuleType

from gymnasium.error import ClosedEnvironmentError

from sandboxes.errors import exception_line
from sandboxes.errors import require as require_module


class AEMError(Exception):
    """Base of the errors aem raises on purpose; the CLI prints them as one line."""


class MissingDependencyError(AEMError, ImportError):
    """An optional dependency of an environment or feature is not installed."""


class DataError(AEMError, ValueError):
    """User-given data (a path, a file, a field) is missing or malformed."""


class ArgumentError(AEMError, ValueError):
    """A constructor argument or reset option has the wrong value or the wrong type.

    Why not also ``TypeError``: ``gym.make`` re-raises a ``TypeError`` from a constructor
    with its keyword arguments appended, which would bury the one-line message.
    """


class EnvClosedError(AEMError, ClosedEnvironmentError):
    """``reset`` or ``step`` on an environment after its ``close()``."""


class NoExpertAction(AEMError):
    """The env's expert has no action for the current state (it failed or does not exist)."""


#: Packages an extra needs that must be installed with ``pip install --no-deps``: their
#: declared dependencies (spaCy and more) are not needed and are left out of the extra, so
#: ``pip install 'aem[EXTRA]'`` alone does not bring them. ``scripts/install.sh`` installs
#: the same pins (tested).
NO_DEPS_PACKAGES: dict[str, tuple[str, ...]] = {
    "alfworld": ("alfworld==0.4.2", "textworld==1.7.0", "jericho==3.3.1"),
    # Its declared dependencies add gradio, openai and a CLI; the server and client need
    # what the extra lists (fastapi, uvicorn, websockets, fastmcp's client).
    "scale": ("openenv-core==0.3.0",),
}


def install_command(extra: str) -> str:
    """The shell command that makes ``extra`` work, exactly as a user should type it."""
    command = f"pip install 'aem[{extra}]'"
    no_deps = NO_DEPS_PACKAGES.get(extra)
    if no_deps:
        command += " && pip install --no-deps " + " ".join(no_deps)
    return command


def require(extra: str, module: str, *, feature: str) -> ModuleType:
    """Import ``module`` or raise one line naming the command that installs ``extra``.

    Why: optional dependencies are imported lazily, so a user who installed only
    ``aem[webshop]`` gets told what to install instead of a traceback from deep inside.
    """
    return require_module(
        module,
        feature=feature,
        install=install_command(extra),
        needs=f"the '{extra}' extra",
        error=MissingDependencyError,
    )


def import_problem(module: str) -> str | None:
    """Why ``module`` does not import here (one line), or ``None`` when it does.

    Readiness is judged by really importing, not by ``find_spec``: a package can be present
    yet fail to import (a ``--no-deps`` install missing a dependency).
    """
    try:
        importlib.import_module(module)
    except Exception as exc:
        return f"{module}: {exception_line(exc)}"
    return None
