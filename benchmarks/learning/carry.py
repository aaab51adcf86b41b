"""A stopped run's newest checkpoint kept where git keeps it, so the run resumes on any machine.

Why: a grid's runs last longer than a session, and a session may come back on a fresh machine
that holds only what was committed. ``checkpoint-*/`` folders are not committed (a run writes
one every step), so there a run would start again from step 0 and its earlier sessions would be
lost. :func:`carry` copies each unfinished run's newest checkpoint into the run's ``carried/``
folder, which is committed with its metrics; :func:`restore` puts it back as
``checkpoint-<n>/`` when the run resumes where no checkpoint of its own is left. One checkpoint
per run is carried, the newest: everything TRL resumes from (weights, optimizer moments,
scheduler, random states, trainer state), so the resumed run is the run that stopped.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from benchmarks.learning.config import DONE_MARKER, RUNS_DIR

CARRIED_DIR = "carried"


def carried_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint carried in ``run_dir/carried/``, if any."""
    from aem_agent.grpo.run import last_checkpoint

    carried = run_dir / CARRIED_DIR
    return last_checkpoint(carried) if carried.is_dir() else None


def carry(out: Path) -> list[str]:
    """Carry the newest whole checkpoint of every unfinished run of the grid in ``out``; one
    line per run saying what was carried (a run already carrying its newest is left as it is).

    Safe while the runs train: a checkpoint still being written is passed over, and one that
    a newer save removed while it was being copied is copied again from the newer one.
    """
    from aem_agent.grpo.run import last_checkpoint

    lines = []
    runs = out / RUNS_DIR
    for run_dir in sorted(p for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []:
        if (run_dir / DONE_MARKER).is_file():
            continue
        for _ in range(3):  # a save every few minutes: a second try finds it settled
            newest = last_checkpoint(run_dir)  # a save in progress is not whole: passed over
            if newest is None:
                break
            held = carried_checkpoint(run_dir)
            if held is not None and held.name == newest.name:
                lines.append(f"{run_dir.name}: carries {newest.name} already")
                break
            scratch = run_dir / f".{CARRIED_DIR}.partial"  # renamed into place once whole
            shutil.rmtree(scratch, ignore_errors=True)
            try:
                shutil.copytree(newest, scratch / newest.name)
            except (FileNotFoundError, shutil.Error):  # rotated away by a newer save
                continue
            drop(run_dir)
            scratch.rename(run_dir / CARRIED_DIR)
            lines.append(f"{run_dir.name}: carries {newest.name}")
            break
        else:  # every try lost its source to a newer save: say so rather than stay silent
            lines.append(f"{run_dir.name}: not carried (its checkpoints kept changing; rerun)")
    return lines


def resume_point(run_dir: Path) -> Path | None:
    """Where the run resumes: its own newest checkpoint, or the carried one where that is
    newer (a fresh machine, or one that stopped earlier than the machine that carried it)."""
    from aem_agent.grpo.run import checkpoint_step, last_checkpoint

    own = last_checkpoint(run_dir) if run_dir.is_dir() else None
    held = carried_checkpoint(run_dir)
    return max((c for c in (own, held) if c), key=checkpoint_step, default=None)


def restore(run_dir: Path) -> Path | None:
    """Put the carried checkpoint back as ``run_dir/checkpoint-<n>/`` where it is the run's
    :func:`resume_point`; return it, or ``None`` when nothing was done."""
    held = resume_point(run_dir)
    if held is None or held.parent == run_dir:  # none, or its own is as new
        return None
    target = run_dir / held.name
    scratch = run_dir / f".{held.name}.partial"
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(held, scratch)
    scratch.rename(target)
    return target


def drop(run_dir: Path) -> None:
    """Remove the run's carried checkpoint (a finished run resumes from nothing)."""
    shutil.rmtree(run_dir / CARRIED_DIR, ignore_errors=True)
