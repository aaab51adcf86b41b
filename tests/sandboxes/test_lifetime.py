"""Processes end with their owner: the watchdog, and the reaper of marked orphans."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from sandboxes.lifetime import OWNER_ENV, descendants, identity, reap_orphans, running
from sandboxes.owner import process_start


def _wait_gone(owners: list[str | None], seconds: float = 10.0) -> list[str]:
    """The processes of ``owners`` (identities) still running after up to ``seconds``."""
    deadline = time.monotonic() + seconds
    alive = [owner for owner in owners if owner and running(owner)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [owner for owner in alive if running(owner)]
    return alive


#: An owner that starts a worker which calls end_with_owner and starts a grandchild (as a
#: worker starts chromedriver), prints the three pids, then waits to be killed.
OWNER = textwrap.dedent(
    """
    import subprocess, sys, time
    worker = subprocess.Popen([sys.executable, "-c", '''
    import subprocess, sys, time
    from sandboxes.lifetime import end_with_owner
    end_with_owner()
    child = subprocess.Popen(["sleep", "600"])
    print(child.pid, flush=True)
    time.sleep(600)
    '''], stdout=subprocess.PIPE, text=True)
    grandchild = worker.stdout.readline().strip()
    print(worker.pid, grandchild, flush=True)
    time.sleep(600)
    """
)


def test_a_worker_and_what_it_started_end_when_its_owner_is_sigkilled() -> None:
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    worker, grandchild = map(int, owner.stdout.readline().split())
    assert descendants(owner.pid) == [worker, grandchild]
    tree = [identity(worker), identity(grandchild)]
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert _wait_gone(tree) == []


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
