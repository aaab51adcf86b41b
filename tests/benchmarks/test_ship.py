"""The aem-tiny choice: training success picks the arm, held-out only gates the shipping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aem_envs.core.errors import ArgumentError
from benchmarks.learning import ship


def run(arm: str, seed: int, train: list[float], status: str = "done") -> dict:
    return {
        "name": f"{arm}-seed{seed}",
        "algo": arm,
        "seed": seed,
        "status": status,
        "curves": {"episode/success_rate": [[i + 1, v] for i, v in enumerate(train)]},
    }


def sampled(out: Path, name: str, success_percent: float, episodes: int = 720) -> None:
    folder = out / "sampled" / name
    folder.mkdir(parents=True)
    summary = {"episodes": episodes, "success_rate": success_percent, "mean_wall_time_s": 1.0}
    bench = {"summary": [summary], "planned_episodes": episodes, "finished_episodes": episodes}
    (folder / "results.json").write_text(json.dumps(bench))


def grid(out: Path, runs: list[dict]) -> Path:
    out.mkdir(exist_ok=True)
    (out / "results.json").write_text(json.dumps({"runs": runs}))
    return out


def test_train_success_averages_the_last_window_only() -> None:
    early_then_late = [1.0] * 5 + [0.2] * ship.TRAIN_WINDOW
    assert ship.train_success(run("grpo", 0, early_then_late)) == pytest.approx(0.2)


def test_the_arm_is_chosen_by_training_success_not_held_out(tmp_path: Path) -> None:
    runs = [run("grpo", s, [0.3] * 10) for s in range(3)]
    runs += [run("aem", s, [0.5] * 10) for s in range(3)]
    out = grid(tmp_path / "g", runs)
    sampled(out, "start", 10.0)
    sampled(out, "grpo-seed0", 90.0)  # a held-out score the rule must not look at
    sampled(out, "aem-seed0", 20.0)
    choice = ship.choose(out)
    assert (choice.arm, choice.run) == ("aem", "aem-seed0")
    assert choice.ships and choice.z is not None and choice.z > ship.MIN_Z


def test_a_tie_goes_to_the_baseline() -> None:
    runs = [run(arm, 0, [0.4] * 10) for arm in ("aem", "grpo")]
    assert ship.choose_arm(runs) == "grpo"


def test_the_chosen_run_does_not_ship_without_a_clear_held_out_gain(tmp_path: Path) -> None:
    runs = [run(arm, 0, [0.4 if arm == "aem" else 0.1] * 10) for arm in ("grpo", "aem")]
    out = grid(tmp_path / "g", runs)
    sampled(out, "start", 10.0)
    sampled(out, "aem-seed0", 12.0)  # +2 points over 720 episodes each: about 1.3 SE
    choice = ship.choose(out)
    assert choice.run == "aem-seed0" and not choice.ships
    assert "standard errors" in choice.reason


def test_no_choice_while_a_required_run_is_unfinished(tmp_path: Path) -> None:
    runs = [run("grpo", 0, [0.3] * 10), run("aem", 0, [0.9] * 4, status="partial")]
    with pytest.raises(ArgumentError, match="aem-seed0 is partial"):
        ship.choose(grid(tmp_path / "g", runs))


def test_a_missing_sampled_pass_is_named(tmp_path: Path) -> None:
    out = grid(tmp_path / "g", [run(arm, 0, [0.3] * 10) for arm in ("grpo", "aem")])
    choice = ship.choose(out)
    assert not choice.ships and choice.reason == "no sampled pass of grpo-seed0"
