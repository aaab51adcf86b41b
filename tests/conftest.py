"""Shared test settings and the rule for tests that need Docker or a browser.

Such tests skip on a developer machine that lacks the engine or browser, but in CI
(``CI`` set, as ``.ci/run`` runs) a missing dependency is a failure, never a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess

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
def browser() -> None:
    """Use in tests that need Debian's chromium and chromedriver."""
    _need(_browser_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Markers ``docker`` and ``browser`` pull in the matching fixture automatically."""
    for item in items:
        for marker, fixture in (("docker", "docker_engine"), ("browser", "browser")):
            if item.get_closest_marker(marker) and fixture not in item.fixturenames:
                item.fixturenames.append(fixture)
