"""Fixtures: the base image, a small instance image, and sandboxes of either backend.

The base image is built on first use (debootstrap, ~1-3 min); CI builds it ahead with
``aem sandbox build``. Docker fixtures skip locally without an engine and fail in CI.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxes import Limits, Sandbox
from sandboxes.bwrap_sandbox import BwrapSandbox
from sandboxes.docker_engine import docker_unavailable_reason
from sandboxes.docker_sandbox import DockerSandbox
from sandboxes.rootfs import rootfs_for_image

# Small bounds so that the attacks in the security battery hit them quickly.
TEST_LIMITS = Limits(
    memory="256m",
    pids=128,
    cpus=1.0,
    command_timeout=30.0,
    output_chars=2_000,
    file_size=64 << 20,
    tmp_size="32m",
)

BUGGY_MODULE = "def add(a, b):\n    return a - b\n"
TEST_MODULE = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"


@contextlib.contextmanager
def no_docker_engine() -> Iterator[None]:
    """As on a host where no Docker engine answers: ``DOCKER_HOST`` names a socket nobody
    serves, and the engine probe forgets what it saw before and after."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        docker_unavailable_reason.cache_clear()
        try:
            yield
        finally:
            docker_unavailable_reason.cache_clear()


@pytest.fixture
def no_engine() -> Iterator[None]:
    """The test runs as on a host without a Docker engine."""
    with no_docker_engine():
        yield


def _git(repo: Path, *args: str) -> str:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo), *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="session")
def repo_bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A two-file repository with a bug, as a git bundle, and its commit."""
    repo = tmp_path_factory.mktemp("repo")
    _git(repo, "init", "-q")
    (repo / "calc.py").write_text(BUGGY_MODULE)
    (repo / "test_calc.py").write_text(TEST_MODULE)
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "initial")
    bundle = repo.parent / "repo.bundle"
    _git(repo, "bundle", "create", str(bundle), "--all")
    return bundle, _git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="session")
def base_image(docker_engine: None) -> str:
    from sandboxes import ensure_base_image

    return ensure_base_image()


@pytest.fixture(scope="session")
def instance_image(base_image: str, repo_bundle: tuple[Path, str]) -> str:
    from sandboxes import ensure_instance_image

    bundle, commit = repo_bundle
    return ensure_instance_image(bundle, commit, env_image=base_image, progress=None)


@pytest.fixture(scope="session")
def base_rootfs(bubblewrap: None) -> Path:
    from sandboxes import ensure_base_rootfs

    return ensure_base_rootfs()


@pytest.fixture(scope="session")
def bwrap_instance_image(base_rootfs: Path, repo_bundle: tuple[Path, str]) -> str:
    """The test repository's instance layer, built as Docker-less hosts build it."""
    from sandboxes import ensure_instance_image

    bundle, commit = repo_bundle
    with no_docker_engine():
        return ensure_instance_image(bundle, commit, progress=None)


@pytest.fixture(
    params=[
        pytest.param("docker", marks=pytest.mark.docker),
        pytest.param("bwrap", marks=pytest.mark.bwrap),
    ]
)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "docker":
        request.getfixturevalue("docker_engine")
    return request.param


@pytest.fixture
def box(backend: str, request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    """A sandbox on the test repository, from the backend under test, with TEST_LIMITS."""
    sandbox: Sandbox
    if backend == "docker":
        image = request.getfixturevalue("instance_image")
        sandbox = DockerSandbox(image, limits=TEST_LIMITS)
    else:
        image = request.getfixturevalue("bwrap_instance_image")
        sandbox = BwrapSandbox(image, rootfs=rootfs_for_image(image), limits=TEST_LIMITS)
    with sandbox:
        yield sandbox
