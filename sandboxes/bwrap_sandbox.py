"""The bubblewrap backend, for hosts without a Docker engine.

Each command is a fresh ``bwrap`` over the image's root file system (read-only), with new
IPC, PID, network, UTS and cgroup namespaces (only loopback exists) and private writable
folders that persist between commands: copies of the workdir and ``/usr/local``, and empty
``/tmp`` and ``/var/tmp`` (all on disk, in the sandbox's scratch folder; ``Limits.tmp_size``
is not applied). Those are the places where Docker-backed tasks write (a grader puts its
scripts in ``/var/tmp``), so the same task runs under either backend. When the command's
process ends, its PID namespace dies with everything it started (``setsid`` included). Resource
limits are rlimits set before ``bwrap`` starts: processes (``RLIMIT_NPROC``), address space
per process (``RLIMIT_AS``, from ``Limits.memory``), file size and core dumps. The host kills
the whole process group at the time limit.

As root, the kernel ignores ``RLIMIT_NPROC`` for uid 0, so commands run as ``nobody``
(uid 65534), switched by ``setpriv`` inside the sandbox with every capability dropped; as an
ordinary user, ``bwrap`` runs unprivileged in a new user namespace where the user appears as
root but holds no power outside it. The CPU share (``Limits.cpus``) has no rlimit equivalent
and is not enforced here.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from .base import (
    MAX_FILE_BYTES,
    ExecResult,
    Limits,
    Sandbox,
    SandboxError,
    SandboxFileError,
)
from .cache import scratch_dir
from .errors import InfraError
from .namespaces import namespace_flags
from .output import BoundedBuffer, OutputCollector
from .owner import current_owner, process_start
from .slots import engine_slot

NOBODY = 65534
# World-writable temporary directories (sandbox path → scratch folder name), empty at start.
_TEMPORARY = {"/tmp": "tmp", "/var/tmp": "var-tmp"}
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_ENVIRONMENT = {
    "PATH": _PATH,
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "TERM": "dumb",
    "PIP_NO_INPUT": "1",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PIP_NO_INDEX": "1",
}


class BwrapSandbox(Sandbox):
    """A sandbox over the root file system ``rootfs``; ``image`` is the name it goes by.

    ``sandboxes.rootfs.rootfs_for_image`` finds (or builds, or exports) the root file system
    of an image; :func:`sandboxes.open_sandbox` does that for you.
    """

    backend = "bwrap"

    def __init__(
        self,
        image: str,
        *,
        rootfs: str | os.PathLike[str],
        limits: Limits | None = None,
        workdir: str = "/testbed",
    ) -> None:
        super().__init__(image, limits or Limits(), workdir)
        self._bwrap = shutil.which("bwrap")
        if self._bwrap is None:
            raise SandboxError("bubblewrap is not installed (apt-get install bubblewrap)")
        self.rootfs = Path(rootfs)
        if (
            not (self.rootfs / "bin" / "bash").exists()
            and not (self.rootfs / "usr" / "bin" / "bash").exists()
        ):
            raise SandboxError(f"{self.rootfs} is not a root file system (no bash in it)")
        for inside in self._writable():
            if inside == "/" or not (self.rootfs / inside.lstrip("/")).is_dir():
                raise SandboxError(
                    f"the bubblewrap backend needs the directory {inside} in {self.rootfs} "
                    "(the workdir must be a directory of the image other than /)"
                )
        self._as_nobody = os.geteuid() == 0
        with engine_slot():
            self._scratch = self._make_scratch()

    def _writable(self) -> dict[str, str]:
        """Sandbox directory → scratch folder name, for the directories commands may change.

        The workdir (the repository) and ``/usr/local`` (so ``pip install`` works, as under
        Docker) are private copies of the image's; everything else is read-only.
        """
        return {self.workdir: "work", "/usr/local": "usr-local"}

    def _make_scratch(self) -> Path:
        """Private copies of the writable directories, owned by whoever runs the commands."""
        owner = current_owner()
        root = scratch_dir()
        root.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f"{owner.pid}-{owner.start}-", dir=root))
        for name in _TEMPORARY.values():
            (scratch / name).mkdir()
            (scratch / name).chmod(0o1777)  # mkdir's mode is cut by the umask
        try:
            for inside, name in self._writable().items():
                source = self.rootfs / inside.lstrip("/")
                if source.is_dir():
                    subprocess.run(["cp", "-a", "--", str(source), str(scratch / name)], check=True)
                else:
                    (scratch / name).mkdir()
            if self._as_nobody:
                names = [str(scratch / name) for name in self._writable().values()]
                subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", *names], check=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            shutil.rmtree(scratch, ignore_errors=True)
            raise InfraError(
                "sandbox", f"cannot copy {self.rootfs} for the sandbox: {exc}"
            ) from exc
        return scratch

    def host_path(self, name: str) -> Path:
        """Host folder behind a scratch directory (``"tmp"``, ``"var-tmp"``, ``"work"``…)."""
        return self._scratch / name

    def save_as_rootfs(self, target: Path) -> None:
        """Store the image plus this sandbox's changes as a new root file system at ``target``.

        The unchanged part is hard-linked (root file systems are mounted read-only, so links
        are never written through); the writable directories are moved in. The sandbox is
        closed afterwards. This is how the layer builder commits an environment or instance
        layer without Docker.
        """
        self._check_open()
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".layer-", dir=target.parent))
        try:
            subprocess.run(["cp", "-al", f"{self.rootfs}/.", str(staging)], check=True)
            for inside, name in self._writable().items():
                place = staging / inside.lstrip("/")
                shutil.rmtree(place, ignore_errors=True)
                place.parent.mkdir(parents=True, exist_ok=True)
                (self._scratch / name).rename(place)
            staging.chmod(0o755)
            staging.rename(target)
        except (OSError, subprocess.CalledProcessError) as exc:
            raise SandboxError(f"cannot save the root file system {target}: {exc}") from exc
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            self.close()

    # -- the bwrap command line -----------------------------------------------------------

    def _argv(self, workdir: str, command: list[str]) -> list[str]:
        assert self._bwrap is not None
        argv = [self._bwrap, *namespace_flags(self._as_nobody)]
        argv += ["--die-with-parent", "--new-session", "--hostname", "sandbox"]
        argv += ["--ro-bind", str(self.rootfs), "/"]
        for inside, name in self._writable().items():
            argv += ["--bind", str(self._scratch / name), inside]
        argv += ["--dev", "/dev", "--proc", "/proc"]
        for inside, name in _TEMPORARY.items():
            argv += ["--bind", str(self._scratch / name), inside]
        argv += ["--chdir", workdir, "--clearenv"]
        for key, value in _ENVIRONMENT.items():
            argv += ["--setenv", key, value]
        argv.append("--")
        if self._as_nobody:
            argv += [
                "setpriv",
                f"--reuid={NOBODY}",
                f"--regid={NOBODY}",
                "--clear-groups",
                "--bounding-set=-all",
                "--inh-caps=-all",
                "--no-new-privs",
            ]
        return argv + command

    def _set_rlimits(self) -> None:
        """Runs in the child between fork and exec: bound what the sandbox may consume."""
        limits = self.limits
        for kind, value in (
            (resource.RLIMIT_NPROC, limits.pids),
            (resource.RLIMIT_AS, limits.memory_bytes),
            (resource.RLIMIT_FSIZE, limits.file_size),
            (resource.RLIMIT_CORE, 0),
        ):
            resource.setrlimit(kind, (value, value))

    # -- running --------------------------------------------------------------------------

    def _spawn(
        self,
        command: list[str],
        timeout: float,
        workdir: str,
        sinks: tuple[Callable[[bytes], None], ...],
        stdin: bytes | None = None,
    ) -> tuple[int, bool]:
        """Run ``command`` in the sandbox feeding stdout (and stderr) to sinks.

        One sink merges stderr into stdout. Returns ``(exit_code, timed_out)``.
        """
        with engine_slot():  # one of the host's sandbox slots (sandboxes.slots)
            merge = len(sinks) == 1
            try:
                proc = subprocess.Popen(
                    self._argv(workdir, command),
                    stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT if merge else subprocess.PIPE,
                    preexec_fn=self._set_rlimits,
                    start_new_session=True,
                )
            except (OSError, subprocess.SubprocessError) as exc:
                raise InfraError("sandbox", f"cannot start bubblewrap: {exc}") from exc
            with proc:  # leaving the block closes the pipes
                streams = [proc.stdout] if merge else [proc.stdout, proc.stderr]
                readers = [
                    threading.Thread(target=_pump, args=(stream, sink), daemon=True)
                    for stream, sink in zip(streams, sinks, strict=True)
                ]
                if stdin is not None:
                    readers.append(
                        threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True)
                    )
                for reader in readers:
                    reader.start()
                timed_out = False
                try:
                    code = proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    code = proc.wait()
                for reader in readers:
                    reader.join()
            return (137 if timed_out or code < 0 else code), timed_out

    def _run(self, cmd: str, timeout: float, workdir: str, output_chars: int) -> ExecResult:
        collector = OutputCollector(output_chars)
        code, timed_out = self._spawn(["bash", "-c", cmd], timeout, workdir, (collector.feed,))
        text, clipped = collector.render()
        if timed_out:
            sep = "\n" if text and not text.endswith("\n") else ""
            text += f"{sep}[command killed: it ran past its {timeout:g} s time limit]"
        return ExecResult(code, text, clipped, timed_out)

    def _run_raw(self, script: str, timeout: float) -> tuple[int, bytes, bytes]:
        out, err = BoundedBuffer(MAX_FILE_BYTES), BoundedBuffer(64 << 10)
        code, _ = self._spawn(["bash", "-c", script], timeout, self.workdir, (out, err))
        if out.overflow:
            raise SandboxFileError(f"output larger than {MAX_FILE_BYTES} bytes")
        return code, bytes(out.data), bytes(err.data)

    def write_file(self, path: str, text: str | bytes) -> None:
        self._check_open()
        data = text.encode("utf-8") if isinstance(text, str) else text
        script = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"'
        out, err = BoundedBuffer(64 << 10), BoundedBuffer(64 << 10)
        code, _ = self._spawn(
            ["bash", "-c", script, "aem", path],
            self.limits.command_timeout,
            self.workdir,
            (out, err),
            stdin=data,
        )
        if code != 0:
            message = err.data.decode("utf-8", errors="replace").strip()
            raise SandboxFileError(f"cannot write {path} in the sandbox: {message}")

    def _close(self) -> None:
        shutil.rmtree(self._scratch, ignore_errors=True)


def _feed(stream: object, data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, OSError):
        stream.write(data)  # type: ignore[attr-defined]
        stream.close()  # type: ignore[attr-defined]


def _pump(stream: object, sink: Callable[[bytes], None]) -> None:
    read = stream.read1  # type: ignore[attr-defined]
    while chunk := read(65536):
        sink(chunk)


def gc_scratch() -> list[Path]:
    """Remove scratch copies left by processes that died before closing their sandboxes."""
    removed: list[Path] = []
    root = scratch_dir()
    if not root.is_dir():
        return removed
    for entry in root.iterdir():
        pid, _, rest = entry.name.partition("-")
        start = rest.split("-")[0]
        if not pid.isdigit() or process_start(int(pid)) == start:
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed
