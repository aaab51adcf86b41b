"""Who owns a sandbox: a process identity that survives PID reuse and reboots.

Why: a training run killed with SIGKILL cannot remove its containers. Each container is
labelled with its owner's pid, the pid's start time and the host's boot id; the reaper
(:func:`sandboxes.gc`) removes containers whose owner no longer exists. The start time
guards against a new process that reuses the pid, the boot id against pids of an earlier
boot.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from functools import cache
from pathlib import Path

LABEL_PREFIX = "aem.sandbox"
LABEL_MARK = LABEL_PREFIX  # present (value "1") on every container this package creates


@dataclass(frozen=True)
class Owner:
    pid: int
    start: str
    host: str
    boot: str

    def labels(self) -> dict[str, str]:
        return {
            LABEL_MARK: "1",
            f"{LABEL_PREFIX}.owner.pid": str(self.pid),
            f"{LABEL_PREFIX}.owner.start": self.start,
            f"{LABEL_PREFIX}.owner.host": self.host,
            f"{LABEL_PREFIX}.owner.boot": self.boot,
        }

    @classmethod
    def from_labels(cls, labels: dict[str, str]) -> Owner | None:
        try:
            return cls(
                pid=int(labels[f"{LABEL_PREFIX}.owner.pid"]),
                start=labels[f"{LABEL_PREFIX}.owner.start"],
                host=labels[f"{LABEL_PREFIX}.owner.host"],
                boot=labels[f"{LABEL_PREFIX}.owner.boot"],
            )
        except (KeyError, ValueError):
            return None


def process_start(pid: int) -> str | None:
    """Start time of ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[19]


@cache
def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def current_owner() -> Owner:
    pid = os.getpid()
    start = process_start(pid) or "?"
    return Owner(pid=pid, start=start, host=socket.gethostname(), boot=boot_id())


def is_alive(owner: Owner) -> bool | None:
    """True/False when this host can tell; None for an owner on another host."""
    if owner.host != socket.gethostname():
        return None
    if owner.boot != boot_id():
        return False
    return process_start(owner.pid) == owner.start
