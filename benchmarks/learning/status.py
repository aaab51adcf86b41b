"""Where each run of a learning grid stands: done, running, stopped part-way, or waiting.

Why: a grid of hours-long runs is spread over processes and sessions that die; whoever comes
next needs to know, without reading logs, which runs to start or resume. A run's folder says
it: ``done.json`` is written last when it finishes, ``running.json`` (:func:`running`) names the
process training it while it trains, and ``checkpoint-*`` is where a stopped one resumes.
``sessions.json`` keeps each finished process's wall and CPU seconds: the grid's cost, which
a run's metrics (wall time of its steps and held-out passes) cannot give on shared cores.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from aem_envs.core.io import atomic_write_json
from benchmarks.learning.carry import carried_checkpoint, resume_point
from benchmarks.learning.collect import last_value, read_metrics, recent_mean
from benchmarks.learning.config import (
    DONE_MARKER,
    RUNS_DIR,
    START_DIR,
    START_MARKER,
    TASK_CHECK_FILE,
    TRAIN_WINDOW,
    LearningConfig,
)
from benchmarks.learning.experiment import updates_per_batch
from benchmarks.learning.heldout import HELDOUT_KEYS
from benchmarks.markdown import pipe_table

RUNNING_MARKER = "running.json"
SESSIONS_FILE = "sessions.json"


@contextmanager
def running(run_dir: Path, *, every: float = 60.0) -> Iterator[None]:
    """Mark ``run_dir`` as trained by this process while the block runs, and keep this
    session's wall and CPU seconds in ``sessions.json``, rewritten every ``every`` seconds
    and at the end: a session killed outright (how most sessions of a long grid end) then
    loses at most that much of its record."""
    run_dir.mkdir(parents=True, exist_ok=True)
    marker = run_dir / RUNNING_MARKER
    log = run_dir / SESSIONS_FILE
    earlier = json.loads(log.read_text(encoding="utf-8")) if log.is_file() else []
    started, cpu = time.time(), time.process_time()

    def record() -> None:
        wall, used = time.time() - started, time.process_time() - cpu
        session = {"started": started, "wall_s": round(wall, 1), "cpu_s": round(used, 1)}
        atomic_write_json(log, [*earlier, session])

    atomic_write_json(
        marker, {"pid": os.getpid(), "host": socket.gethostname(), "started": started}
    )
    stop = threading.Event()

    def keep() -> None:
        while not stop.wait(every):
            record()

    keeper = threading.Thread(target=keep, name="session-seconds", daemon=True)
    keeper.start()
    try:
        yield
    finally:
        stop.set()
        keeper.join()
        record()
        marker.unlink(missing_ok=True)


@dataclass(frozen=True)
class RunStatus:
    """One run's state, the last step it logged and checkpointed, its training episodes'
    success and valid-action rates over its last :data:`TRAIN_WINDOW` steps (what a choice
    between settings may read), and its last held-out score (what it may not)."""

    name: str
    state: str  # done | running | stopped | waiting
    step: int | None
    checkpoint: int | None
    heldout_success: float | None
    note: str = ""
    train_success: float | None = None
    valid_rate: float | None = None
    carried: int | None = None  # the step of its checkpoint in carried/ (benchmarks.learning.carry)

    @property
    def uncarried(self) -> bool:
        """Unfinished with a newer checkpoint than the one committed: a fresh machine would
        resume it from further back (or from step 0)."""
        return self.state in ("running", "stopped") and self.checkpoint != self.carried


def run_status(
    config: LearningConfig, out: Path, updates: Mapping[str, int] | None = None
) -> list[RunStatus]:
    """The status of every run of ``config``'s grid in ``out``, steps in rollout batches
    (a checkpoint's name counts optimizer steps: ``updates[arm]`` of them a batch,
    :func:`updates_per_batch` when the caller has not computed them)."""
    from aem_agent.grpo.run import METRICS_FILE, checkpoint_step

    if updates is None:
        updates = {arm: updates_per_batch(config, arm) for arm in config.algorithms}
    statuses = []
    for arm, _, name in config.run_names():
        run_dir = out / RUNS_DIR / name
        rows = read_metrics(run_dir / METRICS_FILE)
        step = int(rows[-1]["step"]) if rows and "step" in rows[-1] else None
        newest, held = resume_point(run_dir), carried_checkpoint(run_dir)
        checkpoint = checkpoint_step(newest) // updates[arm] if newest else None
        note = ""
        if (run_dir / DONE_MARKER).is_file():
            state = "done"
        elif (run_dir / RUNNING_MARKER).is_file():
            owner = json.loads((run_dir / RUNNING_MARKER).read_text(encoding="utf-8"))
            state, note = _owner_state(owner)
        elif rows or checkpoint is not None:
            state = "stopped"
        else:
            state = "waiting"
        if state == "stopped":
            where = newest and newest.relative_to(run_dir).as_posix()
            note = note or (f"resumes from {where}" if where else "restarts from step 0")
        heldout = last_value(rows, HELDOUT_KEYS[0])
        statuses.append(
            RunStatus(
                name,
                state,
                step,
                checkpoint,
                heldout,
                note,
                recent_mean(rows, "episode/success_rate", TRAIN_WINDOW),
                recent_mean(rows, "episode/valid_rate", TRAIN_WINDOW),
                checkpoint_step(held) // updates[arm] if held else None,
            )
        )
    return statuses


def start_status(out: Path, *, heldout: bool = True) -> str:
    """One line on what every run needs first: the start checkpoint (with its held-out score
    unless ``heldout`` is false) and the task check."""
    marker = out / START_DIR / START_MARKER
    if marker.is_file():
        start = json.loads(marker.read_text(encoding="utf-8"))
        score = start.get("heldout_success", float("nan"))
        line = f"start: ready (held-out success {score:.3f})" if heldout else "start: ready"
    elif (out / f".{START_DIR}.building").is_dir():
        line = "start: being built"
    else:
        line = "start: not built"
    check = "done" if (out / TASK_CHECK_FILE).is_file() else "not done"
    return f"{line}; task check: {check}"


def _owner_state(owner: dict[str, object]) -> tuple[str, str]:
    """``running`` if the marker's process is alive (checked on this host only)."""
    pid, host = int(str(owner.get("pid"))), str(owner.get("host"))
    if host != socket.gethostname():
        return "running", f"pid {pid} on {host} (not checked from here)"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "stopped", f"its process (pid {pid}) is gone"
    except PermissionError:
        pass  # alive, owned by someone else
    return "running", f"pid {pid}"


def format_status(statuses: list[RunStatus], max_steps: int | None, *, heldout: bool = True) -> str:
    """A Markdown table of :func:`run_status`; without the held-out column when ``heldout``
    is false, for whoever is choosing between settings mid-grid (a choice reads training
    metrics only, so the view that serves it should not show the held-out score)."""
    columns = [
        "run", "state", "step", "checkpoint", f"training success, last {TRAIN_WINDOW} steps",
        "valid actions, likewise", *(["held-out success"] if heldout else []), "note",
    ]  # fmt: skip
    total = f" / {max_steps}" if max_steps else ""

    def rate(value: float | None) -> str:
        return "—" if value is None else f"{value:.3f}"

    rows = []
    for s in statuses:
        step = "—" if s.step is None else f"{s.step}{total}"
        rows.append([
            s.name, s.state, step, str(s.checkpoint) if s.checkpoint else "—",
            rate(s.train_success), rate(s.valid_rate),
            *([rate(s.heldout_success)] if heldout else []), s.note,
        ])  # fmt: skip
    counts = {state: sum(s.state == state for s in statuses) for state in _STATES}
    summary = ", ".join(f"{n} {state}" for state, n in counts.items() if n)
    uncarried = [s.name for s in statuses if s.uncarried]
    if uncarried:  # what a session on another machine would lose: commit it with --carry
        summary += f"\nnot carried at their newest checkpoint: {', '.join(uncarried)} (--carry)"
    return pipe_table(columns, rows) + f"\n\n{summary}\n"


_STATES = ("done", "running", "stopped", "waiting")
