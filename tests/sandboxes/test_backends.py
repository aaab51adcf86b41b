from __future__ import annotations

import gc
import os
import sys
import warnings
from pathlib import Path

import pytest

from sandboxes import SandboxError, backends, namespaces, open_sandbox, resolve_backend


def test_unknown_backend_is_one_clear_error() -> None:
    with pytest.raises(SandboxError, match="unknown sandbox backend 'podman'"):
        resolve_backend("podman")


def test_a_missing_engine_socket_is_named_and_leaks_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The docker SDK never closes the socket of a failed unix connect; the probe must not
    reach it for a socket path that is not there (a leak surfaced in a later test's GC)."""
    from sandboxes.docker_engine import docker_unavailable_reason

    unraisable: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda hook: unraisable.append(repr(hook)))
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    docker_unavailable_reason.cache_clear()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", ResourceWarning)
            reason = docker_unavailable_reason()
            gc.collect()
    finally:
        docker_unavailable_reason.cache_clear()
    assert reason is not None and "/nonexistent/docker.sock" in reason
    assert unraisable == []


def test_auto_falls_back_to_bubblewrap_without_an_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends, "docker_unavailable_reason", lambda: "no engine (test)")
    monkeypatch.setattr(backends, "bwrap_unavailable_reason", lambda: None)
    assert resolve_backend("auto") == "bwrap"
    with pytest.raises(SandboxError, match="Docker backend cannot run: no engine"):
        resolve_backend("docker")


def test_no_backend_at_all_names_both_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends, "docker_unavailable_reason", lambda: "no engine (test)")
    monkeypatch.setattr(backends, "bwrap_unavailable_reason", lambda: "no bwrap (test)")
    with pytest.raises(SandboxError, match=r"no engine \(test\).*no bwrap \(test\)"):
        resolve_backend("auto")


@pytest.mark.docker
def test_auto_uses_docker_when_an_engine_answers() -> None:
    assert resolve_backend("auto") == "docker"


def test_the_backend_in_use_is_announced_once(
    base_rootfs, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(backends, "_announced", set())
    for _ in range(2):
        with open_sandbox(str(base_rootfs), backend="bwrap", workdir="/testbed") as box:
            assert box.backend == "bwrap"
    lines = [line for line in capsys.readouterr().err.splitlines() if "backend" in line]
    assert lines == ["sandboxes: using the bubblewrap backend (requested explicitly)"]


@pytest.mark.docker
def test_a_missing_image_says_how_to_get_it(docker_engine: None) -> None:
    with pytest.raises(SandboxError, match=r"not present locally.*aem sandbox build"):
        open_sandbox("aem-sandbox/instance:doesnotexist", backend="docker")


def _fake_bwrap(folder: Path, script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Put a ``bwrap`` running ``script`` first on PATH and forget earlier probes."""
    fake = folder / "bwrap"
    fake.write_text("#!/bin/sh\n" + script + "\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    namespaces.bwrap_unavailable_reason.cache_clear()


def test_bubblewrap_refused_namespaces_is_one_line_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As inside an unprivileged container: installed, but namespaces are refused."""
    _fake_bwrap(
        tmp_path,
        'echo "bwrap: Creating new namespace failed: Operation not permitted" >&2; exit 1',
        monkeypatch,
    )
    try:
        reason = namespaces.bwrap_unavailable_reason()
        assert reason is not None and "\n" not in reason
        assert "Creating new namespace failed: Operation not permitted" in reason
        assert "--privileged" in reason and "use Docker" in reason
        monkeypatch.setattr(backends, "docker_unavailable_reason", lambda: "no engine (test)")
        monkeypatch.setattr(
            backends, "bwrap_unavailable_reason", namespaces.bwrap_unavailable_reason
        )
        with pytest.raises(
            SandboxError, match=r"no engine \(test\); bubblewrap: bubblewrap cannot"
        ):
            resolve_backend("auto")
    finally:
        namespaces.bwrap_unavailable_reason.cache_clear()


def test_bubblewrap_probe_passes_where_the_sandbox_flags_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe asks for the sandbox's own namespace flags (a fake bwrap checks them)."""
    flags = " ".join(namespaces.namespace_flags(os.geteuid() == 0))
    _fake_bwrap(tmp_path, f'case "$*" in *"{flags}"*) exit 0;; esac; exit 1', monkeypatch)
    try:
        assert namespaces.bwrap_unavailable_reason() is None
    finally:
        namespaces.bwrap_unavailable_reason.cache_clear()
