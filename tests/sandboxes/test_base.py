from __future__ import annotations

import pytest

from sandboxes import ExecResult, Limits, SandboxError
from sandboxes.base import memory_bytes


def test_exec_result_unpacks_as_exit_code_and_output() -> None:
    result = ExecResult(3, "out", clipped_bytes=5, timed_out=False)
    code, output = result
    assert (code, output) == (3, "out")
    assert result.exit_code == 3 and result.output == "out" and result.clipped_bytes == 5


@pytest.mark.parametrize(
    ("text", "expected"), [("512m", 512 << 20), ("2g", 2 << 30), ("1024", 1024)]
)
def test_memory_sizes_parse(text: str, expected: int) -> None:
    assert memory_bytes(text) == expected


@pytest.mark.parametrize("bad", ["", "lots", "0", "-1g", "2t"])
def test_bad_sizes_are_one_clear_error(bad: str) -> None:
    with pytest.raises(SandboxError, match="cannot read the size"):
        memory_bytes(bad)


@pytest.mark.parametrize(
    "kwargs", [{"pids": 1}, {"cpus": 0}, {"command_timeout": -1}, {"memory": "much"}]
)
def test_limits_reject_unusable_values(kwargs: dict) -> None:
    with pytest.raises(SandboxError):
        Limits(**kwargs)
