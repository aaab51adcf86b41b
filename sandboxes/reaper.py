"""The reaper: removes sandbox containers whose owner process is gone, and cached layers.

Run by ``aem sandbox gc`` and, at most once a minute per process, whenever a Docker sandbox
opens — so a crashed run's containers disappear at the next run even if nobody calls gc.
Containers owned by live processes, and those labelled by another host (a shared engine),
are left alone unless ``everything`` is asked for.
"""

from __future__ import annotations

import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cache import EXPORT_MARK, LAYER_MARK, rootfs_dir
from .docker_engine import client_session, docker_module
from .owner import LABEL_MARK, Owner, is_alive

_OPPORTUNISTIC_PERIOD = 60.0
_last_run = -_OPPORTUNISTIC_PERIOD
_last_run_lock = threading.Lock()


@dataclass(frozen=True)
class Reaped:
    container_id: str
    image: str
    reason: str


def sandbox_containers(client: Any) -> list[Any]:
    """Every container (running or not) that this package created, on this engine."""
    return client.containers.list(all=True, filters={"label": LABEL_MARK})


def gc(*, client: Any = None, everything: bool = False) -> list[Reaped]:
    """Remove orphaned sandbox containers; return what was removed and why.

    ``everything=True`` removes all sandbox containers, live owners included (use it only
    when no aem process is running).
    """
    with client_session(client) as session:
        return _reap(session, everything)


def _reap(client: Any, everything: bool) -> list[Reaped]:
    errors = docker_module().errors
    removed: list[Reaped] = []
    for container in sandbox_containers(client):
        labels = container.labels
        owner = Owner.from_labels(labels)
        if everything:
            reason = "removal of every sandbox was requested"
        elif owner is None:
            reason = "it carries no readable owner label"
        elif is_alive(owner) is False:
            reason = f"its owner process {owner.pid} on {owner.host} is gone"
        else:
            continue
        try:
            container.remove(force=True)
        except errors.NotFound:
            continue  # another reaper was faster
        except errors.APIError as exc:
            if exc.status_code != 409:  # 409: removal already in progress
                raise
            continue
        removed.append(Reaped(container.id, labels.get(f"{LABEL_MARK}.image", "?"), reason))
    return removed


def gc_opportunistically(client: Any) -> None:
    """Run :func:`gc` unless this process ran it within the last minute; never raises."""
    global _last_run
    with _last_run_lock:
        now = time.monotonic()
        if now - _last_run < _OPPORTUNISTIC_PERIOD:
            return
        _last_run = now
    try:
        gc(client=client)
    except Exception:  # cleanup of others' leftovers must not break an open
        return


def prune_layers() -> list[Path]:
    """Remove the cached env/instance root file systems of the bubblewrap backend.

    The base root file system stays: rebuilding it needs the Debian mirror, while layers
    rebuild offline in seconds on next use. Run it when no bubblewrap sandbox is open.
    Docker's layer images are left to Docker:
    ``docker rmi $(docker images -q --filter label=aem.sandbox.kind=instance)``.
    """
    removed: list[Path] = []
    rootfs = rootfs_dir()
    if rootfs.is_dir():
        for entry in sorted(rootfs.iterdir()):
            if (entry / LAYER_MARK).exists() or (entry / EXPORT_MARK).exists():
                shutil.rmtree(entry)
                removed.append(entry)
    return removed
