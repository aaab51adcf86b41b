"""Each command's summed advantage in a run's batches (``benchmarks.learning.push``)."""

from __future__ import annotations

import pytest

from benchmarks.learning.drift import UNITS_FILE, UnitsWriter, read_units
from benchmarks.learning.push import main, push_by_command


def unit(step: int, command: str, reward: float, advantage: float, alpha: float) -> dict:
    return {
        "step": step,
        "group": 0,
        "advantage": advantage,
        "alpha": alpha,
        "surprisal": 0.5,
        "entropy": 0.4,
        "entropy_after": 0.4,
        "reward": reward,
        "command": command,
    }


def test_pushes_sum_each_commands_weighted_advantages_over_all_turns(tmp_path) -> None:
    units = [
        unit(5, "take", -0.1, 1.0, 1.2),  # refused, in a won episode
        unit(5, "take", -0.1, -0.5, 0.8),  # refused, in a lost one
        unit(5, "take", 0.0, 2.0, 1.0),  # accepted
        unit(5, "go", 0.0, -1.0, 0.5),
    ]
    got = {(r["command"], r["refused"]): r for r in push_by_command(units)}
    refused = got[("take", True)]
    assert refused["turns"] == 2 and refused["share"] == 0.5
    assert refused["advantage"] == pytest.approx(0.25)
    assert refused["alpha"] == pytest.approx(1.0)
    assert refused["push"] == pytest.approx((1.0 - 0.5) / 4)
    assert refused["push_alpha"] == pytest.approx((1.2 - 0.4) / 4)
    assert got[("go", False)]["push_alpha"] == pytest.approx(-0.5 / 4)
    assert got[("take", False)]["push"] == pytest.approx(0.5)


def test_rare_commands_are_counted_together_and_rows_without_commands_are_left_out() -> None:
    units = [unit(1, "go", 0.0, 0.1, 1.0) for _ in range(199)] + [unit(1, "look", 0.0, 1.0, 1.0)]
    old = {k: v for k, v in unit(1, "", 0.0, 5.0, 1.0).items() if k not in ("reward", "command")}
    rows = push_by_command([*units, old])
    assert [(r["command"], r["turns"]) for r in rows] == [("go", 199), ("other", 1)]


def test_the_cli_reads_a_runs_unit_file_and_refuses_one_without_commands(tmp_path, capsys) -> None:
    run = tmp_path / "aem-seed0"
    run.mkdir()
    writer = UnitsWriter(run / UNITS_FILE)
    before = {k: v for k, v in unit(3, "", 0.0, 5.0, 1.0).items() if k not in ("reward", "command")}
    writer.add([before, unit(5, "take", -0.1, 1.0, 1.5), unit(10, "go", 0.0, -1.0, 1.0)])
    assert read_units(run)[1]["command"] == "take"
    main([str(run), "--steps", "0", "5"])
    table = capsys.readouterr().out
    assert "## aem-seed0: steps 5\n" in table and "| `take` | yes | 1 | 100.0 % |" in table
    assert "+1000.0 | +1500.0 |" in table and "`go`" not in table
    with pytest.raises(SystemExit):
        main([str(run), "--steps", "20", "30"])
    assert "no unit rows with a command" in capsys.readouterr().err
