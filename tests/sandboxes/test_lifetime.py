"""Processes end with their owner: marks, the keeper, and the reaper of marked orphans."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from sandboxes import lifetime
from sandboxes.lifetime import (
    OWNER_ENV,
    descendants,
    identity,
    is_keeper,
    reap_orphans,
    running,
)
from sandboxes.owner import process_start


def _wait_gone(owners: list[str | None], seconds: float = 10.0) -> list[str]:
    """The processes of ``owners`` (identities) still running after up to ``seconds``."""
    deadline = time.monotonic() + seconds
    alive = [owner for owner in owners if owner and running(owner)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [owner for owner in alive if running(owner)]
    return alive


#: An owner that marks its children, starts a worker which starts a grandchild (as a worker
#: starts chromedriver) and a process that leaves the tree (setsid and a background job, as
#: Chromium's crash handler does), prints the pids, then waits to be killed.
OWNER = textwrap.dedent(
    """
    import subprocess, sys, time
    from sandboxes.lifetime import mark_children
    mark_children()
    worker = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, time\\n"
         "print(subprocess.Popen(['sleep', '600']).pid, flush=True)\\ntime.sleep(600)"],
        stdout=subprocess.PIPE, text=True,
    )
    grandchild = worker.stdout.readline().strip()
    escapee = subprocess.run(
        ["setsid", "sh", "-c", "sleep 600 > /dev/null 2>&1 & echo $!"],
        capture_output=True, text=True,
    ).stdout.strip()
    print(worker.pid, grandchild, escapee, flush=True)
    time.sleep(600)
    """
)


def test_what_an_owner_started_ends_when_the_owner_is_sigkilled() -> None:
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    worker, grandchild, escapee = map(int, owner.stdout.readline().split())
    below = descendants(owner.pid)
    assert worker in below and grandchild in below and escapee not in below
    [keeper] = [pid for pid in below if is_keeper(pid)]  # one, and none of the marked ones
    tree = [identity(worker), identity(grandchild), identity(escapee), identity(keeper)]
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert _wait_gone(tree) == []


@pytest.mark.skipif(
    not lifetime._kernel_lists_children(), reason="a kernel without CONFIG_PROC_CHILDREN"
)
def test_the_kernels_children_lists_give_the_tree_a_full_scan_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    try:
        worker, grandchild, _ = map(int, owner.stdout.readline().split())
        listed = descendants(owner.pid)
        monkeypatch.setattr(lifetime, "_kernel_lists_children", lambda: False)
        scanned = descendants(owner.pid)  # as on a kernel without CONFIG_PROC_CHILDREN
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    assert sorted(listed) == sorted(scanned)
    assert listed.index(worker) < listed.index(grandchild)  # parents before their children


def test_reap_orphans_kills_marked_processes_whose_owner_is_gone() -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    marks = {
        "orphan": f"{dead.pid}:{process_start(os.getpid())}",  # a pid/start pair that is gone
        "owned": f"{os.getpid()}:{process_start(os.getpid())}",
    }
    procs = {
        name: subprocess.Popen(["sleep", "600"], env={**os.environ, OWNER_ENV: mark})
        for name, mark in marks.items()
    }
    try:
        reaped = reap_orphans()
        assert procs["orphan"].pid in reaped and procs["owned"].pid not in reaped
        assert procs["orphan"].wait(10) == -signal.SIGKILL
        assert procs["owned"].poll() is None
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
