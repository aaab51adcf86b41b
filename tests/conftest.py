"""Shared test settings, the rule for tests that need Docker, bubblewrap or a browser, and
the session's Ray head.

Such tests skip on a developer machine that lacks the engine or browser, or where bubblewrap
cannot create namespaces (an unprivileged container), but in CI (``CI`` set, as ``.ci/run``
runs) a missing dependency is a failure, never a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import psutil
import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

IN_CI = bool(os.environ.get("CI"))


def _docker_available() -> str | None:
    if shutil.which("docker") is None:
        return "the docker client is not installed"
    try:
        probe = subprocess.run(["docker", "info"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker info failed: {exc}"
    return None if probe.returncode == 0 else "no Docker engine answers `docker info`"


def _browser_available() -> str | None:
    for path in ("/usr/bin/chromium", "/usr/bin/chromedriver"):
        if not os.path.exists(path):
            return f"{path} is missing (apt-get install chromium chromium-driver)"
    return None


def _bwrap_available() -> str | None:
    from sandboxes.namespaces import bwrap_unavailable_reason

    return bwrap_unavailable_reason()


def _need(reason: str | None) -> None:
    if reason is None:
        return
    if IN_CI:
        pytest.fail(f"CI requires this dependency: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_engine() -> None:
    """Use in tests that need a running Docker engine."""
    _need(_docker_available())


@pytest.fixture(scope="session")
def bubblewrap() -> None:
    """Use in tests that run bubblewrap sandboxes (probed once: it may be installed but
    refused namespaces)."""
    _need(_bwrap_available())


@pytest.fixture(scope="session")
def browser() -> None:
    """Use in tests that need Debian's chromium and chromedriver."""
    _need(_browser_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Markers ``docker``, ``bwrap`` and ``browser`` and their fixtures go together.

    A marked test pulls in the matching fixture, and a test that uses the fixture (directly
    or through another fixture) gets the marker, so ``-m "not docker"`` (the fast tier,
    ``make test-fast``) leaves out every test that would start a container.
    """
    needs = (("docker", "docker_engine"), ("bwrap", "bubblewrap"), ("browser", "browser"))
    for item in items:
        for marker, fixture in needs:
            if item.get_closest_marker(marker) and fixture not in item.fixturenames:
                # First, so that the skip comes before any other fixture tries to use it.
                item.fixturenames.insert(0, fixture)
            elif fixture in item.fixturenames and not item.get_closest_marker(marker):
                item.add_marker(marker)


# ---------------------------------------------------------------------- Ray (marker ``ray``)
# One local Ray head for the whole session, on loopback, and proof that it leaves nothing.
# Why session-scoped: starting Ray costs several seconds on 2 cores; every Ray test (the env
# workers', the rollout's, the bench's) shares one head. At the end the head is shut down and
# every Ray process it started (raylet, GCS, env actors, agents) must be gone.

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


@pytest.fixture
def kill_actor(ray_cluster: ModuleType) -> Callable[[Any], None]:
    """Kill an actor and wait until it refuses calls: ``ray.kill`` only asks the cluster, so a
    call made right after it may still be served, racing the failure under test."""

    def kill(actor: Any) -> None:
        ray_cluster.kill(actor)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                ray_cluster.get(actor.describe.remote(), timeout=10)
            except ray_cluster.exceptions.RayActorError:
                return
            time.sleep(0.1)
        raise AssertionError("the killed actor still answers after 60 s")

    return kill


def _is_env_actor(process: psutil.Process) -> bool:
    try:
        return process.name() == "ray::EnvWorker"
    except psutil.Error:
        return False
