"""The errors the sandboxes package raises on purpose, each one line naming problem and fix.

Why its own family rather than aem's: ``sandboxes`` is the bottom floor of the stack
(``docs/architecture.md``) and imports nothing above it, as Gymnasium's ``error.py`` sits
under everything else. The ``aem`` command line prints these and aem's own errors alike, and
aem's own :func:`require` is this one raising its own error class.
"""

from __future__ import annotations

import importlib
from types import ModuleType


class SandboxError(Exception):
    """A sandbox could not be created, or an operation on it failed."""


class InfraError(SandboxError):
    """The machinery failed, not the agent: an engine unreachable or timing out, a container
    that vanished, an image missing or failing to build, grading that ran out of time.

    Why its own class: a caller that scores agents must report these apart from the agent's
    failures (no reward either way), where any other :class:`SandboxError` is the agent's
    doing or a usage error. ``kind`` is one short word (``engine``, ``container``,
    ``image``, ``sandbox``, ``timeout``).
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class SandboxFileError(SandboxError, OSError):
    """A file operation inside the sandbox failed (missing file, a directory, no permission)."""


class SandboxDataError(SandboxError, ValueError):
    """A path or file given to the image builders is missing or of the wrong kind."""


class SandboxDependencyError(SandboxError, ImportError):
    """A package a backend needs (the docker SDK) is not installed."""


def exception_line(exc: BaseException) -> str:
    """``exc``'s message on one line, or its type's name when it has none."""
    return " ".join(str(exc).split()) or type(exc).__name__


def require(
    module: str,
    *,
    feature: str,
    install: str,
    needs: str | None = None,
    error: type[ImportError] = SandboxDependencyError,
) -> ModuleType:
    """Import ``module`` or raise ``error``: one line naming ``install``, the command that fixes it.

    ``needs`` names what the user lacks when that is more than the module itself (an extra of
    a distribution); the message then says which module failed. Any exception counts as "not
    importable": a half-installed package fails with errors other than ``ImportError``.
    """
    try:
        return importlib.import_module(module)
    except Exception as exc:
        reason = exception_line(exc)
        missing = (
            f"{module} ({reason})"
            if needs is None
            else f"{needs} ({module} is not importable: {reason})"
        )
        raise error(f"{feature} needs {missing}; install it with: {install}") from exc
