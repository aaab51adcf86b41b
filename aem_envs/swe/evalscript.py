"""Eval scripts in swebench 5.x's shape, for instances that do not ship their own.

swebench's harness runs an instance's ``eval_script`` in the instance container and parses
the text between its ``>>>>> Start Test Output`` / ``>>>>> End Test Output`` markers. Our
bundled tasks and external bundle-backed instances are pytest projects, so their script is
derived here from the instance alone: reset the test files, apply the test patch, run
pytest with ``-rA`` on the files the test patch touches, reset again — the same steps
swebench's own specs generate for Python repositories.
"""

from __future__ import annotations

import re
import shlex

#: Heredoc delimiter for the test patch; swebench uses the same kind of unlikely word.
HEREDOC = "EOF_AEM_TEST_PATCH"
#: The parser whose ids survive spaces in parametrized test names (``test_x[in 3 hours]``).
DEFAULT_LOG_PARSER = "parse_log_pytest_v2"
DEFAULT_EVAL_TYPE = "pass_and_fail"
PYTEST = "python3 -m pytest -rA -p no:cacheprovider"

_DIFF_PATH_RE = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)


def patched_files(patch: str) -> list[str]:
    """Paths a unified git diff touches, in order, without duplicates."""
    seen: dict[str, None] = {}
    for _old, new in _DIFF_PATH_RE.findall(patch):
        seen.setdefault(new, None)
    return list(seen)


def pytest_command(test_patch: str) -> str:
    """The pytest command line that runs the test files ``test_patch`` touches."""
    files = [path for path in patched_files(test_patch) if path.endswith(".py")]
    return " ".join([PYTEST, *map(shlex.quote, files)])


def make_eval_script(base_commit: str, test_patch: str, workdir: str = "/testbed") -> str:
    """A bash eval script that swebench's ``make_test_spec`` and ``get_logs_eval`` accept."""
    if HEREDOC in test_patch:
        raise ValueError(f"the test patch contains the heredoc delimiter {HEREDOC}")
    base = shlex.quote(base_commit)
    # Per file, so a test file that the base commit lacks (new in the test patch) is removed
    # instead of making the whole checkout fail.
    reset = [
        f"git checkout {base} -- {path} 2>/dev/null || rm -f -- {path}"
        for path in map(shlex.quote, patched_files(test_patch))
    ]
    lines = [
        "#!/bin/bash",
        "set -uxo pipefail",
        f"cd {shlex.quote(workdir)}",
        *reset,
        f"git apply -v - <<'{HEREDOC}'",
        test_patch.rstrip("\n"),
        HEREDOC,
        ": '>>>>> Start Test Output'",
        pytest_command(test_patch),
        ": '>>>>> End Test Output'",
        *reset,
    ]
    return "\n".join(lines) + "\n"
