"""Choosing a backend: Docker when an engine answers, bubblewrap otherwise.

The one place that decides which backend runs a sandbox or builds a layer; everything
below it serves one backend, and :mod:`sandboxes.images` asks here before building.
"""

from __future__ import annotations

import sys
from typing import Any

from .base import Limits, Sandbox
from .bwrap_sandbox import BwrapSandbox, gc_scratch
from .docker_engine import docker_client, docker_unavailable_reason
from .docker_sandbox import DockerSandbox
from .errors import InfraError, SandboxError
from .namespaces import bwrap_unavailable_reason
from .reaper import gc_opportunistically
from .rootfs import rootfs_for_image

BACKENDS = ("auto", "docker", "bwrap")
_announced: set[str] = set()


def resolve_backend(backend: str = "auto") -> str:
    """Turn ``auto`` into ``docker`` or ``bwrap``; raise if the chosen one cannot run."""
    if backend not in BACKENDS:
        raise SandboxError(f"unknown sandbox backend {backend!r}; choose one of {BACKENDS}")
    if backend == "docker":
        reason = docker_unavailable_reason()
        if reason:
            raise InfraError("engine", f"the Docker backend cannot run: {reason}")
        return "docker"
    if backend == "bwrap" or docker_unavailable_reason() is not None:
        reason = bwrap_unavailable_reason()
        if reason:
            docker_reason = docker_unavailable_reason() or "not chosen"
            raise SandboxError(
                f"no sandbox backend can run: Docker: {docker_reason}; bubblewrap: {reason}"
            )
        return "bwrap"
    return "docker"


def build_backend(backend: str = "auto", client: Any = None) -> str:
    """Which backend builds image layers (``docker`` images or ``bwrap`` root file systems).

    ``backend`` is the sandbox backend that will run them: ``docker`` and ``bwrap`` decide
    (an explicit ``bwrap`` builds root file systems even where an engine answers, rather than
    building images only to export them); ``auto`` builds with Docker when a client was given
    or an engine answers.
    """
    if backend == "auto" and client is not None:
        return "docker"
    return resolve_backend(backend)


def _announce(backend: str) -> None:
    """Say once per process which backend runs the sandboxes, and why."""
    if backend in _announced:
        return
    _announced.add(backend)
    if backend == "docker":
        line = "sandboxes: using the Docker backend (a Docker engine answers)"
    else:
        why = docker_unavailable_reason() or "requested explicitly"
        line = f"sandboxes: using the bubblewrap backend ({why})"
    print(line, file=sys.stderr, flush=True)


def open_sandbox(
    image: str,
    *,
    backend: str = "auto",
    limits: Limits | None = None,
    workdir: str = "/testbed",
) -> Sandbox:
    """Start a sandbox from ``image`` (a Docker tag, or for bubblewrap also a rootfs directory).

    ``backend="auto"`` uses Docker when an engine answers, else bubblewrap, and prints one
    line on stderr (once per process) naming the backend in use.
    """
    chosen = resolve_backend(backend)
    _announce(chosen)
    if chosen == "docker":
        client = docker_client()
        gc_opportunistically(client)  # never raises
        return DockerSandbox(image, limits=limits, workdir=workdir, client=client, own_client=True)
    gc_scratch()  # scratch copies of processes that died without closing their sandboxes
    rootfs = rootfs_for_image(image)
    return BwrapSandbox(image, rootfs=rootfs, limits=limits, workdir=workdir)
