"""The bundled instances are complete, in swebench's format, and load from external files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aem_envs.core.errors import DataError
from aem_envs.swe.env import SWEEnv
from aem_envs.swe.tasks import (
    DATA_DIR,
    ImageMissingError,
    SWEInstance,
    ensure_image,
    load_instances,
    read_bundled_rows,
)

SWEBENCH_FIELDS = {
    "repo",
    "instance_id",
    "base_commit",
    "patch",
    "test_patch",
    "problem_statement",
    "hints_text",
    "created_at",
    "version",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "environment_setup_commit",
    "eval_script",
    "log_parser",
    "eval_type",
}


def test_at_least_twelve_instances_over_four_repositories():
    rows = read_bundled_rows()
    assert len(rows) >= 12
    assert len({row["repo"] for row in rows}) >= 4
    for row in rows:
        assert set(row) >= SWEBENCH_FIELDS, row["instance_id"]
        assert json.loads(row["FAIL_TO_PASS"]) and json.loads(row["PASS_TO_PASS"])
        assert row["patch"].startswith("diff --git") and row["test_patch"].startswith("diff --git")
        assert (DATA_DIR / f"{row['repo'].replace('/', '__')}.bundle").is_file()


def test_some_test_ids_contain_spaces():
    ids = [t for row in read_bundled_rows() for t in json.loads(row["FAIL_TO_PASS"])]
    assert any(" " in test_id for test_id in ids)


def test_task_set_summary_counts_by_repository():
    summary = SWEEnv.task_set_summary()
    assert set(summary) == {"test"}
    assert sum(summary["test"].values()) == len(read_bundled_rows())
    assert "inikit" in summary["test"]


def test_constructing_the_env_starts_nothing():
    env = SWEEnv()
    assert env._sandbox is None and env._instances is None
    env.close()


def test_external_jsonl_with_bundles_dir(tmp_path: Path):
    row = read_bundled_rows()[0]
    dataset = tmp_path / "mine.jsonl"
    dataset.write_text(json.dumps(row) + "\n")
    bundles = tmp_path / "bundles"
    bundles.mkdir()
    name = f"{row['repo'].replace('/', '__')}.bundle"
    (bundles / name).write_bytes((DATA_DIR / name).read_bytes())
    (instance,) = load_instances(dataset, bundles)
    assert instance.instance_id == row["instance_id"]
    assert instance.bundle == bundles / name
    assert instance.data["FAIL_TO_PASS"] == json.loads(row["FAIL_TO_PASS"])


def test_missing_fields_name_the_field(tmp_path: Path):
    dataset = tmp_path / "bad.jsonl"
    dataset.write_text(json.dumps({"instance_id": "x__y-1", "repo": "x/y"}) + "\n")
    with pytest.raises(DataError, match="base_commit"):
        load_instances(dataset)


def test_missing_dataset_file_is_one_clear_error(tmp_path: Path):
    with pytest.raises(DataError, match="does not exist"):
        load_instances(tmp_path / "absent.jsonl")


def test_dataset_folder_says_to_pass_the_file_inside(tmp_path: Path):
    (tmp_path / "test.jsonl").write_text("")
    with pytest.raises(DataError) as caught:
        load_instances(tmp_path)
    message = str(caught.value)
    assert "is a folder" in message and "test.jsonl" in message and "\n" not in message


@pytest.mark.parametrize("dataset", [None, "rows.jsonl"])
def test_missing_bundles_dir_is_refused_at_once(tmp_path: Path, dataset):
    path = None if dataset is None else tmp_path / dataset
    if path is not None:
        path.write_text(json.dumps(read_bundled_rows()[0]) + "\n")
    with pytest.raises(DataError) as caught:
        load_instances(path, tmp_path / "absent")
    message = str(caught.value)
    assert "does not exist" in message and "<owner>__<name>.bundle" in message
    assert "\n" not in message


def test_real_row_without_eval_script_stops_with_one_line():
    row = dict(read_bundled_rows()[0], instance_id="django__django-11099", repo="django/django")
    row.pop("eval_script")
    instance = SWEInstance.from_dict(row, None)
    with pytest.raises(DataError) as caught:
        _ = instance.eval_script
    message = str(caught.value)
    assert "django__django-11099" in message and "no eval_script" in message
    assert "bundles_dir" in message and "\n" not in message


def test_eval_script_is_derived_when_absent():
    row = dict(read_bundled_rows()[0])
    shipped = row.pop("eval_script")
    for key in ("log_parser", "eval_type"):
        row.pop(key)
    instance = SWEInstance.from_dict(row, DATA_DIR)
    assert instance.eval_script == shipped
    assert instance.spec_fields("img")["log_parser"] == "parse_log_pytest_v2"


def test_real_swebench_image_name_and_missing_image_error():
    row = {**read_bundled_rows()[0], "instance_id": "django__django-11099"}
    instance = SWEInstance.from_dict(row, None)
    name = "sweb.eval.x86_64.django_1776_django-11099:latest"
    assert instance.swebench_image_name() == name
    assert ensure_image(instance, image_exists=lambda tag: tag == name) == name
    with pytest.raises(ImageMissingError, match="docker load"):
        ensure_image(instance, image_exists=lambda tag: False)


def test_parquet_dataset_loads_through_swebench(tmp_path: Path):
    pyarrow = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = read_bundled_rows()[:2]
    path = tmp_path / "two.parquet"
    pq.write_table(pyarrow.Table.from_pylist(rows), path)
    loaded = load_instances(path, DATA_DIR)
    assert [i.instance_id for i in loaded] == sorted(r["instance_id"] for r in rows)
    assert all(i.bundle is not None for i in loaded)
