"""Aggregation into results.json: rates, means, grouping and order, and reading it back."""

from __future__ import annotations

import json

import pytest

from aem_envs.core.errors import DataError
from benchmarks.results import load_results, write_results


def test_summary_rates_and_means_per_policy_and_env(results) -> None:
    rows = {(r["policy"], r["env_id"]): r for r in results["summary"]}
    model = rows[("smollm2", "aem/ALFWorld-v0")]
    assert model["episodes"] == 6
    assert model["success_rate"] == pytest.approx(100 / 6)
    assert model["mean_score"] == pytest.approx(100 * (1 + 5 * 0.25) / 6)
    assert model["mean_steps"] == pytest.approx((4 + 5 * 10) / 6)
    assert model["invalid_action_rate"] == pytest.approx(100 * 10 / 54)
    assert model["mean_prompt_tokens"] == 900 and model["mean_completion_tokens"] == 40
    assert rows[("expert", "aem/WebShop-v0")]["success_rate"] == 100.0
    assert [(r["policy"], r["env_id"]) for r in results["summary"]] == [
        ("expert", "aem/ALFWorld-v0"),
        ("expert", "aem/WebShop-v0"),
        ("smollm2", "aem/ALFWorld-v0"),
        ("smollm2", "aem/WebShop-v0"),
    ]


def test_task_type_rows_and_bookkeeping(results) -> None:
    types = {
        (r["policy"], r["task_type"]): r["success_rate"]
        for r in results["by_task_type"]
        if r["env_id"] == "aem/ALFWorld-v0"
    }
    assert types[("smollm2", "pick_and_place_simple")] == 100.0
    assert types[("smollm2", "pick_two_obj_and_place")] == 0.0
    assert len(types) == 12
    assert results["planned_episodes"] == results["finished_episodes"] == 16
    assert results["suite"]["bundled_data"] is True


def test_results_round_trip_and_bad_files(tmp_path, results) -> None:
    write_results(tmp_path, results)
    assert load_results(tmp_path) == json.loads(json.dumps(results))
    with pytest.raises(DataError, match="does not exist"):
        load_results(tmp_path / "nothing")
    (tmp_path / "x.json").write_text('{"schema": 99}')
    with pytest.raises(DataError, match="not a results file"):
        load_results(tmp_path / "x.json")
    (tmp_path / "y.json").write_text("{")
    with pytest.raises(DataError, match="not valid JSON"):
        load_results(tmp_path / "y.json")
