from __future__ import annotations

import pytest

from aem_cli.main import main


def test_build_needs_bundle_and_commit_together(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sandbox", "build", "--commit", "abc"]) == 2
    assert "--bundle and --commit go together" in capsys.readouterr().err


@pytest.mark.docker
def test_ls_and_gc_report(capsys: pytest.CaptureFixture[str], base_image: str) -> None:
    assert main(["sandbox", "ls"]) == 0
    out = capsys.readouterr().out
    assert base_image in out and "containers:" in out
    assert main(["sandbox", "gc"]) == 0
    assert "container(s) removed" in capsys.readouterr().out


@pytest.mark.docker
def test_build_prints_the_base_tag(capsys: pytest.CaptureFixture[str], base_image: str) -> None:
    assert main(["sandbox", "build"]) == 0
    assert capsys.readouterr().out.splitlines() == [base_image]


def test_gc_layers_removes_layer_root_file_systems_but_not_the_base(
    tmp_path,
    no_engine: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from sandboxes.cache import EXPORT_MARK, LAYER_MARK
    from sandboxes.rootfs import base_rootfs_path, rootfs_path

    monkeypatch.setenv("AEM_SANDBOX_CACHE", str(tmp_path))
    base = base_rootfs_path()
    layer = rootfs_path("aem-sandbox/instance:0123")
    exported = tmp_path / "rootfs" / "export_0123"
    for path in (base, layer, exported):
        path.mkdir(parents=True)
    (layer / LAYER_MARK).write_text("aem-sandbox/instance:0123\n")
    (exported / EXPORT_MARK).write_text("sha256:0\n")
    assert main(["sandbox", "gc", "--layers"]) == 0
    assert "2 layer root file system(s) removed" in capsys.readouterr().out
    assert base.exists() and not layer.exists() and not exported.exists()
