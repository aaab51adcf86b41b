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
- A command's output is read whole or not at all (:mod:`sandboxes.docker_exec`).
- Labels name the owner process; :func:`sandboxes.reaper.gc` removes containers of dead
  owners.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from typing import Any

from .base import MAX_FILE_BYTES, ExecResult, Limits, Sandbox, SandboxError, SandboxFileError
from .docker_engine import docker_client, docker_module, engine_call
from .docker_exec import ExecStream
from .errors import InfraError
from .output import BoundedBuffer, OutputCollector
from .owner import LABEL_PREFIX, current_owner
from .slots import engine_slot

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
# Writes standard input to "$2" (relative to the directory "$1"), creating its parents. What
# is left of the input after a failure is drained, so that the upload never stalls.
_WRITER = (
    'cd -- "$1" && mkdir -p -- "$(dirname -- "$2")" && cat > "$2"; rc=$?; cat > /dev/null; exit $rc'
)
# Extra seconds the client waits past the command's own limit before recycling.
_CLIENT_GRACE = 10.0
# Times the engine is asked for a finished command's exit code, 0.1 s apart.
_EXIT_POLLS = 20


class DockerSandbox(Sandbox):
    """A sandbox in one container of the local Docker engine.

    ``client``: an engine client to use; the sandbox closes it on :meth:`close` only when
    ``own_client`` is true, and always closes the client it creates itself.
    """

    backend = "docker"

    def __init__(
        self,
        image: str,
        *,
        limits: Limits | None = None,
        workdir: str = "/testbed",
        client: Any = None,
        own_client: bool = False,
    ) -> None:
        super().__init__(image, limits or Limits(), workdir)
        self._docker = docker_module()
        owned = client is None or own_client
        self._client = client or docker_client()
        self._lock = threading.Lock()
        api = self._client.api
        try:
            with engine_slot():
                created = engine_call(
                    lambda: api.create_container(image, **self._create_options()),
                    f"creating a container from {image!r}",
                )
        except self._docker.errors.ImageNotFound:
            if owned:
                self._client.close()
            raise InfraError(
                "image",
                f"the Docker image {image!r} is not present locally; build it "
                "(`aem sandbox build` for aem's images) or load it with `docker load -i FILE` "
                "— nothing is pulled from a registry",
            ) from None
        except (self._docker.errors.APIError, InfraError) as exc:
            if owned:
                self._client.close()
            raise InfraError(
                getattr(exc, "kind", "engine"),
                f"could not create a container from {image!r}: {exc}",
            ) from exc
        self.container_id: str = created["Id"]
        self._finalizer = weakref.finalize(
            self, _remove_quietly, self._client, self.container_id, owned
        )
        try:
            with engine_slot():
                engine_call(lambda: api.start(self.container_id), "starting a container")
        except (self._docker.errors.APIError, InfraError) as exc:
            self._finalizer()
            raise InfraError(
                getattr(exc, "kind", "engine"), f"could not start a container from {image!r}: {exc}"
            ) from exc

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
        argv = _wrapped(cmd, timeout, workdir, merge=True)
        code, notes = self._exec(argv, timeout, merge=True, sinks=(collector.feed,))
        text, clipped = collector.render()
        timed_out = code == 137 and time.monotonic() - start >= timeout
        if timed_out:
            notes.append(f"[command killed: it ran past its {timeout:g} s time limit]")
        if notes:
            text = text + ("\n" if text and not text.endswith("\n") else "") + "\n".join(notes)
        return ExecResult(code, text, clipped, timed_out)

    def _run_raw(self, script: str, timeout: float) -> tuple[int, bytes, bytes]:
        out, err = BoundedBuffer(MAX_FILE_BYTES), BoundedBuffer(64 << 10)
        argv = _wrapped(script, timeout, self.workdir, merge=False)
        code, notes = self._exec(argv, timeout, merge=False, sinks=(out, err))
        if out.overflow:
            raise SandboxFileError(f"output larger than {MAX_FILE_BYTES} bytes")
        return code, bytes(out.data), bytes(err.data) + "\n".join(notes).encode()

    def _exec(
        self,
        argv: list[str],
        timeout: float,
        *,
        merge: bool,
        sinks: tuple[Any, ...],
        stdin: bytes | None = None,
    ) -> tuple[int, list[str]]:
        """Run ``argv`` in the container; return its exit code and notes about recoveries.

        ``stdin``, when given, is sent as the process's standard input, then closed.
        """
        notes: list[str] = []
        options = {"stdin": stdin is not None, "tty": False}
        with self._lock, engine_slot():
            api = self._client.api

            def create() -> str:
                return engine_call(
                    lambda: api.exec_create(self.container_id, argv, **options)["Id"],
                    "starting a command",
                )

            try:
                exec_id = create()
            except self._docker.errors.NotFound as exc:
                raise self._vanished(exc) from exc
            except self._docker.errors.APIError as exc:
                if exc.status_code != 409:  # 409: the container is not running
                    raise SandboxError(f"docker exec failed: {exc}") from exc
                self._recycle()
                notes.append("[sandbox restarted: its container had stopped]")
                exec_id = create()
            reader = ExecStream(api, exec_id, sinks, merge=merge, stdin=stdin)
            reader.start()
            reader.join(timeout + _CLIENT_GRACE)
            if reader.is_alive():
                self._recycle()
                reader.join(_CLIENT_GRACE)
                reader.cancel()  # unblocks a reader the recycle did not end
                notes.append("[sandbox restarted: the command did not stop at its time limit]")
                return 137, notes
            if reader.error is not None:
                raise InfraError(
                    "engine", f"reading the output of docker exec failed: {reader.error}"
                )
            code = self._exit_code(exec_id)
        return code, notes

    def _exit_code(self, exec_id: str) -> int:
        """The exit code of a command whose output stream ended.

        The engine may mark the command finished a moment after its stream closes, so it is
        asked a few times; a command still running after that lost its output stream to the
        engine (seen under heavy load), and what was read of its output is not all of it: an
        :class:`InfraError`, not a result.
        """
        api = self._client.api
        for _ in range(_EXIT_POLLS):
            state = engine_call(lambda: api.exec_inspect(exec_id), "reading an exit code")
            if not state.get("Running") and state.get("ExitCode") is not None:
                return int(state["ExitCode"])
            time.sleep(0.1)
        raise InfraError("engine", "the engine ended a command's output stream while it still ran")

    def _recycle(self) -> None:
        """Kill every process of the container and start it again; files are kept."""
        api = self._client.api
        with contextlib.suppress(self._docker.errors.APIError):  # already stopped
            api.kill(self.container_id)
        try:
            engine_call(lambda: api.start(self.container_id), "restarting a container")
        except self._docker.errors.APIError as exc:
            raise self._vanished(exc) from exc

    def _vanished(self, exc: BaseException) -> InfraError:
        """The error for a container the engine no longer has (removed, or killed by the host)."""
        return InfraError(
            "container", f"the sandbox's container {self.container_id[:12]} is gone: {exc}"
        )

    # -- files ----------------------------------------------------------------------------

    def write_file(self, path: str, text: str | bytes) -> None:
        """Stream the bytes into ``cat > path`` on the standard input of an exec.

        Why not ``put_archive``: the engine unpacks archives into the container's layer,
        beneath any mount, so a file sent to the tmpfs ``/tmp`` would never be seen. A shell
        in the container resolves the path exactly as the agent's commands do — mounts,
        symlinks and permissions included — and it is one round trip fewer.
        """
        self._check_open()
        data = text.encode("utf-8") if isinstance(text, str) else text
        output = BoundedBuffer(64 << 10)  # only error messages: cat prints nothing else
        argv = ["sh", "-c", _WRITER, "aem", self.workdir, path]
        code, notes = self._exec(
            argv, self.limits.command_timeout, merge=True, sinks=(output,), stdin=data
        )
        if code != 0:
            message = bytes(output.data).decode("utf-8", errors="replace").strip()
            message = "\n".join(filter(None, [message, *notes])) or f"exit code {code}"
            raise SandboxFileError(f"cannot write {path} in the sandbox: {message}")

    # -- lifecycle ------------------------------------------------------------------------

    def _close(self) -> None:
        self._finalizer()


def _remove_quietly(client: Any, container_id: str, close_client: bool) -> None:
    """Remove a container (SIGKILL, no graceful stop: nothing inside needs one).

    With ``close_client``, the client's sockets are closed too (the sandbox owned it).
    """
    with contextlib.suppress(Exception):  # an interpreter-exit finalizer must never raise
        client.api.remove_container(container_id, force=True)
    if close_client:
        with contextlib.suppress(Exception):
            client.close()


def _wrapped(cmd: str, timeout: float, workdir: str, *, merge: bool) -> list[str]:
    """The argv that runs ``cmd`` under :data:`_WRAPPER`'s time limit and cleanup."""
    return ["sh", "-c", _WRAPPER, "aem", cmd, f"{timeout:.3f}", workdir, "1" if merge else ""]
