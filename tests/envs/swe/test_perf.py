"""benchmarks/perf/swe.py produces rows in the shape ``aem bench perf`` gathers."""

from __future__ import annotations

import pytest

from benchmarks.perf import swe as perf
from benchmarks.perf.table import COLUMNS


def test_ratio_is_baseline_over_ours():
    row = perf._row("x", 2.0, 6.0, "s", "n")
    assert set(row) == set(COLUMNS) and row["ratio"] == 3.0 and row["benchmark"] == "swe"
    assert perf._row("y", 1.0, None, "s", "n")["ratio"] is None


@pytest.mark.docker
def test_start_and_command_rows_are_measured():
    from aem_envs.swe.env import SWEEnv

    env = SWEEnv(backend="docker")
    try:
        image = env.image_for(next(iter(env.instances().values())))
    finally:
        env.close()
    rows = [perf.measure_start(image, 1), *perf.measure_command(image, 2)]
    for row in rows:
        assert row["ours"] > 0 and row["baseline"] > 0 and row["ratio"] > 0
    late = perf.measure_late_reader(image, 2)
    assert late["ours"] == 0 and 0 <= late["baseline"] <= 2 and set(late) == set(COLUMNS)


@pytest.mark.docker
def test_concurrency_play_counts_episodes_and_leaves_no_container():
    from benchmarks.perf import swe_concurrency

    run = swe_concurrency.play(2, 2)
    assert run["finished"] >= 2 and run["won"] == run["finished"]
    assert run["per_minute"] > 0 and run["p95"] >= run["p50"] > 0
    assert run["infra_errors"] == 0 and run["left"] == 0 and run["grading"] > 0
