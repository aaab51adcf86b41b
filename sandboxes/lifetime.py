"""Nothing outlives its owner: worker processes, browsers and drivers end when their owner dies.

Containers are labelled with their owner and reaped (:mod:`sandboxes.reaper`); this module does
the same for host processes, two ways:

- :func:`end_with_owner`, called in a worker process (a benchmark worker, a vector-env
  worker): a watchdog thread polls the owner (pid and start time, so a reused pid does not
  fool it); when the owner is gone, however it died — ``SIGKILL`` included, which no handler
  sees — it kills every process the worker started (browsers, drivers, their children) and
  ends the worker. Why a thread rather than ``PR_SET_PDEATHSIG`` alone: the parent-death signal
  would end the worker but not what the worker started, and it fires when the *thread* that
  forked exits, which thread pools do routinely.
- :func:`mark_children` and :func:`reap_orphans`: processes started after ``mark_children``
  carry their owner's identity in the environment variable :data:`OWNER_ENV`, which their own
  children inherit; ``reap_orphans`` kills every marked process whose owner is gone. A run
  calls it before it starts, so a resumed run never races a survivor of a killed one, even
  one whose owner was killed before its watchdog could act.

Linux only (``/proc``); elsewhere both are no-ops.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

from .owner import process_start

#: The environment variable naming a process's owner, ``<pid>:<start time>``.
OWNER_ENV = "AEM_OWNER"
#: Seconds between two looks at the owner.
POLL_S = 0.5
_PROC = Path("/proc")


def identity(pid: int) -> str | None:
    """``<pid>:<start time>`` of a running process (None if there is none): what a mark holds."""
    start = process_start(pid)
    return None if start is None else f"{pid}:{start}"


def running(owner: str) -> bool:
    """Whether the process ``owner`` (``<pid>:<start>``) runs; a zombie (killed, not yet
    waited for) does not."""
    pid, _, start = owner.partition(":")
    if not pid.isdigit() or process_start(int(pid)) != start:
        return False
    try:
        stat = (_PROC / pid / "stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] not in ("Z", "X")


def mark_children() -> None:
    """Make this process the owner of every process it starts from now on."""
    me = identity(os.getpid())
    if me is not None:
        os.environ[OWNER_ENV] = me


def _children() -> dict[int, list[int]]:
    """Parent pid → child pids, of every process on the host."""
    tree: dict[int, list[int]] = {}
    for entry in _PROC.iterdir() if _PROC.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` in the process tree, parents before their children."""
    tree, found, queue = _children(), [], [pid]
    while queue:
        for child in tree.get(queue.pop(0), []):
            found.append(child)
            queue.append(child)
    return found


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def kill_descendants() -> None:
    """SIGKILL every process this one started, and theirs, until none is left."""
    for _ in range(10):  # a dying parent may still fork once: look again
        found = descendants(os.getpid())
        if not found:
            return
        _kill(found)
        time.sleep(0.05)


def end_with_owner(owner_pid: int | None = None) -> None:
    """End this process, and everything it started, when ``owner_pid`` (default: the
    parent) dies. Also marks this process as the owner of what it starts."""
    owner = identity(os.getppid() if owner_pid is None else owner_pid)
    mark_children()
    me = os.environ.get(OWNER_ENV)
    if owner is None:
        return

    def watch() -> None:
        while running(owner):
            time.sleep(POLL_S)
        kill_descendants()
        # What left the tree (a daemonizing crash handler) still carries the mark.
        _kill([pid for pid, mark in marked_processes().items() if mark == me])
        os._exit(1)

    threading.Thread(target=watch, name="aem-owner-watchdog", daemon=True).start()


def marked_processes() -> dict[int, str]:
    """Every process marked by :func:`mark_children` (but this one): pid → owner identity."""
    marked: dict[int, str] = {}
    needle = f"{OWNER_ENV}=".encode()
    for entry in _PROC.iterdir() if _PROC.is_dir() else ():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        for item in environ.split(b"\0"):
            if item.startswith(needle):
                marked[int(entry.name)] = item[len(needle) :].decode(errors="replace")
                break
    return marked


def reap_orphans() -> list[int]:
    """Kill every process marked by :func:`mark_children` whose owner is gone; return them.

    Repeated until a pass finds none: killing an orphaned worker orphans what it started.
    """
    reaped: list[int] = []
    while found := [pid for pid, owner in marked_processes().items() if not running(owner)]:
        found = [pid for pid in found if pid not in reaped]  # killed, not yet waited for
        if not found:
            break
        _kill(found)
        reaped += found
        time.sleep(0.05)
    return reaped
