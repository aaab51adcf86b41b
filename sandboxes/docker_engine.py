"""The connection to a Docker engine: whether one answers, a client for it, its images.

Below both the Docker backend and the image builders, which share it; the docker SDK is
imported only when a client is asked for, so hosts without it can still use bubblewrap.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any, TypeVar

from .errors import InfraError, exception_line, require

T = TypeVar("T")
#: Seconds waited before each retry of an engine call that failed transiently: three tries
#: in all, about 2.5 s, then the failure is reported as an infrastructure error.
RETRY_DELAYS = (0.5, 2.0)

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


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is the engine failing (unreachable, timing out, a server error), which a
    retry may cure, rather than the request being wrong."""
    import requests

    docker = docker_module()
    if isinstance(exc, requests.exceptions.ConnectionError | requests.exceptions.Timeout):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(exc, docker.errors.APIError) and status is not None and status >= 500


def engine_call(call: Callable[[], T], what: str) -> T:
    """``call()``, retried with backoff while it fails transiently (:func:`is_transient`);
    a failure that outlasts the retries is an :class:`InfraError` naming ``what``."""
    delays = iter(RETRY_DELAYS)
    while True:
        try:
            return call()
        except Exception as exc:
            if not is_transient(exc):
                raise
            delay = next(delays, None)
            if delay is None:
                raise InfraError(
                    "engine",
                    f"{what}: the Docker engine failed {len(RETRY_DELAYS) + 1} times "
                    f"({exception_line(exc)})",
                ) from exc
            time.sleep(delay)


def docker_client(timeout: float = 120.0) -> Any:
    """A client for the engine named by the environment (``DOCKER_HOST``) or the local socket.

    The caller owns it and must ``close()`` it (or use :func:`client_session`): a client
    keeps a pool of open sockets until then.
    """
    docker = docker_module()
    try:
        return docker.from_env(timeout=int(timeout))
    except docker.errors.DockerException as exc:
        raise InfraError(
            "engine", f"no Docker engine answers ({exc}); start dockerd or use backend='bwrap'"
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
