"""One local Ray head for the whole session, on loopback, and proof that it leaves nothing.

Why session-scoped: starting Ray costs several seconds on 2 cores; every Ray test shares one
head. At the end the head is shut down and every Ray process it started (raylet, GCS, env
actors, agents) must be gone.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import psutil
import pytest

#: Small: the tests move a few strings; Ray's default takes 30% of the machine's memory.
OBJECT_STORE_BYTES = 100 * 1024 * 1024


#: In the command line of Ray's own Python processes (the dashboard agent, the log monitor).
RAY_CODE = "site-packages/ray/"


def ray_processes() -> list[psutil.Process]:
    """This process's descendants that Ray started (its head and its workers)."""
    out = []
    for child in psutil.Process().children(recursive=True):
        try:
            name, cmdline = child.name(), " ".join(child.cmdline())
        except psutil.Error:
            continue
        if name in ("raylet", "gcs_server") or name.startswith("ray::") or RAY_CODE in cmdline:
            out.append(child)
    return out


def wait_gone(processes: list[psutil.Process], within: float = 30.0) -> list[psutil.Process]:
    """Those of ``processes`` still running after ``within`` seconds (empty: all exited)."""
    _, alive = psutil.wait_procs(processes, timeout=within)
    return alive


@pytest.fixture(scope="session")
def ray_head() -> Iterator[ModuleType]:
    import ray

    ray.init(
        address="local",
        include_dashboard=False,
        num_cpus=2,
        object_store_memory=OBJECT_STORE_BYTES,
        _node_ip_address="127.0.0.1",
    )
    started = ray_processes()
    try:
        yield ray
    finally:
        ray.shutdown()
    left = wait_gone(started)
    assert not left, f"Ray processes left after shutdown: {[p.pid for p in left]}"
    assert not ray_processes()


@pytest.fixture
def ray_cluster(ray_head: ModuleType) -> Iterator[ModuleType]:
    """The session's head, and after each test: no env actor of that test still alive."""
    yield ray_head
    workers = [p for p in ray_processes() if _is_env_actor(p)]
    left = wait_gone(workers)
    assert not left, f"env actors left after the test: {[p.pid for p in left]}"


def _is_env_actor(process: psutil.Process) -> bool:
    try:
        return process.name() == "ray::EnvWorker"
    except psutil.Error:
        return False
