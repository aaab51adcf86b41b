"""The errors the sandboxes package raises on purpose, each one line naming problem and fix.

Why its own family rather than aem's: ``sandboxes`` is the bottom floor of the stack
(``docs/architecture.md``) and imports nothing above it, as Gymnasium's ``error.py`` sits
under everything else. The ``aem`` command line prints these and aem's own errors alike.
"""

from __future__ import annotations

import importlib
from types import ModuleType


class SandboxError(Exception):
    """A sandbox could not be created, or an operation on it failed."""


class SandboxFileError(SandboxError, OSError):
    """A file operation inside the sandbox failed (missing file, a directory, no permission)."""


class SandboxDataError(SandboxError, ValueError):
    """A path or file given to the image builders is missing or of the wrong kind."""


class SandboxDependencyError(SandboxError, ImportError):
    """A package a backend needs (the docker SDK) is not installed."""


def require(module: str, *, feature: str, install: str) -> ModuleType:
    """Import ``module`` or raise one line naming ``install``, the command that provides it."""
    try:
        return importlib.import_module(module)
    except Exception as exc:  # a half-installed package fails with other errors too
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise SandboxDependencyError(
            f"{feature} needs {module} ({reason}); install it with: {install}"
        ) from exc
