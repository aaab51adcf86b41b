"""The action mix: commands tried and refused, read from a bench run's episodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.actionmix import command, main, mix, table
from benchmarks.results import SCHEMA


def bench_out(tmp_path: Path, name: str, episodes: list[list[tuple[str, bool]]]) -> Path:
    """An `aem bench --out` folder whose episodes played these (action, valid) turns."""
    out = tmp_path / name
    (out / "episodes").mkdir(parents=True)
    records = []
    for i, turns in enumerate(episodes):
        trajectory = f"episodes/e{i}.jsonl"
        rows = [{"kind": "episode", "observation": "start"}]
        rows += [{"kind": "step", "action": a, "info": {"action_valid": v}} for a, v in turns]
        (out / trajectory).write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        records.append({"trajectory": trajectory})
    (out / "results.json").write_text(json.dumps({"schema": SCHEMA, "episodes": records}))
    return out


@pytest.mark.parametrize(
    ("action", "expected"),
    [("take egg 1 from fridge 1", "take"), ("search[red shoes]", "search"), ("", ""), (None, "")],
)
def test_a_command_is_the_actions_first_word(action: str | None, expected: str) -> None:
    assert command(action) == expected


def test_turns_are_counted_by_command_with_their_refusals(tmp_path: Path) -> None:
    turns = [("go to desk 1", True)] * 120 + [("take pen 1 from desk 1", False)] * 60
    turns += [("take pen 1 from desk 1", True)] * 19 + [("xyzzy", False)]
    out = bench_out(tmp_path, "run", [turns[:50], turns[50:]])
    counted = mix(out)
    assert counted.total == 200
    assert counted.share("take") == pytest.approx(0.395)
    assert counted.refused_share("take") == pytest.approx(60 / 79)
    text = table([counted])
    assert "| run | 200 | 30.5% |" in text
    assert "`other` (refused)" in text and "xyzzy" not in text  # under 1 %: lumped
    assert "39.5% (76%)" in text and "0.5% (100%)" in text


def test_missing_episodes_are_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = bench_out(tmp_path, "run", [[("go to desk 1", True)]])
    (out / "episodes" / "e0.jsonl").unlink()
    with pytest.raises(SystemExit):
        main([str(out)])
    assert "is missing: the action mix reads the episodes" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(tmp_path)])
    assert "does not exist; give a run folder of `aem bench`" in capsys.readouterr().err
