"""Real SWE-bench rows (one Django, one SymPy, one pytest) graded the way swebench grades them.

``data/real_rows.json`` holds fields of three rows of the public SWE-bench dataset
(django__django-11001, sympy__sympy-13480, pytest-dev__pytest-5227): ids, repository, version,
commits and test patch as published; the FAIL_TO_PASS / PASS_TO_PASS lists are shortened and
the pytest row keeps the first two hunks of its test patch (what the eval-script derivation
reads is unchanged by that); the gold patch is left out. ``swebench_eval_script`` is the script
swebench 4.x's per-repository specs build for the row, written out in the shape of
swebench-built scripts of the same repositories (reset the test files, apply the test patch in
a heredoc, run the repository's own test command, reset again).

The installed swebench (5.x) builds no scripts: its rows carry ``eval_script``. So a real row
with one is graded with it verbatim, and a row without one stops with one line, because a
derived pytest run cannot grade Django's ``runtests.py`` or SymPy's ``bin/test`` suites.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from aem_envs.core.errors import DataError
from aem_envs.swe.evalscript import files_to_run, make_eval_script
from aem_envs.swe.tasks import SWEInstance

ROWS: list[dict[str, Any]] = json.loads(
    (Path(__file__).with_name("data") / "real_rows.json").read_text(encoding="utf-8")
)
IDS = [row["instance_id"] for row in ROWS]


def _row(instance_id: str, *, with_script: bool) -> dict[str, Any]:
    row = dict(next(r for r in ROWS if r["instance_id"] == instance_id))
    script = row.pop("swebench_eval_script")
    if with_script:
        row["eval_script"] = script
    return row


def _parts(script: str) -> tuple[list[list[str]], str, str]:
    """The ``git checkout <base> <files>`` resets, the heredoc body, and the test command."""
    resets = [
        shlex.split(line)[3:]
        for line in script.splitlines()
        if line.startswith("git checkout ") and "--" not in line
    ]
    body = re.search(r"<<'(\w+)'\n(.*?)\n\1\n(.*?)\n", script, re.DOTALL)
    assert body is not None, script
    return resets, body.group(2), body.group(3)


@pytest.mark.parametrize("instance_id", IDS)
def test_a_row_without_eval_script_stops_with_one_line_naming_the_fix(instance_id: str) -> None:
    instance = SWEInstance.from_dict(_row(instance_id, with_script=False), None)
    with pytest.raises(DataError) as caught:
        _ = instance.eval_script
    message = str(caught.value)
    assert "\n" not in message
    assert instance_id in message and "has no eval_script" in message
    assert "add eval_script or test_cmd to the row" in message


@pytest.mark.parametrize("instance_id", IDS)
def test_a_row_with_swebench_script_is_graded_with_it_verbatim(instance_id: str) -> None:
    from swebench.harness.utils import make_test_spec

    row = _row(instance_id, with_script=True)
    instance = SWEInstance.from_dict(row, None)
    assert instance.eval_script == row["eval_script"]
    spec = make_test_spec(instance.spec_fields(instance.swebench_image_name()))
    _, _, command = _parts(row["eval_script"])
    assert any(command in line for line in spec.eval_script_list)
    assert row["FAIL_TO_PASS"] == spec.FAIL_TO_PASS


@pytest.mark.parametrize("instance_id", IDS)
def test_our_test_files_are_the_files_swebench_resets(instance_id: str) -> None:
    row = _row(instance_id, with_script=True)
    resets, body, command = _parts(row["eval_script"])
    ids = [*row["FAIL_TO_PASS"], *row["PASS_TO_PASS"]]
    assert resets == [files_to_run(row["test_patch"], ids)] * 2
    assert body == row["test_patch"].rstrip("\n")
    # Why Django and SymPy rows need swebench's script: their suites are not run by pytest.
    assert ("pytest" in command) == (row["repo"] == "pytest-dev/pytest")


def test_the_derived_script_matches_swebench_on_a_pytest_repository() -> None:
    """For a pytest repository (the path bundle-backed rows take), our derived script resets
    the same files, applies the same test patch and runs pytest on the same files."""
    row = _row("pytest-dev__pytest-5227", with_script=True)
    ids = [*row["FAIL_TO_PASS"], *row["PASS_TO_PASS"]]
    ours = make_eval_script(
        row["base_commit"], row["test_patch"], files_to_run(row["test_patch"], ids)
    )
    theirs_resets, theirs_body, theirs_command = _parts(row["eval_script"])
    our_resets = [
        shlex.split(line)[2:3] + shlex.split(line)[4:5]
        for line in ours.splitlines()
        if line.startswith("git checkout ")
    ]
    assert [[row["base_commit"], *files] for files in theirs_resets] == our_resets
    _, our_body, _ = _parts(ours)
    assert our_body == theirs_body
    loop = next(line for line in ours.splitlines() if line.startswith("for f in "))
    assert shlex.split(loop)[3:-1][0].rstrip(";") == theirs_command.split()[-1]
    assert "python3 -m pytest -rA" in ours and theirs_command.startswith("pytest -rA")
