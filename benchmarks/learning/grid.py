"""The learning grid: one start checkpoint, then every (algorithm, seed) run, then the report.

Why its own module: it is the one place that needs the start builder, the runs and the
report together; the runs (:mod:`~benchmarks.learning.experiment`) and the start
(:mod:`~benchmarks.learning.start`) then import only downwards.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from aem_envs.core.io import atomic_write_json, build_lock
from benchmarks.learning.collect import write_results
from benchmarks.learning.config import (
    DONE_MARKER,
    RUNS_DIR,
    START_DIR,
    TASK_CHECK_FILE,
    ExperimentError,
    LearningConfig,
)
from benchmarks.learning.experiment import run_one
from benchmarks.learning.report import write_report
from benchmarks.learning.start import build_start
from benchmarks.learning.status import running
from benchmarks.learning.taskcheck import task_check


def run_grid(
    config: LearningConfig,
    out: Path,
    *,
    log: Callable[[str], None] = print,
    callbacks: Sequence[Any] = (),
    only: Collection[str] = (),
) -> dict[str, Any]:
    """Build the start checkpoint, run every (algo, seed) not yet done, write the outputs.

    ``only`` names the runs (``grpo-seed0``...) this call trains, so one grid can be spread
    over several processes or machines sharing ``out``; the report covers every run done.
    results.json and the report are rewritten after every run, so a long grid shows its
    progress and a killed grid leaves a consistent report of the runs that finished.
    """
    names = [name for _, _, name in config.run_names()]
    unknown = sorted(set(only) - set(names))
    if unknown:
        raise ExperimentError(f"runs {unknown} are not in the grid; its runs: {names}")
    out.mkdir(parents=True, exist_ok=True)
    start_dir = out / START_DIR
    check_file = out / TASK_CHECK_FILE
    with build_lock(start_dir):  # processes of one grid started together build them once
        build_start(config, start_dir, log=log)
        if not check_file.is_file():  # what the task offers AEM, measured before any RL
            atomic_write_json(check_file, task_check(config, start_dir, out / ".task-check"))
            shutil.rmtree(out / ".task-check", ignore_errors=True)
    for algo, seed, name in config.run_names():
        if only and name not in only:
            continue
        run_dir = out / RUNS_DIR / name
        if (run_dir / DONE_MARKER).is_file():
            log(f"[{name}] done already, skipped")
            continue
        with running(run_dir):  # what `aem bench learning --status` reads
            run_one(config, algo, seed, start_dir, run_dir, callbacks=callbacks, log=log)
        write_report(out, write_results(out, config))
    results = write_results(out, config)
    write_report(out, results)
    return results
