"""Choosing a backend: Docker when an engine answers, bubblewrap otherwise."""

from __future__ import annotations

import os
import sys
from functools import cache

from .base import Limits, Sandbox, SandboxError
from .namespaces import bwrap_unavailable_reason

BACKENDS = ("auto", "docker", "bwrap")
_announced: set[str] = set()


@cache
def docker_unavailable_reason() -> str | None:
    """None when a Docker engine answers a ping within a few seconds, else why not."""
    try:
        import docker
    except ImportError:
        return "the docker SDK is not installed (pip install 'aem[swe]')"
    if not os.environ.get("DOCKER_HOST") and not os.path.exists("/var/run/docker.sock"):
        return "no Docker socket at /var/run/docker.sock and DOCKER_HOST is unset"
    try:
        client = docker.from_env(timeout=5)
    except Exception as exc:  # any failure means "no engine"
        return f"no Docker engine answers ({type(exc).__name__}: {exc})"
    try:
        client.ping()
    except Exception as exc:
        return f"no Docker engine answers ({type(exc).__name__}: {exc})"
    finally:
        client.close()
    return None


def resolve_backend(backend: str = "auto") -> str:
    """Turn ``auto`` into ``docker`` or ``bwrap``; raise if the chosen one cannot run."""
    if backend not in BACKENDS:
        raise SandboxError(f"unknown sandbox backend {backend!r}; choose one of {BACKENDS}")
    if backend == "docker":
        reason = docker_unavailable_reason()
        if reason:
            raise SandboxError(f"the Docker backend cannot run: {reason}")
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
        from .docker_sandbox import DockerSandbox, docker_client
        from .reaper import gc_opportunistically

        client = docker_client()
        gc_opportunistically(client)  # never raises
        return DockerSandbox(image, limits=limits, workdir=workdir, client=client, own_client=True)
    from .bwrap_sandbox import BwrapSandbox, gc_scratch

    gc_scratch()  # scratch copies of processes that died without closing their sandboxes
    return BwrapSandbox(image, limits=limits, workdir=workdir)
