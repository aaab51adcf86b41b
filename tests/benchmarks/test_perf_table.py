"""``aem bench perf``: rows of every perf module, each in its own process; failures as rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aem_cli.main import main
from benchmarks.perf import table

GOOD = """
import os
def measure(quick=False):
    return [{"benchmark": "toy", "metric": "steps/s", "ours": 1234.5, "baseline": 12.0,
             "ratio": 102.9, "unit": "steps/s", "note": f"vs | pipe, quick={quick}",
             "pid": os.getpid()}]
"""
BAD = """
def measure(quick=False):
    raise RuntimeError("engine missing")
"""
SLOW = """
import time
def measure(quick=False):
    time.sleep(30)
"""


@pytest.fixture
def perf_package(tmp_path, monkeypatch) -> str:
    package = tmp_path / "fakeperf"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, source in (("good", GOOD), ("bad", BAD), ("slow", SLOW)):
        (package / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "fakeperf"


def test_rows_gathered_in_subprocesses_failures_reported_absent_skipped(perf_package) -> None:
    names = ("good", "absent", "bad", "slow")
    rows = table.collect(quick=True, modules=names, package=perf_package, timeout=5)
    assert [r["module"] for r in rows] == ["good", "bad", "slow"]
    good, bad, slow = rows
    assert good["ours"] == 1234.5 and good["note"] == "vs | pipe, quick=True"
    assert good["pid"] != __import__("os").getpid()
    assert bad["metric"] == "error" and bad["note"] == "RuntimeError: engine missing (bad.py:3)"
    assert slow["error"] is True and slow["note"] == "timed out after 5 s"


def test_cli_writes_markdown_and_json(perf_package, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(table, "MODULES", ("good", "bad"))
    real_collect = table.collect
    monkeypatch.setattr(
        table, "collect", lambda quick, **kw: real_collect(quick, package=perf_package)
    )
    assert main(["bench", "perf", "--quick", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "| toy | steps/s | 1,234 | 12 | 103 | steps/s | vs \\| pipe, quick=True |" in printed
    assert "| bad | error | — | — | — | — | RuntimeError: engine missing (bad.py:3) |" in printed
    assert "Seen elsewhere: ALFWorld text env: 10–15 steps/s" in printed
    payload = json.loads((tmp_path / "perf.json").read_text())
    assert payload["quick"] is True and len(payload["rows"]) == 2
    assert (tmp_path / "perf.md").read_text() in printed


def test_perf_modules_share_one_command_line(capsys) -> None:
    from benchmarks.perf import perf_main, perf_row

    calls = []

    def measure(quick: bool = False) -> list[dict]:
        calls.append(quick)
        return [perf_row("demo", "step p50", 2.0, 10.0, "ms", "side by side")]

    assert perf_main(measure, "Demo perf.\n\nMore.", "short run", ["--quick"]) == 0
    out = capsys.readouterr().out
    assert calls == [True]
    assert "| demo | step p50 | 2 | 10 | 5 | ms | side by side |" in out


def test_cli_only_measures_the_named_benchmarks(tmp_path, monkeypatch, capsys) -> None:
    asked: list = []
    monkeypatch.setattr(table, "collect", lambda quick, **kw: asked.append(kw["modules"]) or [])
    out = str(tmp_path)
    assert main(["bench", "perf", "--only", "train_step", "--only", "swe", "--out", out]) == 0
    assert asked == [["train_step", "swe"]]
    assert main(["bench", "perf", "--only", "nosuch", "--out", str(tmp_path)]) == 2
    assert "invalid choice: 'nosuch'" in capsys.readouterr().err


def test_the_performance_page_holds_this_writers_table() -> None:
    """docs/performance.md's table is `aem bench perf`'s markdown: its header, its columns in
    every row, and its footer."""
    page = (Path(__file__).resolve().parents[2] / "docs/performance.md").read_text()
    row = dict.fromkeys(table.COLUMNS, "x")
    header, separator = table.render_markdown([row], quick=True).splitlines()[:2]
    assert f"\n{header}\n{separator}\n" in page
    rows = page.split(separator, 1)[1].split("\n\n", 1)[0].strip().splitlines()
    assert rows and all(r.count(" | ") == len(table.COLUMNS) - 1 for r in rows)
    assert "Measured with `aem bench perf --quick` (quick mode)" in page
