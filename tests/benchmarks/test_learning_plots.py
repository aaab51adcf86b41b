"""The learning report's curves (``benchmarks.learning.plots``): what an arm's line averages."""

from __future__ import annotations

from typing import Any

from benchmarks.learning.plots import averaged_runs, mean_curve

KEY = "episode/success_rate"


def _run(status: str, steps: int, value: float) -> dict[str, Any]:
    return {"status": status, "curves": {KEY: [[s, value] for s in range(1, steps + 1)]}}


def test_a_seed_that_has_just_started_does_not_cut_the_mean_back() -> None:
    """Seed 0 finished 10 steps, seed 1 has 2: the arm's curve is seed 0's, all 10 steps."""
    finished, started = _run("done", 10, 0.2), _run("partial", 2, 0.6)
    steps, means, _ = mean_curve(averaged_runs([finished, started]), KEY)
    assert steps == list(range(1, 11)) and means == [0.2] * 10
    # before any seed finishes, the mean covers the steps every run has
    steps, means, _ = mean_curve(averaged_runs([_run("partial", 5, 0.2), started]), KEY)
    assert steps == [1, 2] and means == [0.4, 0.4]
