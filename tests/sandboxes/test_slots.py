"""The host-wide bound: processes contending for the slots never hold more than the bound."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandboxes.errors import SandboxError
from sandboxes.slots import SLOTS_ENV, slot_count

#: A process that takes a slot five times and logs when it holds it (enter / leave lines,
#: with a sleep inside so that holders overlap).
CONTENDER = """
import sys, time
from sandboxes.slots import engine_slot
log = open(sys.argv[1], "a", buffering=1)
for _ in range(5):
    with engine_slot():
        log.write(f"{time.monotonic_ns()} +1\\n")
        time.sleep(0.05)
        log.write(f"{time.monotonic_ns()} -1\\n")
"""


def test_processes_never_hold_more_slots_than_the_bound(tmp_path: Path) -> None:
    env = {**os.environ, SLOTS_ENV: "2", "AEM_SANDBOX_CACHE": str(tmp_path / "cache")}
    logs = [tmp_path / f"{i}.log" for i in range(6)]
    procs = [subprocess.Popen([sys.executable, "-c", CONTENDER, str(log)], env=env) for log in logs]
    assert [proc.wait(120) for proc in procs] == [0] * len(procs)
    events = sorted(
        (int(stamp), int(step))
        for log in logs
        for stamp, step in (line.split() for line in log.read_text().splitlines())
    )
    held, peak = 0, 0
    for _, step in events:  # a leave before an enter at the same instant
        held += step
        peak = max(peak, held)
    assert len(events) == 2 * 5 * len(logs) and peak == 2


def test_the_bound_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SLOTS_ENV, "16")
    assert slot_count() == 16
    monkeypatch.delenv(SLOTS_ENV)
    assert slot_count() >= 2
    monkeypatch.setenv(SLOTS_ENV, "zero")
    with pytest.raises(SandboxError, match=SLOTS_ENV):
        slot_count()
