"""One host-wide bound on concurrent sandbox work: container starts, commands, gradings.

Why: many environments at once — a vector env's worker processes, benchmark workers,
several runs — each open sandboxes and run commands; unbounded, they overload the engine
(daemon timeouts at scale) and thrash the CPUs. Every backend operation that asks the
engine or the kernel for real work holds one of :func:`slot_count` slots while it runs; the
rest wait. The slots are ``flock`` locks on files in the cache (``slots/0`` …), so they
bound every process of the host that shares the cache, and a process killed while holding
one releases it with its file descriptors.

``$AEM_SANDBOX_SLOTS`` sets the bound; the default is the number of CPUs this process may
use (at least 2): a command or a test run is mostly CPU work, and more at once only
lengthens each.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
from collections.abc import Iterator

from .cache import cache_dir
from .errors import SandboxError

SLOTS_ENV = "AEM_SANDBOX_SLOTS"


def slot_count() -> int:
    """The host-wide bound: ``$AEM_SANDBOX_SLOTS``, else the usable CPUs (at least 2)."""
    text = os.environ.get(SLOTS_ENV, "").strip()
    if text:
        if not text.isdigit() or int(text) < 1:
            raise SandboxError(f"{SLOTS_ENV}={text!r} must be a positive whole number, e.g. 8")
        return int(text)
    return max(2, len(os.sched_getaffinity(0)))


@contextlib.contextmanager
def engine_slot() -> Iterator[None]:
    """Hold one slot for the duration of the block: a free one if there is, else wait for one.

    Free slots are tried in random order without waiting; when all are taken, the caller
    waits on one drawn at random (so waiters spread over the slots instead of queueing on
    the first).
    """
    count = slot_count()
    folder = cache_dir() / "slots"
    folder.mkdir(parents=True, exist_ok=True)
    order = random.sample(range(count), count)
    handles = []
    try:
        for index in order:
            handle = (folder / str(index)).open("a")
            handles.append(handle)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            held = handle
            break
        else:
            held = handles[0]
            fcntl.flock(held, fcntl.LOCK_EX)
        for handle in handles:
            if handle is not held:
                handle.close()
        handles = [held]
        yield
    finally:
        for handle in handles:
            handle.close()  # closing the file releases its lock
