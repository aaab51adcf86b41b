"""Step-by-step paired comparison of training curves (the setting probes' rule)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks.learning.probe import compare, main


def run(tmp_path: Path, name: str, rows: dict[int, tuple[float, float]]) -> Path:
    """A run folder whose metrics.csv logs (success, valid rate) per step, with a held-out row
    between them as the harness writes it."""
    folder = tmp_path / name
    folder.mkdir()
    lines = ["step,heldout/success_rate,episode/success_rate,episode/valid_rate"]
    lines += [f"{s},,{ok},{valid}" for s, (ok, valid) in rows.items()]
    lines.append("10,0.5,,")
    (folder / "metrics.csv").write_text("\n".join(lines) + "\n")
    return folder


def test_the_difference_is_paired_by_step_and_the_window_is_inclusive(tmp_path: Path) -> None:
    # The steps' difficulty moves both runs together; the candidate is 0.1 (+/- 0.02) better.
    base = run(tmp_path, "base", {s: (0.1 * (s % 3), 0.5) for s in range(1, 11)})
    shifts = [0.12, 0.08, 0.12, 0.08, 0.12, 0.08]
    cand = run(tmp_path, "cand", {s: (0.1 * (s % 3) + shifts[s - 3], 0.5) for s in range(3, 9)})
    (name, success), (_, valid) = compare(base, [cand], 3, 8)
    assert name == "cand" and success.steps == 6
    assert success.difference == pytest.approx(0.1)
    assert success.se == pytest.approx(0.02 * math.sqrt(6 / 5) / math.sqrt(6))
    # The shared step difficulty is not counted as noise: unpaired, the base's own spread
    # over steps (0, 0.1, 0.2) would leave z near 2.
    assert success.z > 10
    assert valid.difference == 0 and valid.se == 0 and valid.z == 0


def test_the_command_prints_a_table_and_refuses_a_folder_without_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = run(tmp_path, "base", {1: (0.1, 0.5), 2: (0.2, 0.6)})
    cand = run(tmp_path, "cand", {1: (0.2, 0.5), 2: (0.2, 0.7)})
    main([str(base), str(cand), "--steps", "1-2"])
    assert "| cand | episode/success_rate | 2 | 0.150 | 0.200 | +0.050" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([str(base), str(tmp_path), "--steps", "1-2"])
    assert "holds no metrics.csv" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(base), str(cand), "--steps", "9-2"])
    assert "give FIRST-LAST" in capsys.readouterr().err
