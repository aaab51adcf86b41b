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
import time
from collections.abc import Iterator

from .cache import cache_dir
from .errors import SandboxError

SLOTS_ENV = "AEM_SANDBOX_SLOTS"
#: The longest pause between two looks for a free slot, in seconds.
MAX_WAIT_S = 0.2


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
    """Hold one slot for the duration of the block, waiting until one is free.

    The slots are tried in random order without blocking; when all are held, the caller
    sleeps (5 ms, doubling up to :data:`MAX_WAIT_S`, jittered) and tries again. Why not block
    on one slot: a waiter queued behind a minute-long grading would sit there while the other
    slots serve hundreds of short commands.
    """
    count = slot_count()
    folder = cache_dir() / "slots"
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as files:  # closing a file releases its lock
        handles = [files.enter_context((folder / str(i)).open("a")) for i in range(count)]
        delay = 0.005
        while True:
            for handle in random.sample(handles, count):
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                yield
                return
            time.sleep(delay * random.uniform(0.5, 1.5))
            delay = min(2 * delay, MAX_WAIT_S)
