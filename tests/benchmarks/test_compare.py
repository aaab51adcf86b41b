"""``compare``: per env and per task type deltas between two runs."""

from __future__ import annotations

import pytest

from benchmarks.compare import compare, format_comparison
from tests.benchmarks.conftest import make_results


def test_deltas_per_env_and_task_type() -> None:
    rows = compare(make_results(model_wins=1), make_results(model_wins=4))
    model = {(r["env_id"], r["task_type"]): r for r in rows if r["policy"] == "smollm2"}
    before, after, delta = model[("aem/ALFWorld-v0", None)]["success_rate"]
    assert (before, after) == (pytest.approx(100 / 6), pytest.approx(400 / 6))
    assert delta == pytest.approx(50.0)
    assert model[("aem/ALFWorld-v0", "pick_heat_then_place_in_recep")]["success_rate"] == (
        0.0,
        100.0,
        100.0,
    )
    assert model[("aem/WebShop-v0", "fashion")]["success_rate"] == (0.0, 0.0, 0.0)
    text = format_comparison(rows, "a", "b")
    assert "| smollm2 | aem/ALFWorld-v0 | (all) | 6/6 | 16.7 → 66.7 (+50.0) |" in text


def test_single_policies_with_different_names_are_paired() -> None:
    a, b = make_results(), make_results(model_wins=6)
    for results, name in ((a, "hf:before"), (b, "hf:after")):
        results["policies"] = [{"name": name, "model": True}]
        for table in ("summary", "by_task_type"):
            results[table] = [
                {**r, "policy": name} for r in results[table] if r["policy"] == "smollm2"
            ]
    rows = compare(a, b)
    assert rows and all(r["policy"] == "hf:before → hf:after" for r in rows)
    assert "No policy and env in common" in format_comparison(compare(a, make_results()), "a", "b")
