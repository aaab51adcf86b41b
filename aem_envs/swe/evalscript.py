"""Eval scripts in swebench 5.x's shape, for instances that do not ship their own.

swebench's harness runs an instance's ``eval_script`` in the instance container and parses
the text between its ``>>>>> Start Test Output`` / ``>>>>> End Test Output`` markers. For
instances without one (the bundled tasks' generator, outside bundle-backed datasets), the
script is derived here from the instance alone: reset the files the test patch touches, apply
the test patch, run the tests, reset again — the steps swebench's own specs generate for
Python repositories.

Which tests run: every test file named in FAIL_TO_PASS and PASS_TO_PASS (the ``path`` of a
``path::name`` id) plus every Python file the test patch touches. Datasets whose test lists
come from a full test run (SWE-Gym, SWE-smith, SWE-rebench-style data) list tests in files the
test patch never touches; running only the touched files would grade those as failed and
leave even the gold patch unresolved. Files that do not exist after the test patch (a list
naming a file the repository lacks) are left out rather than failing the whole run. The
command is ``python3 -m pytest -rA``, or the instance's own test command when it has one
(``test_cmd``, or ``install_config.test_cmd`` as SWE-rebench writes it), with the files
appended.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

#: Heredoc delimiter for the test patch; swebench uses the same kind of unlikely word.
HEREDOC = "EOF_AEM_TEST_PATCH"
#: The parser whose ids survive spaces in parametrized test names (``test_x[in 3 hours]``).
DEFAULT_LOG_PARSER = "parse_log_pytest_v2"
DEFAULT_EVAL_TYPE = "pass_and_fail"
PYTEST = "python3 -m pytest -rA -p no:cacheprovider"
#: The bash array the derived script collects the existing test files in.
FILES_VAR = "aem_test_files"

_DIFF_PATH_RE = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def patched_files(patch: str) -> list[str]:
    """Paths a unified git diff touches, in order, without duplicates."""
    return _unique(new for _old, new in _DIFF_PATH_RE.findall(patch))


def files_of_ids(test_ids: Iterable[str]) -> list[str]:
    """The Python files that pytest-style ids (``tests/test_a.py::test_x[...]``) live in."""
    files = (test_id.split("::", 1)[0] for test_id in test_ids if "::" in test_id)
    return _unique(path for path in files if path.endswith(".py"))


def files_to_run(test_patch: str, test_ids: Iterable[str] = ()) -> list[str]:
    """The test files a derived script runs: the patched Python files, then the ids' files."""
    patched = [path for path in patched_files(test_patch) if path.endswith(".py")]
    return _unique([*patched, *files_of_ids(test_ids)])


def instance_test_command(row: Mapping[str, Any]) -> str | None:
    """The instance's own test command (``test_cmd`` or ``install_config.test_cmd``), if any.

    A list of commands (SWE-rebench allows one) runs them in order; the test files are
    appended to the last.
    """
    command = row.get("test_cmd")
    config = row.get("install_config")
    if not command and config:
        if isinstance(config, str):
            try:
                config = json.loads(config)
            except json.JSONDecodeError:
                config = None
        if isinstance(config, Mapping):
            command = config.get("test_cmd")
    if isinstance(command, list | tuple):
        command = " && ".join(str(part) for part in command if str(part).strip())
    text = str(command or "").strip()
    return text or None


def make_eval_script(
    base_commit: str,
    test_patch: str,
    files: Iterable[str] | None = None,
    *,
    test_command: str | None = None,
    workdir: str = "/testbed",
) -> str:
    """A bash eval script that swebench's ``make_test_spec`` and ``get_logs_eval`` accept.

    ``files``: the test files to run (default: the Python files ``test_patch`` touches; see
    :func:`files_to_run`); ``test_command``: the command they are appended to (default pytest).
    """
    if HEREDOC in test_patch:
        raise ValueError(f"the test patch contains the heredoc delimiter {HEREDOC}")
    base = shlex.quote(base_commit)
    run = list(files) if files is not None else files_to_run(test_patch)
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
        f"{FILES_VAR}=()",
        f"for f in {' '.join(map(shlex.quote, run))}; do "
        f'if [ -e "$f" ]; then {FILES_VAR}+=("$f"); fi; done',
        ": '>>>>> Start Test Output'",
        f'{test_command or PYTEST} "${{{FILES_VAR}[@]}}"',
        ": '>>>>> End Test Output'",
        *reset,
    ]
    return "\n".join(lines) + "\n"
