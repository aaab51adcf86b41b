"""The integrity rules one by one, without a sandbox: which paths grading restores, which
patches it refuses, and which part of a log the parser may read.

The battery in ``test_integrity.py`` shows each attack fails end to end; these pin the rules
it rests on, so a regression names the rule instead of an attack.
"""

from __future__ import annotations

import subprocess

import pytest

from aem_envs.swe.integrity import (
    END_MARKER,
    PROTECTED_PATHS,
    START_MARKER,
    cut_after_pytest_summary,
    harness_log,
    is_protected,
    refused_paths,
    spec_test_paths,
)

PROTECTED = [
    "conftest.py",
    "pkg/sub/conftest.py",
    "tests/test_core.py",
    "src/pkg/tests/helpers.py",
    "testing/util.py",
    "e2e/run.js",
    "test_top.py",
    "pkg/core_test.py",
    "pytest.ini",
    ".pytest.ini",
    "tox.ini",
    "setup.cfg",
    "pyproject.toml",
    "sitecustomize.py",
    "lib/usercustomize.py",
    "evil.pth",
    "pkg/__pycache__/core.cpython-311.pyc",
    "pkg/core.pyc",
    "pkg.egg-info/entry_points.txt",
    "site/pkg-1.0.dist-info/entry_points.txt",
    "bin/python",
    "bin/python3.11",
    "scripts/pytest",
    "py.test",
    ".pytest_cache/v/cache/lastfailed",
]
NOT_PROTECTED = [
    "pkg/core.py",
    "pkg/testing.py",  # a module named like the folder, not inside one
    "pkg/contest.py",
    "pkg/tests_helpers.py",
    "latest/notes.txt",
    "pkg/python_utils.py",
    "docs/pytest-usage.rst",
    "setup.py",
    "README.md",
]


@pytest.mark.parametrize("path", PROTECTED)
def test_test_infrastructure_paths_are_protected(path: str) -> None:
    assert is_protected(path)


@pytest.mark.parametrize("path", NOT_PROTECTED)
def test_source_paths_are_not_protected(path: str) -> None:
    assert not is_protected(path)


def test_bash_reads_the_protected_pattern_as_python_does() -> None:
    """``restore.sh`` matches with bash's ``=~`` (POSIX ERE): both must agree on every case."""
    paths = PROTECTED + NOT_PROTECTED
    script = 'for p in "$@"; do if [[ $p =~ $PATTERN ]]; then echo 1; else echo 0; fi; done'
    result = subprocess.run(
        ["bash", "-c", script, "bash", *paths],
        env={"PATTERN": PROTECTED_PATHS, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.split() == ["1" if is_protected(p) else "0" for p in paths]


def test_spec_test_paths_are_the_test_patch_files_and_the_files_of_the_test_ids() -> None:
    test_patch = "diff --git a/checks/verify.py b/checks/verify.py\n--- a/checks/verify.py\n"
    ids = ["suite/check_api.py::test_a", "suite/check_api.py::test_b[x]"]
    assert spec_test_paths(test_patch, ids) == ["checks/verify.py", "suite/check_api.py"]


def _patch(old: str, new: str) -> str:
    return f"diff --git a/{old} b/{new}\n--- a/{old}\n+++ b/{new}\n@@ -1 +1 @@\n-a\n+b\n"


@pytest.mark.parametrize(
    "patch",
    [
        _patch(".git/hooks/post-checkout", ".git/hooks/post-checkout"),
        _patch("pkg/../../etc/profile", "pkg/../../etc/profile"),
        "--- a//etc/passwd\n+++ b//etc/passwd\n@@ -1 +1 @@\n-a\n+b\n",
        "diff --git a/x b/x\nrename from x\nrename to .git/config\n",
        _patch("sub/.git/config", "sub/.git/config"),
    ],
)
def test_patches_leaving_the_repository_or_entering_git_are_refused(patch: str) -> None:
    assert refused_paths(patch)


def test_ordinary_patches_and_new_files_are_not_refused() -> None:
    assert refused_paths(_patch("pkg/core.py", "pkg/core.py")) == []
    new_file = "diff --git a/pkg/new.py b/pkg/new.py\n--- /dev/null\n+++ b/pkg/new.py\n"
    assert refused_paths(new_file) == []
    assert refused_paths(_patch("pkg/gitutil.py", "pkg/.gitignore")) == []


SUMMARY = "========== 1 failed, 3 passed in 0.12s =========="


def test_the_log_outside_the_test_region_keeps_only_harness_markers() -> None:
    log = "\n".join(
        [
            "+ git apply patch.diff",
            "PASSED tests/test_a.py::test_fake",  # printed by patch application: not counted
            ">>>>> Applied Patch",
            START_MARKER,
            "PASSED tests/test_a.py::test_real",
            SUMMARY,
            END_MARKER,
            "PASSED tests/test_a.py::test_after_end",
        ]
    )
    kept = harness_log(log, pytest_output=True).split("\n")
    assert "PASSED tests/test_a.py::test_real" in kept and ">>>>> Applied Patch" in kept
    assert "PASSED tests/test_a.py::test_fake" not in kept
    assert "PASSED tests/test_a.py::test_after_end" not in kept


def test_marker_look_alikes_inside_the_region_are_dropped_and_failures_kept() -> None:
    log = "\n".join(
        [
            START_MARKER,
            ">>>>> Test Exit Code: 0",  # a test printing the harness's line
            "FAILED tests/test_a.py::test_x",
            ">>>>> Tests Timed Out",
        ]
    )
    kept = harness_log(log, pytest_output=False).split("\n")
    assert ">>>>> Test Exit Code: 0" not in kept
    assert "FAILED tests/test_a.py::test_x" in kept and ">>>>> Tests Timed Out" in kept


def test_results_after_pytests_summary_or_without_one_do_not_count() -> None:
    lines = ["PASSED a::x", SUMMARY, "PASSED a::printed_by_atexit"]
    assert cut_after_pytest_summary(lines) == lines[:2]
    assert cut_after_pytest_summary(["PASSED a::x", "PASSED a::y"]) == []  # killed or clipped
    quiet = ["PASSED a::x", "1 passed in 0.01s"]  # -q prints the summary without rules
    assert cut_after_pytest_summary(quiet) == quiet
    coloured = ["PASSED a::x", "\x1b[32m= 1 passed in 0.01s =\x1b[0m"]
    assert cut_after_pytest_summary(coloured) == coloured


def test_a_log_without_a_start_marker_keeps_only_harness_lines() -> None:
    log = "PASSED tests/test_a.py::test_x\n>>>>> Patch Apply Failed\n"
    assert harness_log(log, pytest_output=True) == ">>>>> Patch Apply Failed"
