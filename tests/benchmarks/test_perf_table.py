"""``aem bench perf``: rows of every perf module, a failing module as an error row."""

from __future__ import annotations

import importlib.machinery
import json
import sys
import types

import pytest

from aem_cli.main import main
from benchmarks.perf import table


def _module(monkeypatch, name: str, measure) -> None:
    full = f"benchmarks.perf.{name}"
    module = types.ModuleType(full)
    module.__spec__ = importlib.machinery.ModuleSpec(full, None)
    module.measure = measure
    monkeypatch.setitem(sys.modules, full, module)


@pytest.fixture
def perf_modules(monkeypatch):
    calls = []

    def good(quick: bool = False):
        calls.append(quick)
        return [
            {
                "benchmark": "toy",
                "metric": "steps/s",
                "ours": 1234.5,
                "baseline": 12.0,
                "ratio": 102.9,
                "unit": "steps/s",
                "note": "vs | pipe",
            }
        ]

    def bad(quick: bool = False):
        raise RuntimeError("engine missing")

    _module(monkeypatch, "perf_good", good)
    _module(monkeypatch, "perf_bad", bad)
    monkeypatch.setattr(table, "MODULES", ("perf_good", "perf_absent", "perf_bad"))
    return calls


def test_rows_gathered_failure_reported_absent_skipped(perf_modules) -> None:
    rows = table.collect(quick=True, modules=table.MODULES)
    assert perf_modules == [True]
    assert [r["module"] for r in rows] == ["perf_good", "perf_bad"]
    assert rows[0]["ours"] == 1234.5 and rows[0]["ratio"] == 102.9
    assert rows[1]["metric"] == "error" and rows[1]["error"] is True
    assert "RuntimeError: engine missing (test_perf_table.py:" in rows[1]["note"]


def test_cli_writes_markdown_and_json(perf_modules, tmp_path, capsys) -> None:
    assert main(["bench", "perf", "--quick", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "| toy | steps/s | 1,234 | 12 | 103 | steps/s | vs \\| pipe |" in printed
    assert "| perf_bad | error | — | — | — | — | RuntimeError: engine missing" in printed
    assert "Seen elsewhere: ALFWorld text env: 10–15 steps/s" in printed
    payload = json.loads((tmp_path / "perf.json").read_text())
    assert payload["quick"] is True and len(payload["rows"]) == 2
    assert (tmp_path / "perf.md").read_text() in printed
