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
