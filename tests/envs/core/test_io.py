"""``build_lock``: processes that start a build together wait for one of them."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

from aem_envs.core.io import build_lock


def _hold(target: str, log: str, seconds: float) -> None:
    with build_lock(target), open(log, "a") as handle:
        handle.write("in\n")
        handle.flush()
        time.sleep(seconds)
        handle.write("out\n")


def test_a_second_process_waits_until_the_first_releases(tmp_path: Path) -> None:
    target, log = tmp_path / "start", tmp_path / "log"
    context = multiprocessing.get_context("spawn")
    first = context.Process(target=_hold, args=(str(target), str(log), 1.0))
    first.start()
    while not log.exists():  # the first holds the lock
        time.sleep(0.01)
    second = context.Process(target=_hold, args=(str(target), str(log), 0.0))
    second.start()
    first.join()
    second.join()
    assert log.read_text().split() == ["in", "out", "in", "out"]  # never interleaved
    assert (tmp_path / ".start.lock").is_file()
