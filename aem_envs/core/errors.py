"""Errors users meet, each phrased as one line that names the problem and the fix."""

from __future__ import annotations

import importlib
from types import ModuleType


class AEMError(Exception):
    """Base of the errors aem raises on purpose; the CLI prints them as one line."""


class MissingDependencyError(AEMError, ImportError):
    """An optional dependency of an environment or feature is not installed."""


class DataError(AEMError, ValueError):
    """User-given data (a path, a file, a field) is missing or malformed."""


def require(extra: str, module: str, *, feature: str) -> ModuleType:
    """Import ``module`` or raise one line naming the extra that provides it.

    Why: optional dependencies are imported lazily, so a user who installed only
    ``aem[webshop]`` gets told what to install instead of a traceback from deep inside.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{feature} needs the '{extra}' extra ({module} is not importable: {exc}); "
            f"install it with: pip install 'aem[{extra}]'"
        ) from exc
