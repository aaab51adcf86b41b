"""Each command's summed advantage in a run's batches (``benchmarks.learning.push``)."""

from __future__ import annotations

import math

import pytest

from benchmarks.learning.drift import UNITS_FILE, UnitsWriter, read_units
from benchmarks.learning.push import (
    entropy_alpha,
    main,
    net_table,
    push_by_command,
    push_by_sign,
    sign_table,
)


def unit(
    step: int, command: str, reward: float, advantage: float, hbar: float = 0.4, group: int = 0
) -> dict:
    return {
        "step": step,
        "group": group,
        "advantage": advantage,
        "alpha": 1.0,  # as a GRPO run logs it: AEM only observes
        "surprisal": 0.5,
        "entropy": hbar,
        "entropy_after": hbar,
        "reward": reward,
        "command": command,
    }


def test_alpha_comes_from_each_turns_entropy_within_its_step_and_group() -> None:
    units = [
        unit(5, "take", -0.1, 1.0, hbar=0.1),
        unit(5, "take", -0.1, 1.0, hbar=0.6),
        unit(5, "go", 0.0, 1.0, hbar=1.1),
        unit(6, "go", 0.0, 1.0, hbar=2.0),  # the same group id at another step: its own group
        unit(6, "go", 0.0, 1.0, hbar=2.05),  # a range under the 0.1-nat gate: α = 1
    ]
    weights = [1.0, math.exp(-0.5), math.exp(-1.0)]  # H̃ = 0, 0.5, 1
    expected = [w / (sum(weights) / 3) for w in weights] + [1.0, 1.0]
    assert entropy_alpha(units) == pytest.approx(expected, rel=1e-5)
    assert entropy_alpha(units, lam=0.0) == pytest.approx([1.0] * 5)


def test_pushes_sum_each_commands_weighted_advantages_over_all_turns() -> None:
    units = [
        unit(5, "take", -0.1, 1.0, hbar=0.1),  # refused, in a won episode
        unit(5, "take", -0.1, -0.5, hbar=0.6),  # refused, in a lost one
        unit(5, "take", 0.0, 2.0, hbar=1.1),  # accepted
        unit(5, "go", 0.0, -1.0, hbar=1.1),
    ]
    alpha = entropy_alpha(units)
    got = {(r["command"], r["refused"]): r for r in push_by_command(units)}
    refused = got[("take", True)]
    assert refused["turns"] == 2 and refused["share"] == 0.5
    assert refused["advantage"] == pytest.approx(0.25)
    assert refused["alpha"] == pytest.approx((alpha[0] + alpha[1]) / 2)
    assert refused["push"] == pytest.approx((1.0 - 0.5) / 4)
    assert refused["push_alpha"] == pytest.approx((alpha[0] - 0.5 * alpha[1]) / 4)
    assert got[("go", False)]["push_alpha"] == pytest.approx(-alpha[3] / 4)
    assert got[("take", False)]["push"] == pytest.approx(0.5)
    net = net_table(push_by_command(units)).splitlines()
    take = (1.0 - 0.5 + 2.0) / 4, (alpha[0] - 0.5 * alpha[1] + 2.0 * alpha[2]) / 4
    assert net[2] == f"| `take` | 3 | {1000 * take[0]:+.1f} | {1000 * take[1]:+.1f} |"


def test_the_sign_split_shows_what_alpha_adds_to_each_side() -> None:
    """Confident replies won, uncertain ones lost: α lifts the positive side and shrinks the
    negative, so both sides add positive push; a zero advantage is on neither side."""
    units = [
        unit(5, "go", 0.0, 2.0, hbar=0.1),
        unit(5, "go", -0.1, -1.0, hbar=0.6),
        unit(5, "take", -0.1, -1.0, hbar=1.1),
        unit(5, "go", 0.0, 0.0, hbar=0.6),
    ]
    alpha = entropy_alpha(units)
    assert alpha[0] > 1 > alpha[2]
    positive, negative = push_by_sign(units)
    assert (positive["sign"], positive["turns"], positive["share"]) == ("A > 0", 1, 0.25)
    assert positive["entropy"] == pytest.approx(0.1) and positive["alpha"] == alpha[0]
    assert positive["push"] == pytest.approx(0.5)
    added = [side["push_alpha"] - side["push"] for side in (positive, negative)]
    assert added[0] == pytest.approx((alpha[0] - 1) * 2.0 / 4)
    assert negative["turns"] == 2 and negative["entropy"] == pytest.approx(0.85)
    assert added[1] == pytest.approx(-(alpha[1] - 1 + alpha[2] - 1) / 4)
    assert added[0] > 0 and added[1] > 0
    lines = sign_table([positive, negative]).splitlines()
    assert lines[2].startswith(f"| A > 0 | 1 | 25.0 % | 0.100 | {alpha[0]:.3f} | +500.0 |")


def test_rare_commands_are_counted_together_and_rows_without_commands_are_left_out() -> None:
    units = [unit(1, "go", 0.0, 0.1) for _ in range(199)] + [unit(1, "look", 0.0, 1.0)]
    old = {k: v for k, v in unit(1, "", 0.0, 5.0).items() if k not in ("reward", "command")}
    rows = push_by_command([*units, old])
    assert [(r["command"], r["turns"]) for r in rows] == [("go", 199), ("other", 1)]


def test_the_cli_reads_a_runs_unit_file_and_refuses_one_without_commands(tmp_path, capsys) -> None:
    run = tmp_path / "aem-seed0"
    run.mkdir()
    writer = UnitsWriter(run / UNITS_FILE)
    before = {k: v for k, v in unit(3, "", 0.0, 5.0).items() if k not in ("reward", "command")}
    writer.add([before, unit(5, "take", -0.1, 1.0), unit(10, "go", 0.0, -1.0)])
    assert read_units(run)[1]["command"] == "take"
    main([str(run), "--steps", "0", "5"])
    table = capsys.readouterr().out
    assert "## aem-seed0: steps 5 (trained on Σ A)\n" in table
    # a group of one: α = 1
    assert "| `take` | yes | 1 | 100.0 % | +1.000 | 1.000 | +1000.0 | +1000.0 |" in table
    assert "`go`" not in table  # step 10 is outside the asked steps
    assert "| A > 0 | 1 | 100.0 % | 0.400 | 1.000 | +1000.0 | +0.0 |" in table
    with pytest.raises(SystemExit):
        main([str(run), "--steps", "20", "30"])
    assert "no unit rows with a command" in capsys.readouterr().err
    # --by-sign needs no command: the row from before the probe recorded them counts too
    main([str(run), "--steps", "0", "5", "--by-sign"])
    table = capsys.readouterr().out
    assert f"## {run}: 2 turns of 2 logged steps\n" in table and "`take`" not in table
    assert "| A > 0 | 2 | 100.0 % | 0.400 | 1.000 | +3000.0 | +0.0 |" in table
    with pytest.raises(SystemExit):
        main([str(run), "--steps", "20", "30", "--by-sign"])
    assert "has no unit rows (units.csv.gz) in the asked steps" in capsys.readouterr().err
