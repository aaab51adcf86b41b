"""Nothing outlives its owner: workers, browsers and drivers end when the process that started
them dies, however it dies.

Containers are labelled with their owner and reaped (:mod:`sandboxes.reaper`); this module does
the same for host processes. :func:`mark_children` puts the calling process's identity (pid and
start time, so a reused pid does not fool it) in the environment variable :data:`OWNER_ENV`,
which every process it starts from then on inherits, and their children after them; and it
starts a *keeper* for the caller: a small process in a session of its own that polls the
owner and, once it is gone — ``SIGKILL`` included, which no handler of the owner sees — kills
the processes marked with the owner, then every marked process whose owner is gone
(:func:`reap_orphans`: a killed worker's browser, its driver, Chromium's crash handlers,
which have left the process tree), and exits. Why marks rather than the process tree: an
orphan is re-parented to init and leaves the tree, and a daemonizing child leaves it at once.
Why a keeper rather than ``PR_SET_PDEATHSIG``: the parent-death signal ends one child, not
what that child started, and it fires when the *thread* that forked exits, which thread
pools do routinely.

Every aem entry point that starts processes (``aem bench``, ``aem serve``, the start of a
local Ray for ``aem train --ray`` and the Ray env workers) calls :func:`take_ownership` before
it starts any: it reaps first, so a resumed
run never races a survivor of a killed one even if that one's keeper was killed with it, then
marks. Marking before Ray starts matters: Ray's own agents outlive a driver killed with
``SIGKILL``.

Linux only (``/proc``); elsewhere nothing is marked or reaped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

from .owner import process_start

#: The environment variable naming a process's owner, ``<pid>:<start time>``.
OWNER_ENV = "AEM_OWNER"
#: Seconds between two looks at the owner.
POLL_S = 0.5
#: Seconds to wait for killed processes to be gone (a process in uninterruptible sleep, e.g.
#: on a slow disk, dies late; the keeper must not wait forever for it).
KILL_WAIT_S = 5.0
_PROC = Path("/proc")
#: What a keeper runs (and how :func:`is_keeper` knows one).
_KEEPER_CALL = "from sandboxes.lifetime import keep; keep()"


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
    """Make this process the owner of every process it starts from now on, and start its
    keeper (once per process), which ends them when this process dies."""
    global _kept
    me = identity(os.getpid())
    if me is None:
        return
    os.environ[OWNER_ENV] = me
    if _kept != me:  # a forked child inherits the module's state, not its keeper
        _kept = me
        _start_keeper(me)


_kept: str | None = None


def take_ownership() -> None:
    """Kill what killed runs left (:func:`reap_orphans`), then own every process this one
    starts from now on (:func:`mark_children`): the first call of an aem entry point."""
    reap_orphans()
    mark_children()


def _start_keeper(owner: str) -> None:
    """Start the keeper of ``owner``: unmarked, in its own session, its output discarded.

    ``posix_spawn`` rather than ``subprocess``: nothing in the owner holds the keeper (it
    outlives the owner by design, then exits), so no ``Popen`` is left to warn at exit.
    """
    root = str(Path(__file__).resolve().parents[1])
    code = f"import sys; sys.path.insert(0, {root!r}); {_KEEPER_CALL}"
    environment = {k: v for k, v in os.environ.items() if k != OWNER_ENV}
    null = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    os.posix_spawn(
        sys.executable,
        [sys.executable, "-c", code, owner],
        environment,
        file_actions=null,
        setsid=True,
    )


def is_keeper(pid: int) -> bool:
    """Whether ``pid`` is a keeper (:func:`keep`). It lives exactly as long as its owner, so a
    check for processes an owner left behind, made while the owner runs, leaves it out."""
    try:
        cmdline = (_PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return False
    return _KEEPER_CALL.encode() in cmdline


def keep() -> None:
    """The keeper's body (``sys.argv[1]`` is the owner): wait for the owner to die, then end
    what it marked and every other orphan."""
    owner, me = sys.argv[1], identity(os.getpid())
    # What runs below the owner is remembered while it runs, not only read from the marks: a
    # process that rewrites its title (Ray's agents, setproctitle) may overwrite the part of
    # its environment that holds the mark.
    seen: set[str] = set()
    while running(owner):
        below = map(identity, descendants(int(owner.split(":")[0])))
        # what left the tree but still runs stays remembered; what ended is forgotten
        seen = {i for i in seen if running(i)} | {i for i in below if i is not None and i != me}
        time.sleep(POLL_S)
    # Again until none is left: a parent that is dying may still start a child.
    deadline = time.monotonic() + KILL_WAIT_S
    while mine := [
        *(pid for pid, mark in marked_processes().items() if mark == owner),
        *(int(i.split(":")[0]) for i in seen if running(i)),
    ]:
        _kill(mine)
        if time.monotonic() > deadline:
            break
    reap_orphans()


def _children() -> dict[int, list[int]]:
    """Parent pid → child pids, of every process on the host (where the kernel lists no
    ``children`` file: a scan of every process)."""
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


def _listed_children(pid: int) -> list[int]:
    """The children of ``pid``, from the kernel's per-thread ``children`` lists: a cost in
    the size of the tree below the owner, not in the host's process count (the keeper polls
    twice a second for as long as its owner runs)."""
    children: list[int] = []
    with contextlib.suppress(OSError):  # the process (or one of its threads) ended meanwhile
        for task in (_PROC / str(pid) / "task").iterdir():
            with contextlib.suppress(OSError):
                children += map(int, (task / "children").read_text().split())
    return children


def _kernel_lists_children() -> bool:
    """Whether the kernel keeps ``children`` lists (CONFIG_PROC_CHILDREN, Linux 3.5+)."""
    return (_PROC / "thread-self" / "children").is_file()


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` in the process tree, parents before their children."""
    tree = None if _kernel_lists_children() else _children()
    found, queue = [], [pid]
    while queue:
        parent = queue.pop(0)
        for child in _listed_children(parent) if tree is None else tree.get(parent, []):
            found.append(child)
            queue.append(child)
    return found


def _kill(pids: list[int]) -> None:
    """``SIGKILL`` each of ``pids`` and wait (up to :data:`KILL_WAIT_S`) until they are gone:
    only then are their own marked children orphans that :func:`reap_orphans` sees."""
    doomed = [mark for mark in map(identity, pids) if mark]
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + KILL_WAIT_S
    while any(running(mark) for mark in doomed) and time.monotonic() < deadline:
        time.sleep(0.02)


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
    return reaped
