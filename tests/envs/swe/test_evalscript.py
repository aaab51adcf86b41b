"""The eval script derived from a test patch has swebench's markers and resets test files."""

from __future__ import annotations

import pytest

from aem_envs.swe.evalscript import (
    HEREDOC,
    files_to_run,
    instance_test_command,
    make_eval_script,
    patched_files,
)

PATCH = """\
diff --git a/tests/test_a.py b/tests/test_a.py
index 1111111..2222222 100644
--- a/tests/test_a.py
+++ b/tests/test_a.py
@@ -1 +1,2 @@
 x = 1
+y = 2
diff --git a/tests/new test.py b/tests/new test.py
new file mode 100644
"""


def test_patched_files_in_order():
    assert patched_files(PATCH) == ["tests/test_a.py"]


def test_script_runs_touched_files_and_every_file_the_test_lists_name():
    ids = ["tests/test_a.py::test_x", "tests/other.py::test_y[a b]", "test_z (mod.Case)"]
    files = files_to_run(PATCH, ids)
    assert files == ["tests/test_a.py", "tests/other.py"]
    lines = make_eval_script("abc", PATCH, files).splitlines()
    assert 'for f in tests/test_a.py tests/other.py; do if [ -e "$f" ]' in "\n".join(lines)
    run = lines[lines.index(": '>>>>> Start Test Output'") + 1]
    assert run == 'python3 -m pytest -rA -p no:cacheprovider "${aem_test_files[@]}"'


def test_an_instance_test_command_replaces_pytest():
    assert instance_test_command({"install_config": '{"test_cmd": "pytest -x -rA"}'}) == (
        "pytest -x -rA"
    )
    assert instance_test_command({"test_cmd": ["make setup", "pytest -rA"]}) == (
        "make setup && pytest -rA"
    )
    assert instance_test_command({}) is None
    script = make_eval_script("abc", PATCH, test_command="tox -e py --")
    assert 'tox -e py -- "${aem_test_files[@]}"' in script


def test_script_has_markers_and_resets_before_and_after():
    script = make_eval_script("abc123", PATCH)
    lines = script.splitlines()
    start = lines.index(": '>>>>> Start Test Output'")
    end = lines.index(": '>>>>> End Test Output'")
    reset = "git checkout abc123 -- tests/test_a.py 2>/dev/null || rm -f -- tests/test_a.py"
    assert lines.index(reset) < start < end < len(lines) - 1 - lines[::-1].index(reset)
    assert lines[0] == "#!/bin/bash" and "cd /testbed" in lines


def test_delimiter_inside_patch_is_refused():
    with pytest.raises(ValueError):
        make_eval_script("abc", PATCH + HEREDOC + "\n")
