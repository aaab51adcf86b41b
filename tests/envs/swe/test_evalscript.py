"""The eval script derived from a test patch has swebench's markers and resets test files."""

from __future__ import annotations

import pytest

from aem_envs.swe.evalscript import HEREDOC, make_eval_script, patched_files, pytest_command

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


def test_command_runs_touched_python_files_with_report_all():
    assert pytest_command(PATCH).endswith("-rA -p no:cacheprovider tests/test_a.py")


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
