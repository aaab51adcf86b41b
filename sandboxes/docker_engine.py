"""The connection to a Docker engine: whether one answers, a client for it, its images.

Below both the Docker backend and the image builders, which share it; the docker SDK is
imported only when a client is asked for, so hosts without it can still use bubblewrap.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from functools import cache
from typing import Any

from .errors import SandboxError, require

#: What installs the docker SDK (aem's ``swe`` extra pins it).
DOCKER_INSTALL = "pip install 'aem[swe]'"


def docker_module() -> Any:
    """The docker SDK, or one line saying how to install it."""
    return require("docker", feature="the Docker sandbox backend", install=DOCKER_INSTALL)


@cache
def docker_unavailable_reason() -> str | None:
    """None when a Docker engine answers a ping within a few seconds, else why not."""
    try:
        import docker
    except ImportError:
        return f"the docker SDK is not installed ({DOCKER_INSTALL})"
    host = os.environ.get("DOCKER_HOST", "")
    if not host and not os.path.exists("/var/run/docker.sock"):
        return "no Docker socket at /var/run/docker.sock and DOCKER_HOST is unset"
    # The SDK leaks the socket of a failed unix connect (it never closes it): answer a socket
    # path that is not there without asking the SDK.
    socket_path = host.removeprefix("unix://")
    if host.startswith("unix://") and not os.path.exists(socket_path):
        return f"no Docker socket at {socket_path} (DOCKER_HOST={host})"
    client = None
    try:
        client = docker.from_env(timeout=5)
        client.ping()
    except Exception as exc:  # any failure, at connect or at ping, means "no engine"
        return f"no Docker engine answers ({type(exc).__name__}: {exc})"
    finally:
        if client is not None:
            client.close()
    return None


def docker_client(timeout: float = 120.0) -> Any:
    """A client for the engine named by the environment (``DOCKER_HOST``) or the local socket.

    The caller owns it and must ``close()`` it (or use :func:`client_session`): a client
    keeps a pool of open sockets until then.
    """
    docker = docker_module()
    try:
        return docker.from_env(timeout=int(timeout))
    except docker.errors.DockerException as exc:
        raise SandboxError(
            f"no Docker engine answers ({exc}); start dockerd or use backend='bwrap'"
        ) from exc


@contextlib.contextmanager
def client_session(client: Any = None) -> Iterator[Any]:
    """Yield ``client``, or a new client that is closed on exit when none was given."""
    if client is not None:
        yield client
        return
    owned = docker_client()
    try:
        yield owned
    finally:
        owned.close()


def image_exists(client: Any, tag: str) -> bool:
    """Whether the engine behind ``client`` has the image ``tag`` (nothing is pulled)."""
    try:
        client.images.get(tag)
    except docker_module().errors.ImageNotFound:
        return False
    return True
