"""The Docker backend: one long-lived container per sandbox, one ``docker exec`` per command.

Containment, and why each piece is there:
- ``network_mode="none"`` leaves only loopback; no egress.
- memory (swap included), pids and CPU limits; an out-of-memory process gets killed (137),
  the container survives.
- ``no-new-privileges``, a reduced capability set (no ``SYS_CHROOT``, ``MKNOD``,
  ``NET_RAW``…; ``SYS_ADMIN`` is never present, so ``mount`` fails) and no added
  capabilities.
- ``RLIMIT_FSIZE`` bounds any single file (overlay on ext4 has no disk quota), ``/tmp`` is a
  size-limited tmpfs.
- Every command runs under ``timeout -s KILL`` inside the container, and afterwards
  ``kill -9 -1`` removes whatever it left behind (background jobs, ``setsid`` escapes), so the
  exec's output stream always ends. The client side is bounded too: docker-py can block
  forever on an exec stream, so the stream is read on a worker thread and, past the deadline,
  the container is recycled (killed and started again, keeping its file system).
- Labels name the owner process; :func:`sandboxes.reaper.gc` removes containers of dead
  owners.
"""

from __future__ import annotations

import contextlib
import io
import shlex
import tarfile
import threading
import time
import uuid
import weakref
from typing import Any

from aem_envs.core.errors import require

from .base import MAX_FILE_BYTES, ExecResult, Limits, Sandbox, SandboxError, SandboxFileError
from .output import BoundedBuffer, OutputCollector
from .owner import LABEL_PREFIX, current_owner

# Docker's default capabilities minus those an SWE agent never needs and an escape might:
# raw sockets, device nodes, chroot, audit, file capabilities, privileged ports.
DROPPED_CAPABILITIES = (
    "NET_RAW",
    "NET_BIND_SERVICE",
    "MKNOD",
    "SYS_CHROOT",
    "AUDIT_WRITE",
    "SETFCAP",
    "SETPCAP",
)

# A POSIX sh script (sh starts faster than bash): "$1" command, "$2" seconds, "$3" directory,
# "$4" = 1 to merge stderr into stdout.
# After the command, kill(-1) signals every process but PID 1 and this shell. The command runs
# as a background job only so that the shell does not print its own "Killed" report.
_WRAPPER = (
    'cd -- "$3" || exit 2; '
    'if [ "$4" = 1 ]; then exec 2>&1; fi; '
    'timeout -s KILL "$2" bash -c "$1" </dev/null '
    "& wait $! 2>/dev/null; rc=$?; "
    "kill -9 -1 2>/dev/null; exit $rc"
)
# PID 1 of the container: it must survive kill(-1) (PID 1 is exempt) and a command's
# ``kill 1`` (it ignores the catchable signals; SIGKILL from inside never reaches an init),
# and reap the orphans that commands leave, which ``sleep infinity`` would not do. Its
# sleeping child may be killed; the loop starts another. Sandboxes are removed with SIGKILL.
_KEEPER = "trap '' TERM INT HUP; while :; do sleep 86400 & wait $!; done"
# Extra seconds the client waits past the command's own limit before recycling.
_CLIENT_GRACE = 10.0


def _docker_module() -> Any:
    return require("swe", "docker", feature="the Docker sandbox backend")


def docker_client(timeout: float = 120.0) -> Any:
    """A client for the engine named by the environment (``DOCKER_HOST``) or the local socket."""
    docker = _docker_module()
    try:
        return docker.from_env(timeout=int(timeout))
    except docker.errors.DockerException as exc:
        raise SandboxError(
            f"no Docker engine answers ({exc}); start dockerd or use backend='bwrap'"
        ) from exc


class DockerSandbox(Sandbox):
    backend = "docker"

    def __init__(
        self,
        image: str,
        *,
        limits: Limits | None = None,
        workdir: str = "/testbed",
        client: Any = None,
    ) -> None:
        super().__init__(image, limits or Limits(), workdir)
        self._docker = _docker_module()
        self._client = client or docker_client()
        self._lock = threading.Lock()
        api = self._client.api
        try:
            created = api.create_container(image, **self._create_options())
        except self._docker.errors.ImageNotFound:
            raise SandboxError(
                f"the Docker image {image!r} is not present locally; build it "
                "(`aem sandbox build` for aem's images) or load it with `docker load -i FILE` "
                "— nothing is pulled from a registry"
            ) from None
        except self._docker.errors.APIError as exc:
            raise SandboxError(f"could not create a container from {image!r}: {exc}") from exc
        self.container_id: str = created["Id"]
        self._finalizer = weakref.finalize(self, _remove_quietly, self._client, self.container_id)
        try:
            api.start(self.container_id)
        except self._docker.errors.APIError as exc:
            self._finalizer()
            raise SandboxError(f"could not start a container from {image!r}: {exc}") from exc

    def _create_options(self) -> dict[str, Any]:
        """Arguments of the low-level ``create_container`` (two API calls open a sandbox)."""
        limits = self.limits
        ulimit = self._docker.types.Ulimit
        labels = current_owner().labels()
        labels[f"{LABEL_PREFIX}.image"] = self.image
        host_config = self._client.api.create_host_config(
            network_mode="none",
            mem_limit=limits.memory,
            memswap_limit=limits.memory,
            pids_limit=limits.pids,
            nano_cpus=int(limits.cpus * 1e9),
            security_opt=["no-new-privileges"],
            cap_drop=list(DROPPED_CAPABILITIES),
            ulimits=[
                ulimit(name="fsize", soft=limits.file_size, hard=limits.file_size),
                ulimit(name="core", soft=0, hard=0),
            ],
            tmpfs={"/tmp": f"size={limits.tmp_size},mode=1777"},
        )
        return {
            "command": ["bash", "-c", _KEEPER],
            "labels": labels,
            "hostname": "sandbox",
            "working_dir": "/",
            "environment": {
                "PAGER": "cat",
                "GIT_PAGER": "cat",
                "TERM": "dumb",
                "PIP_NO_INPUT": "1",
                "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "PIP_NO_INDEX": "1",
            },
            "host_config": host_config,
        }

    # -- commands -------------------------------------------------------------------------

    def _run(self, cmd: str, timeout: float, workdir: str, output_chars: int) -> ExecResult:
        collector = OutputCollector(output_chars)
        start = time.monotonic()
        code, notes = self._exec(cmd, timeout, workdir, merge=True, sinks=(collector.feed,))
        text, clipped = collector.render()
        timed_out = code == 137 and time.monotonic() - start >= timeout
        if timed_out:
            notes.append(f"[command killed: it ran past its {timeout:g} s time limit]")
        if notes:
            text = text + ("\n" if text and not text.endswith("\n") else "") + "\n".join(notes)
        return ExecResult(code, text, clipped, timed_out)

    def _run_raw(self, script: str, timeout: float) -> tuple[int, bytes, bytes]:
        out, err = BoundedBuffer(MAX_FILE_BYTES), BoundedBuffer(64 << 10)
        code, notes = self._exec(script, timeout, self.workdir, merge=False, sinks=(out, err))
        if out.overflow:
            raise SandboxFileError(f"output larger than {MAX_FILE_BYTES} bytes")
        return code, bytes(out.data), bytes(err.data) + "\n".join(notes).encode()

    def _exec(
        self, cmd: str, timeout: float, workdir: str, *, merge: bool, sinks: tuple[Any, ...]
    ) -> tuple[int, list[str]]:
        """Run one wrapped command; return its exit code and notes about recoveries."""
        notes: list[str] = []
        argv = ["sh", "-c", _WRAPPER, "aem", cmd, f"{timeout:.3f}", workdir, "1" if merge else ""]
        with self._lock:
            api = self._client.api
            try:
                exec_id = api.exec_create(self.container_id, argv, stdin=False, tty=False)["Id"]
            except self._docker.errors.APIError as exc:
                if exc.status_code != 409:  # 409: the container is not running
                    raise SandboxError(f"docker exec failed: {exc}") from exc
                self._recycle()
                notes.append("[sandbox restarted: its container had stopped]")
                exec_id = api.exec_create(self.container_id, argv, stdin=False, tty=False)["Id"]
            reader = _StreamReader(api, exec_id, sinks, demux=not merge)
            reader.start()
            reader.join(timeout + _CLIENT_GRACE)
            if reader.is_alive():
                self._recycle()
                reader.join(_CLIENT_GRACE)
                notes.append("[sandbox restarted: the command did not stop at its time limit]")
                return 137, notes
            if reader.error is not None:
                raise SandboxError(f"reading the output of docker exec failed: {reader.error}")
            code = api.exec_inspect(exec_id).get("ExitCode")
        return (137 if code is None else int(code)), notes

    def _recycle(self) -> None:
        """Kill every process of the container and start it again; files are kept."""
        api = self._client.api
        with contextlib.suppress(self._docker.errors.APIError):  # already stopped
            api.kill(self.container_id)
        api.start(self.container_id)

    # -- files ----------------------------------------------------------------------------

    def write_file(self, path: str, text: str | bytes) -> None:
        """Upload with ``put_archive`` to the container's own layer, then move it in place.

        Why two steps: ``put_archive`` writes beneath tmpfs mounts such as ``/tmp`` (the file
        would be invisible), and ``cat >`` resolves the path exactly as the agent's shell
        does, symlinks and existing permissions included.
        """
        self._check_open()
        data = text.encode("utf-8") if isinstance(text, str) else text
        staging = f".aem-upload-{uuid.uuid4().hex}"
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            info = tarfile.TarInfo(staging)
            info.size = len(data)
            info.mode = 0o600
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
        try:
            self._client.api.put_archive(self.container_id, "/", archive.getvalue())
        except self._docker.errors.APIError as exc:
            raise SandboxFileError(f"cannot upload {path} to the sandbox: {exc}") from exc
        target = shlex.quote(path)
        script = (
            f'trap \'rm -f "/{staging}"\' EXIT; mkdir -p -- "$(dirname -- {target})" && '
            f'cat "/{staging}" > {target}'
        )
        code, _, error = self._run_raw(script, self.limits.command_timeout)
        if code != 0:
            message = error.decode("utf-8", errors="replace").strip() or f"exit code {code}"
            raise SandboxFileError(f"cannot write {path} in the sandbox: {message}")

    # -- lifecycle ------------------------------------------------------------------------

    def _close(self) -> None:
        self._finalizer()


def _remove_quietly(client: Any, container_id: str) -> None:
    """Remove a container (SIGKILL, no graceful stop: nothing inside needs one)."""
    try:
        client.api.remove_container(container_id, force=True)
    except Exception:  # an interpreter-exit finalizer must never raise
        return


class _StreamReader(threading.Thread):
    """Reads an exec's output stream into sinks, so the caller can bound the wait."""

    def __init__(self, api: Any, exec_id: str, sinks: tuple[Any, ...], *, demux: bool) -> None:
        super().__init__(daemon=True, name="aem-sandbox-exec")
        self.api, self.exec_id, self.sinks, self.demux = api, exec_id, sinks, demux
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            stream = self.api.exec_start(self.exec_id, stream=True, demux=self.demux)
            for chunk in stream:
                if not self.demux:
                    self.sinks[0](chunk)
                    continue
                for sink, part in zip(self.sinks, chunk, strict=True):
                    if part:
                        sink(part)
        except Exception as exc:  # reported to the caller's thread
            self.error = exc
