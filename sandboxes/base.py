"""The sandbox contract shared by every backend: results, limits and the abstract class.

A sandbox is one isolated machine image with a repository at ``workdir`` (``/testbed`` for
SWE-bench). Commands run one at a time; each is killed at its time limit together with
everything it started, so no process outlives the command that spawned it — what persists
between commands is the file system, never a process.
"""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Self

from .errors import SandboxError, SandboxFileError

__all__ = ["MAX_FILE_BYTES", "ExecResult", "Limits", "Sandbox", "SandboxError", "SandboxFileError"]


@dataclass(frozen=True)
class ExecResult:
    """Outcome of one command.

    Unpacks as exactly ``(exit_code, output)`` so callers can write
    ``code, output = sandbox.exec(cmd)``. ``output`` is stdout and stderr interleaved as a
    terminal shows them, decoded safely and clipped head+tail; ``clipped_bytes`` says how much
    was cut (the text says it too). ``timed_out`` is true when the command was killed at its
    time limit (its exit code is then 137, as for any SIGKILL).
    """

    exit_code: int
    output: str
    clipped_bytes: int = 0
    timed_out: bool = False

    def __iter__(self) -> Iterator[int | str]:
        return iter((self.exit_code, self.output))


@dataclass(frozen=True)
class Limits:
    """Resource bounds of a sandbox.

    The defaults fit an SWE-bench test run of a small or medium Python project on a laptop
    while keeping a runaway command (fork bomb, memory bomb, 50 MB of output, a file filling
    the disk) from hurting the host.

    memory: hard memory limit, swap included (Docker syntax, e.g. ``"2g"``); a process that
        exceeds it is killed (exit 137), the sandbox survives.
    pids: maximum number of processes and threads.
    cpus: CPU share (``1.0`` = one core).
    command_timeout: seconds a command may run when ``exec`` gets no ``timeout``.
    output_chars: characters of output kept per command (half from the head, half from the
        tail).
    file_size: the largest file a command may write (``RLIMIT_FSIZE``), in bytes; bounds the
        usual disk-filling write where no disk quota exists.
    tmp_size: size of the in-memory ``/tmp`` (Docker syntax); counted against ``memory``.
    """

    memory: str = "2g"
    pids: int = 512
    cpus: float = 1.0
    command_timeout: float = 60.0
    output_chars: int = 10_000
    file_size: int = 1 << 30
    tmp_size: str = "512m"

    def __post_init__(self) -> None:
        if self.pids < 16:
            raise SandboxError(f"Limits.pids={self.pids} is too small; use at least 16")
        if self.cpus <= 0 or self.command_timeout <= 0:
            raise SandboxError("Limits.cpus and Limits.command_timeout must be positive")
        if self.output_chars < 100:
            raise SandboxError(f"Limits.output_chars={self.output_chars}; use at least 100")
        if self.file_size < 1 << 20:
            raise SandboxError(f"Limits.file_size={self.file_size}; use at least 1 MiB")
        for name in ("memory", "tmp_size"):
            try:
                memory_bytes(getattr(self, name))
            except SandboxError as exc:
                raise SandboxError(f"Limits.{name}: {exc}") from None

    @property
    def memory_bytes(self) -> int:
        return memory_bytes(self.memory)


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def memory_bytes(size: str) -> int:
    """Parse a Docker-style size (``"512m"``, ``"2g"``, ``"1048576"``) into bytes."""
    text = str(size).strip().lower()
    unit = text[-1] if text and text[-1].isalpha() else ""
    number = text[: -len(unit)] if unit else text
    if unit not in _UNITS or not number.isdigit() or int(number) == 0:
        raise SandboxError(f"cannot read the size {size!r}; write it like '512m' or '2g'")
    return int(number) * _UNITS[unit]


# Bytes that ``read_file`` and ``diff`` return at most: they feed editors and graders, which
# need whole files, yet a multi-gigabyte file must not be pulled into memory.
MAX_FILE_BYTES = 16 << 20


class Sandbox(ABC):
    """An isolated Linux user space with a working directory, usable as a context manager.

    Backends implement :meth:`_run` (bounded command execution) and :meth:`write_file`;
    reading files and taking the diff are built on :meth:`_run` here, once.
    """

    backend: str = "abstract"

    def __init__(self, image: str, limits: Limits, workdir: str) -> None:
        self.image = image
        self.limits = limits
        self.workdir = workdir
        self.closed = False

    def exec(
        self, cmd: str, timeout: float | None = None, *, workdir: str | None = None
    ) -> ExecResult:
        """Run ``cmd`` with ``bash -c`` in ``workdir`` (default: the sandbox's workdir).

        The command, and every process it starts (even ones that call ``setsid``), is killed
        after ``timeout`` seconds (default ``limits.command_timeout``) or when it exits.
        """
        self._check_open()
        limit = self.limits.command_timeout if timeout is None else float(timeout)
        if limit <= 0:
            raise SandboxError(f"timeout must be positive, got {timeout}")
        return self._run(cmd, limit, workdir or self.workdir, self.limits.output_chars)

    def read_file(self, path: str) -> str:
        """Return the text of ``path`` (relative paths start at the workdir), decoded safely."""
        data = self.read_bytes(path)
        return data.decode("utf-8", errors="replace")

    def read_bytes(self, path: str) -> bytes:
        """Return the raw bytes of ``path``; raises :class:`SandboxFileError` if unreadable."""
        self._check_open()
        quoted = shlex.quote(path)
        script = (
            f"if [ -d {quoted} ]; then echo 'is a directory' >&2; exit 21; fi; "
            f"size=$(stat -L -c %s -- {quoted}) || exit 2; "
            f'if [ "$size" -gt {MAX_FILE_BYTES} ]; then echo "file too large: $size bytes" >&2; '
            f"exit 27; fi; exec cat -- {quoted}"
        )
        code, data, error = self._run_raw(script, self.limits.command_timeout)
        if code != 0:
            message = error.decode("utf-8", errors="replace").strip() or f"exit code {code}"
            raise SandboxFileError(f"cannot read {path} in the sandbox: {message}")
        return data

    @abstractmethod
    def write_file(self, path: str, text: str | bytes) -> None:
        """Create or replace ``path`` (parents created as needed) with ``text`` (UTF-8)."""

    def diff(self, base: str = "HEAD") -> str:
        """The patch a SWE-bench agent submits: ``git diff`` of the workdir against ``base``.

        Untracked files are included (as new files) and ignored ones are not, like
        ``git add -A && git diff --cached``, but through a throw-away index so the
        repository's own index is left untouched.
        """
        self._check_open()
        script = (
            "idx=$(mktemp) && trap 'rm -f \"$idx\"' EXIT && "
            '{ cp .git/index "$idx" 2>/dev/null || true; } && '
            'export GIT_INDEX_FILE="$idx" && git -c safe.directory="*" add -A && '
            "git -c safe.directory='*' -c core.quotepath=off diff --cached --no-color "
            f"--no-ext-diff --no-renames {shlex.quote(base)} --"
        )
        code, data, error = self._run_raw(script, self.limits.command_timeout)
        if code != 0:
            message = error.decode("utf-8", errors="replace").strip()
            raise SandboxError(f"git diff in {self.workdir} failed (exit {code}): {message}")
        return data.decode("utf-8", errors="replace")

    def close(self) -> None:
        """Release the sandbox; safe to call more than once."""
        if not self.closed:
            self.closed = True
            self._close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<{type(self).__name__} {self.image} {state}>"

    def _check_open(self) -> None:
        if self.closed:
            raise SandboxError(f"{self!r} is closed; open a new sandbox")

    @abstractmethod
    def _run(self, cmd: str, timeout: float, workdir: str, output_chars: int) -> ExecResult:
        """Run ``cmd`` under ``timeout``, killing every leftover process before returning."""

    @abstractmethod
    def _run_raw(self, script: str, timeout: float) -> tuple[int, bytes, bytes]:
        """Run ``script`` in the workdir; return exit code, full stdout (≤ 16 MiB) and stderr."""

    @abstractmethod
    def _close(self) -> None:
        """Backend-specific release of resources."""
