"""The small-agent grid's blocks in README.md and docs/results.md: what the committed
results.json makes of them, rewritten between their markers, and stale pages found."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from aem_envs.core.errors import DataError
from benchmarks.learning.readme import (
    BEGIN,
    END,
    PAGES,
    RESULTS_DIR,
    ROOT,
    main,
    readme_block,
    stale_pages,
)
from benchmarks.learning.report import hours


def test_the_committed_pages_quote_the_committed_grid() -> None:
    """Fails when results.json was committed without `python -m benchmarks.learning.readme`."""
    assert stale_pages(ROOT) == [], "run `python -m benchmarks.learning.readme` and commit"


def test_the_block_quotes_the_table_the_start_and_the_cost() -> None:
    results = json.loads((ROOT / RESULTS_DIR / "results.json").read_text())
    block = readme_block(results)
    row = next(line for line in block.splitlines() if line.startswith("| GRPO |"))
    assert row.count(" | ") == 3  # estimator, —, +AEM, paired difference
    prose = " ".join(block.split())
    start = results["start"]["heldout_success"]
    assert f"The start: greedy {100 * start:.1f} %" in prose
    done = sum(run["status"] == "done" for run in results["runs"])
    assert f"Cost so far ({done}/{len(results['runs'])} runs done, " in prose
    cost = results["cost"]
    if cost["wall_s"] is None:  # no run recorded its processes yet (a grid just started)
        assert "h of wall time" not in prose
        assert f"{hours(cost['step_s'])} h of training steps by TRL's `step_time`" in prose
    else:
        assert f"{hours(cost['wall_s'])} h of wall time and {hours(cost['cpu_s'])} CPU h" in prose
        assert f"`step_time` counts {hours(cost['step_s'])} h of training steps" in prose
    assert f"{RESULTS_DIR}/plots/learning.png" in block


@pytest.fixture()
def pages(tmp_path: Path) -> Path:
    """A copy of the pages and the committed results, blocks emptied."""
    for page in PAGES:
        text = (ROOT / page).read_text()
        head, rest = text.split(BEGIN, 1)
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).write_text(f"{head}{BEGIN}\nold\n{END}{rest.split(END, 1)[1]}")
    (tmp_path / RESULTS_DIR).mkdir(parents=True)
    shutil.copy(ROOT / RESULTS_DIR / "results.json", tmp_path / RESULTS_DIR)
    return tmp_path


def test_stale_blocks_are_found_then_rewritten_in_place(pages: Path) -> None:
    assert stale_pages(pages) == list(PAGES)
    assert stale_pages(pages, write=True) == list(PAGES)
    assert stale_pages(pages) == []
    for page in PAGES:
        assert (pages / page).read_text() == (ROOT / page).read_text()


def test_check_reports_stale_pages_and_writes_nothing(
    pages: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("benchmarks.learning.readme.ROOT", pages)
    before = (pages / "README.md").read_text()
    assert main(["--check"]) == 1
    assert capsys.readouterr().out == "".join(f"{page}: stale\n" for page in PAGES)
    assert (pages / "README.md").read_text() == before


def test_a_page_without_its_markers_is_named(pages: Path) -> None:
    (pages / "README.md").write_text("# no block here\n")
    with pytest.raises(DataError, match=r"README.md: needs one .*small-agent grid: begin"):
        stale_pages(pages)
