"""Reward integrity: grading sees the agent's source changes and the harness's own output only.

A policy rewarded for "the tests pass" learns to change the tests, not the code. Three guards:

- **Protected paths** (:data:`PROTECTED_PATHS`). After the agent's patch is applied in the
  grading sandbox, every changed path that belongs to the test infrastructure goes back to the
  base commit (or is deleted if the base commit lacks it) by ``restore.sh``: test files (a
  ``test``/``tests``/``testing``/``e2e`` directory anywhere in the path, ``test_*.py``,
  ``*_test.py``, and every file the instance's own test patch and test lists name),
  ``conftest.py`` anywhere, pytest's configuration files (``pytest.ini``, ``.pytest.ini``,
  ``tox.ini``, ``setup.cfg``, ``pyproject.toml``: whole files, since a pytest section is one
  part of them and nothing else in them matters to a test run of an already installed
  checkout), interpreter start-up hooks (``sitecustomize.py``, ``usercustomize.py``, ``.pth``),
  compiled code (``__pycache__``, ``.pyc``/``.pyo``), package metadata (``*.egg-info``,
  ``*.dist-info``: a ``pytest11`` entry point loads a plugin), files named like the runner
  (``python``, ``python3.N``, ``pytest``, ``py.test``), and ``.pytest_cache``. ``restore.sh``
  adds two rules that need the sandbox: files in a ``PATH`` directory inside the repository,
  and new top-level modules that shadow an installed or standard-library one (a root
  ``pytest.py`` would replace pytest under ``python -m pytest``).
- **Refused patches** (:func:`refused_paths`): a patch naming a path outside the repository or
  inside ``.git`` (hooks, config) is not applied at all.
- **The parsed log** (:func:`harness_log`): the log parser reads only the test region the eval
  script marks, cut after pytest's final summary line, with marker look-alikes removed from it,
  plus the harness's own marker lines; nothing the patch application printed and nothing a
  test printed after pytest finished can count.

Gold-safety: swebench's collector puts every hunk whose path contains ``test``, ``tests``,
``testing`` or ``e2e`` into the test patch, so the gold patch never touches a test path under
these rules; the configuration and metadata rules can in principle hit a gold patch (one
that edits ``setup.cfg``), which the tests check for the bundled tasks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from aem_envs.swe.evalscript import files_of_ids, patched_files

#: The in-container restore step (bash), uploaded into the grading sandbox.
RESTORE_SCRIPT = Path(__file__).with_name("restore.sh")

#: Paths (relative to the repository root) that grading restores to the base commit. A POSIX
#: extended regular expression, matched by ``restore.sh`` (bash ``=~``) and by Python alike.
PROTECTED_PATHS = (
    r"(^|/)(test|tests|testing|e2e|__pycache__|\.pytest_cache|\.git|[^/]*\.egg-info"
    r"|[^/]*\.dist-info)(/|$)"
    r"|(^|/)(conftest\.py|pytest\.ini|\.pytest\.ini|tox\.ini|setup\.cfg|pyproject\.toml"
    r"|sitecustomize\.py|usercustomize\.py|python|python3|python3\.[0-9]+|pytest|py\.test"
    r"|test_[^/]*\.py|[^/]*_test\.py)$"
    r"|\.(pth|pyc|pyo)$"
)
_PROTECTED_RE = re.compile(PROTECTED_PATHS)

#: swebench's start / end markers of the test output. Spelled out, not imported: importing
#: ``swebench.harness`` takes seconds (a test pins them to swebench's constants).
START_MARKER = ">>>>> Start Test Output"
END_MARKER = ">>>>> End Test Output"
HARNESS_PREFIX = ">>>>> "
#: swebench's markers of a failed run; wherever they appear they can only fail a grade.
FAILURE_MARKERS = (
    ">>>>> Patch Apply Failed",
    ">>>>> Reset Failed",
    ">>>>> Tests Errored",
    ">>>>> Tests Timed Out",
)
#: pytest's final line: ``==== 1 failed, 24 passed, 2 warnings in 0.12s (0:00:00) ====`` (or
#: without the rules under ``-q``).
_PYTEST_SUMMARY_RE = re.compile(
    r"^(=+ )?(no tests ran|\d+ [a-z]+(, \d+ [a-z]+)*) in \d+(\.\d+)?s( \([\d:.]+\))?( =+)?$"
)
_ESCAPES_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|[\x00-\x08\x0b-\x1f]")
_HEADER_RE = re.compile(
    r"^(?:diff --git a/(\S+) b/(\S+)|(?:---|\+\+\+) (\S+)|(?:rename|copy) (?:from|to) (.+))$",
    re.MULTILINE,
)


def is_protected(path: str) -> bool:
    """Whether grading restores ``path`` (relative to the repository root) to the base commit."""
    return _PROTECTED_RE.search(path) is not None


def spec_test_paths(test_patch: str, test_ids: Iterable[str]) -> list[str]:
    """The instance's own test files: those its test patch touches and its test ids name."""
    return list(dict.fromkeys([*patched_files(test_patch), *files_of_ids(test_ids)]))


def refused_paths(patch: str) -> list[str]:
    """Paths in ``patch``'s headers that leave the repository or enter ``.git``.

    ``git apply`` refuses them, but the ``patch`` fallback of swebench's apply chain would
    write ``.git/hooks`` (code the eval script's own ``git`` calls then run) or follow ``..``
    on some versions; such a patch is graded as not applied instead.
    """
    found = []
    for match in _HEADER_RE.finditer(patch):
        for raw in filter(None, match.groups()):
            path = raw.split("\t", 1)[0]
            if path == "/dev/null":
                continue
            if match.group(0).startswith(("---", "+++", "diff")):
                path = path.split("/", 1)[1] if "/" in path else path
            parts = path.split("/")
            if path.startswith("/") or ".." in parts or ".git" in parts:
                found.append(raw)
    return list(dict.fromkeys(found))


def _is_marker(line: str, marker: str) -> bool:
    """Whether ``line`` is ``marker`` as the eval script prints it (``echo`` or ``set -x``)."""
    return line.strip() in (marker, f"+ : '{marker}'", f"+ echo '{marker}'", f": '{marker}'")


def cut_after_pytest_summary(lines: list[str]) -> list[str]:
    """``lines`` up to pytest's last final summary line; none if pytest never printed one.

    Result lines printed after pytest finished (an ``atexit`` hook, a leftover process) do
    not count, and a run whose summary is missing (killed, or clipped away by output
    flooding) has no results at all.
    """
    clean = [_ESCAPES_RE.sub("", line).strip() for line in lines]
    ends = [i for i, line in enumerate(clean) if _PYTEST_SUMMARY_RE.match(line)]
    return lines[: ends[-1] + 1] if ends else []


def harness_log(log: str, *, pytest_output: bool) -> str:
    """The part of an evaluation log that the log parser may read.

    The test region runs from the first start marker to the first end marker after it; with
    ``pytest_output`` it is cut after pytest's final summary. Inside it, lines that look like
    harness markers are dropped (a test printing ``>>>>> Test Exit Code: 0``). Outside it, only
    the harness's own marker lines are kept: patch application and the eval script's set-up
    print file names and diffs, which the patch controls. Failure markers are kept wherever
    they are (a run killed at its time limit has no end marker).
    """
    lines = log.split("\n")
    start = next((i for i, line in enumerate(lines) if _is_marker(line, START_MARKER)), None)
    if start is None:
        return "\n".join(line for line in lines if line.startswith(HARNESS_PREFIX))
    rest = lines[start + 1 :]
    end = next((i for i, line in enumerate(rest) if _is_marker(line, END_MARKER)), len(rest))
    region = cut_after_pytest_summary(rest[:end]) if pytest_output else rest[:end]
    before = [line for line in lines[:start] if line.startswith(HARNESS_PREFIX)]
    after = [line for line in rest[end + 1 :] if line.startswith(HARNESS_PREFIX)]
    kept = [line for line in region if HARNESS_PREFIX not in line]
    failures = [line for line in rest[: end + 1] if line.startswith(FAILURE_MARKERS)]
    return "\n".join([*before, START_MARKER, *kept, END_MARKER, *after, *failures]) + "\n"
