from __future__ import annotations

import pytest

from sandboxes import SandboxError, backends, open_sandbox, resolve_backend


def test_unknown_backend_is_one_clear_error() -> None:
    with pytest.raises(SandboxError, match="unknown sandbox backend 'podman'"):
        resolve_backend("podman")


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
