"""Suite files: the bundled ones parse, bad ones fail in one line, task selection, real data."""

from __future__ import annotations

import pytest

from aem_envs.core.errors import DataError
from benchmarks.suite import EnvSuite, Suite, SuiteError, bundled_suites, load_suite, parse_suite


def test_bundled_suites_parse_and_real_data_suites_declare_their_variables() -> None:
    assert {"quick", "full", "alfworld-real", "swebench-verified"} <= set(bundled_suites())
    for name in bundled_suites():
        suite = load_suite(name)
        assert suite.name == name and suite.envs and suite.description
    assert load_suite("alfworld-real").envs[0].requires == ("ALFWORLD_DATA",)
    assert load_suite("swebench-verified").envs[0].requires == ("SWEBENCH_DATASET",)
    smoke = load_suite("smoke")
    assert all(e.tasks is not None and e.tasks <= 3 for e in smoke.envs)
    assert all(e.model_max_steps is not None for e in smoke.envs)


def test_real_data_suite_names_the_missing_variable_or_path(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    with pytest.raises(DataError, match=r"needs \$ALFWORLD_DATA .*alfworld-download"):
        load_suite("alfworld-real").check_requirements()
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "absent"))
    with pytest.raises(DataError, match="absent does not exist"):
        load_suite("alfworld-real").check_requirements()
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    suite = load_suite("alfworld-real")
    suite.check_requirements()
    assert suite.envs[0].kwargs == {"data_dir": str(tmp_path)}


def test_task_selection_spreads_over_the_split_and_honours_limits() -> None:
    ids = [f"t{i}" for i in range(12)]
    assert EnvSuite("e", tasks=4).select(ids) == ["t0", "t3", "t6", "t9"]
    assert EnvSuite("e").select(ids, limit=2) == ["t0", "t1"]
    assert EnvSuite("e", tasks=50).select(ids) == ids
    assert EnvSuite("e", task_ids=("t5", "t1")).select(ids) == ["t5", "t1"]
    with pytest.raises(SuiteError, match="not in split"):
        EnvSuite("e", task_ids=("zz",)).select(ids)


def test_model_policies_get_the_tighter_step_limit() -> None:
    entry = EnvSuite("e", kwargs={"a": 1}, max_steps=30, model_max_steps=5)
    assert entry.env_kwargs(model=False) == {"a": 1, "max_steps": 30}
    assert entry.env_kwargs(model=True) == {"a": 1, "max_steps": 5}
    assert EnvSuite("e").env_kwargs(model=True) == {}


def test_policy_keywords_by_spec_then_by_form() -> None:
    suite = Suite(
        "s",
        "",
        (EnvSuite("e"),),
        policy_kwargs={"hf": {"temperature": 0}, "hf:runs/a": {"temperature": 1}},
    )
    assert suite.kwargs_for("hf:runs/a") == {"temperature": 1}
    assert suite.kwargs_for("hf:runs/b") == {"temperature": 0}
    assert suite.kwargs_for("smollm2") == {}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "must be a mapping"),
        ({"name": "x"}, "'envs' must be a non-empty list"),
        ({"name": "x", "envs": [{"env": "a"}], "colour": 1}, r"unknown key\(s\) \['colour'\]"),
        ({"name": "x", "envs": [{"split": "a"}]}, "needs 'env: <id>'"),
        ({"name": "x", "envs": [{"env": "a", "tasks": 0}]}, "'tasks' must be a positive"),
        ({"name": "x", "envs": [{"env": "a", "max_steps": "9"}]}, "'max_steps' must be"),
        ({"name": "x", "seeds": [], "envs": [{"env": "a"}]}, "'seeds' must be"),
        ({"name": "x", "policies": {"a": 1}, "envs": [{"env": "a"}]}, "'policies' must map"),
    ],
)
def test_malformed_suites_are_rejected_with_the_reason(raw, message) -> None:
    with pytest.raises(SuiteError, match=message):
        parse_suite(raw)


def test_unknown_names_missing_files_and_bad_yaml(tmp_path) -> None:
    with pytest.raises(SuiteError, match="unknown suite 'nope'; choose one of"):
        load_suite("nope")
    with pytest.raises(SuiteError, match="does not exist"):
        load_suite(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(SuiteError, match="not valid YAML"):
        load_suite(bad)
