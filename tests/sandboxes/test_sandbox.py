"""The Sandbox contract, run against both backends on a small repository at /testbed."""

from __future__ import annotations

import gc
import os
import sys
import warnings

import pytest

from sandboxes import Sandbox, SandboxError, SandboxFileError, open_sandbox
from sandboxes.perf import late_reader

from .conftest import TEST_LIMITS, TEST_MODULE


def test_exec_returns_exit_code_and_interleaved_output(box: Sandbox) -> None:
    code, output = box.exec("echo out; echo err >&2; exit 3")
    assert code == 3
    assert output == "out\nerr\n"


def test_commands_start_in_the_workdir_unless_told_otherwise(box: Sandbox) -> None:
    assert box.exec("pwd").output == "/testbed\n"
    assert box.exec("pwd", workdir="/tmp").output == "/tmp\n"
    assert box.exec("true", workdir="/no/such/dir").exit_code != 0


def test_the_repository_is_checked_out_at_the_base_commit(box: Sandbox) -> None:
    assert box.exec("git status --porcelain").output == ""
    assert box.read_file("test_calc.py") == TEST_MODULE
    code, output = box.exec("python3 -m pytest -q -p no:cacheprovider test_calc.py")
    assert code == 1 and "1 failed" in output


def test_files_written_are_read_back_and_fix_the_bug(box: Sandbox) -> None:
    box.write_file("calc.py", "def add(a, b):\n    return a + b\n")
    box.write_file("/testbed/new/dir/notes.txt", "héllo\n")
    assert box.read_file("new/dir/notes.txt") == "héllo\n"
    assert box.exec("python3 -m pytest -q -p no:cacheprovider test_calc.py").exit_code == 0


@pytest.mark.parametrize("path", ["/tmp/notes.txt", "/var/tmp/deep/notes.txt"])
def test_files_written_to_temporary_directories_are_seen_by_commands(
    box: Sandbox, path: str
) -> None:
    """``/tmp`` is a tmpfs mount under Docker: the write must land in it, not beneath it."""
    data = "tmp ✓\n" * 1000
    box.write_file(path, data)
    assert box.read_file(path) == data
    assert box.exec(f"wc -c < {path}").output == f"{len(data.encode())}\n"
    assert box.exec(f"grep -c 'tmp ✓' {path}").output == "1000\n"


def test_write_file_follows_symlinks_like_a_shell(box: Sandbox) -> None:
    box.exec("ln -s /tmp linked")
    box.write_file("linked/through.txt", "via a link\n")
    assert box.exec("cat /tmp/through.txt").output == "via a link\n"


def test_write_errors_name_the_path(box: Sandbox) -> None:
    with pytest.raises(SandboxFileError, match=r"cannot write /testbed .*[Ii]s a directory"):
        box.write_file("/testbed", "x")
    box.write_file("after.txt", "the sandbox still works\n")
    assert box.read_file("after.txt") == "the sandbox still works\n"


def test_read_file_errors_name_the_path(box: Sandbox) -> None:
    with pytest.raises(SandboxFileError, match=r"missing\.txt"):
        box.read_file("missing.txt")
    with pytest.raises(SandboxFileError, match="directory"):
        box.read_file("/testbed")


def test_diff_has_modified_and_untracked_files_but_not_ignored_ones(box: Sandbox) -> None:
    box.write_file("calc.py", "def add(a, b):\n    return a + b\n")
    box.write_file("extra.py", "X = 1\n")
    box.exec("mkdir -p __pycache__ && echo junk > __pycache__/calc.pyc")
    patch = box.diff()
    assert "-    return a - b\n+    return a + b\n" in patch
    assert "diff --git a/extra.py b/extra.py\nnew file mode 100644" in patch
    assert "__pycache__" not in patch
    # The repository's own index is untouched: extra.py is still untracked.
    assert box.exec("git status --porcelain").output == " M calc.py\n?? extra.py\n"


def test_diff_applies_cleanly_to_a_pristine_checkout(box: Sandbox) -> None:
    box.write_file("calc.py", "def add(a, b):\n    return a + b\n")
    patch = box.diff()
    box.exec("git stash -q -u")
    box.write_file("/tmp/fix.patch", patch)
    code, output = box.exec("git apply /tmp/fix.patch && python3 -m pytest -q -p no:cacheprovider")
    assert code == 0, output


def test_timeout_kills_the_command_and_says_so(box: Sandbox) -> None:
    result = box.exec("echo before; sleep 30", timeout=1)
    assert result.timed_out and result.exit_code == 137
    assert result.output.startswith("before\n")
    assert "time limit" in result.output


def test_output_is_clipped_to_the_limit_with_the_size_stated(box: Sandbox) -> None:
    result = box.exec("seq 1 100000")
    assert result.clipped_bytes > 500_000
    assert result.output.startswith("1\n2\n3\n") and result.output.endswith("99999\n100000\n")
    assert f"{result.clipped_bytes:,}" in result.output
    assert len(result.output) < box.limits.output_chars + 300


def test_output_arrives_whole_when_the_client_reads_late(box: Sandbox) -> None:
    """As under load: the output has arrived before the client reads the response (docker-py's
    own reader then lost it, most times, with exit code 0)."""
    with late_reader():
        results = [box.exec("echo hello") for _ in range(8)]
    assert [(r.exit_code, r.output) for r in results] == [(0, "hello\n")] * 8


def test_closed_sandbox_refuses_work(box: Sandbox) -> None:
    box.close()
    box.close()  # idempotent
    with pytest.raises(SandboxError, match="closed"):
        box.exec("true")


def test_non_positive_timeout_is_rejected(box: Sandbox) -> None:
    with pytest.raises(SandboxError, match="timeout"):
        box.exec("true", timeout=0)


def test_bwrap_refuses_a_workdir_the_image_lacks(base_rootfs) -> None:
    from sandboxes.bwrap_sandbox import BwrapSandbox

    with pytest.raises(SandboxError, match="needs the directory /nowhere"):
        BwrapSandbox(str(base_rootfs), rootfs=base_rootfs, workdir="/nowhere")


def test_sandboxes_release_every_socket_and_pipe(
    backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No command, write or close leaves a socket, pipe or client behind.

    Python reports a file object collected while open as a ``ResourceWarning`` from its
    finalizer, where an exception cannot propagate: made an error, it reaches
    ``sys.unraisablehook``, which records it here.
    """
    fixture = "instance_image" if backend == "docker" else "bwrap_instance_image"
    image = request.getfixturevalue(fixture)
    unraisable: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda hook: unraisable.append(repr(hook)))

    def episode() -> None:
        with open_sandbox(image, backend=backend, limits=TEST_LIMITS) as box:
            box.exec("echo out; echo err >&2")
            box.exec("sleep 30", timeout=1)
            box.write_file("/tmp/scratch.txt", "x")
            box.read_file("/tmp/scratch.txt")
            box.diff()

    def open_descriptors() -> int:
        gc.collect()
        return len(os.listdir("/proc/self/fd"))

    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        episode()  # first use fills the process's caches (e.g. whether an engine answers)
        before = open_descriptors()
        episode()
        episode()
        after = open_descriptors()
    assert unraisable == []
    assert after == before
