"""Run policies on a suite: plan the episodes, skip finished ones, play the rest in parallel.

Two ways to be parallel, chosen per policy:

- a *model* policy (a local model, an endpoint) lives once in this process and plays
  ``batch_size`` episodes side by side, one batched call per turn (:func:`episodes.play`);
- an *env* policy (``expert``, ``random``: they read the live env and cost nothing) plays
  in ``workers`` processes, one env per process, which isolates engines from each other.

With ``ray_address`` every env lives in a Ray actor instead (:func:`aem_envs.vector.make_ray_env`,
isolated already, on this machine or a cluster's), so env policies too play here, ``workers``
episodes side by side; the trajectories are still written here. Same seeds, same episodes.

Resuming needs no bookkeeping beyond the episode files: a planned episode whose file ends
with a finished record is skipped (``resume=True``).
"""

from __future__ import annotations

import functools
import multiprocessing
import multiprocessing.util
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym

from aem_agent.policies.base import Policy
from aem_agent.rollout.engine import EnvPool
from aem_envs.core.errors import AEMError, require
from aem_envs.vector import cluster
from benchmarks.episodes import EPISODES_DIR, EpisodeJob, play, read_record
from benchmarks.suite import Suite
from sandboxes.lifetime import take_ownership

if TYPE_CHECKING:
    from aem_envs.core.base import TextEnv

#: Specs of policies that read the env instead of a prompt (no model, no tokens).
ENV_POLICIES = frozenset({"expert", "random"})


@dataclass(frozen=True)
class PolicySource:
    """A policy to benchmark: its name in reports and a picklable way to build it.

    ``model`` marks policies that hold a model: they are built once and batched, and
    suites may give them a tighter step limit (``model_max_steps``).
    """

    name: str
    factory: Callable[[], Policy]
    model: bool


def policy_source(spec: str, kwargs: dict[str, Any] | None = None) -> PolicySource:
    """A :class:`PolicySource` for a ``--policy`` spec, built by ``aem_agent.policies``.

    ``kwargs`` (a suite's ``policies:`` entry for this spec) go to the policy's constructor.
    """
    from aem_agent.policies import load_policy

    factory = functools.partial(load_policy, spec, **(kwargs or {}))
    return PolicySource(spec, factory, spec not in ENV_POLICIES)


@dataclass
class BenchRun:
    """What a run produced: its folder, every planned job, and the records of finished ones."""

    run_dir: Path
    jobs: list[EpisodeJob]
    records: list[dict[str, Any]]
    errors: list[dict[str, Any]]
    played: int
    skipped: int


def plan(
    suite: Suite, policies: Sequence[PolicySource], limit: int | None = None
) -> list[EpisodeJob]:
    """Every episode of ``suite`` for every policy, in a stable order.

    Task ids come from the env itself (its ``task_ids(split)``), so a suite that says
    ``tasks: all`` follows the bundled task set as it is.
    """
    suite.check_requirements()
    jobs: list[EpisodeJob] = []
    for entry in suite.envs:
        try:
            env = gym.make(entry.env, **entry.kwargs)
        except (gym.error.Error, ModuleNotFoundError) as exc:
            raise AEMError(
                f"suite {suite.name!r}: cannot make {entry.env!r} ({exc}); "
                "run `aem envs` for the ids this installation has"
            ) from exc
        try:
            inner = cast("TextEnv", env.unwrapped)  # a suite's ids are aem's text envs
            split = entry.split or inner.splits[0]
            if split not in inner.splits:
                raise AEMError(
                    f"suite {suite.name!r}: {entry.env_id} has no split {split!r}; "
                    f"its splits are {list(inner.splits)}"
                )
            task_ids = entry.select(list(inner.task_ids(split)), limit)
        finally:
            env.close()
        for source in policies:
            kwargs = entry.env_kwargs(model=source.model)
            jobs.extend(
                EpisodeJob(suite.name, entry.env, source.name, task_id, split, seed, kwargs)
                for task_id in task_ids
                for seed in suite.seeds
            )
    return jobs


def run_bench(
    suite: Suite,
    policies: Sequence[PolicySource],
    out: str | Path,
    *,
    workers: int = 2,
    batch_size: int = 8,
    limit: int | None = None,
    resume: bool = True,
    progress: bool = True,
    ray_address: str | None = None,
) -> BenchRun:
    """Play every planned episode not yet finished in ``out``; return all records.

    ``ray_address``: play the envs in Ray actors (``"local"``: a Ray started on loopback and
    stopped at the end; else a cluster's address); ``None`` plays them here.
    """
    if workers < 1 or batch_size < 1:
        raise AEMError(
            f"--workers and --batch-size must be at least 1, got {workers} and {batch_size}"
        )
    run_dir = Path(out)
    jobs = plan(suite, policies, limit)
    take_ownership()  # no survivor of a killed run writes here; ours end when this one does
    _remove_stale_temporaries(run_dir)
    done = {job.key for job in jobs if resume and read_record(job.path(run_dir)) is not None}
    errors: list[dict[str, Any]] = []
    played = 0
    with cluster.session(ray_address):
        bar = Progress(len(jobs), initial=len(done), enabled=progress)

        def finished(record: dict[str, Any]) -> None:
            if record["error"] is not None:
                errors.append(record)
            bar.update(record)

        try:
            for source in policies:
                todo = [j for j in jobs if j.policy == source.name and j.key not in done]
                played += len(todo)
                if not todo:
                    continue
                bar.describe(source.name)
                if source.model:
                    _play_here(todo, source, run_dir, batch_size, finished, ray_address)
                elif workers == 1 or ray_address is not None:
                    _play_here(todo, source, run_dir, workers, finished, ray_address)
                else:
                    _play_in_processes(todo, source, run_dir, workers, finished)
        finally:
            bar.close()
    records = [r for r in (read_record(job.path(run_dir)) for job in jobs) if r is not None]
    return BenchRun(run_dir, jobs, records, errors, played, len(done))


def _play_here(
    jobs: list[EpisodeJob],
    source: PolicySource,
    run_dir: Path,
    concurrency: int,
    finished: Callable[[dict[str, Any]], None],
    ray_address: str | None,
) -> None:
    policy = source.factory()
    envs = EnvPool(ray_address)
    try:
        play(jobs, policy, run_dir=run_dir, concurrency=concurrency, envs=envs, on_finish=finished)
    finally:
        envs.close()
        policy.close()


def _play_in_processes(
    jobs: list[EpisodeJob],
    source: PolicySource,
    run_dir: Path,
    workers: int,
    finished: Callable[[dict[str, Any]], None],
) -> None:
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=min(workers, len(jobs)),
        mp_context=context,
        initializer=_start_worker,
        initargs=(source.factory,),
    ) as pool:
        futures = [pool.submit(_play_one, job, run_dir) for job in jobs]
        try:
            for future in as_completed(futures):
                finished(future.result())
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise


#: Per-process state of a worker: the policy and the envs it keeps between episodes.
_WORKER: dict[str, Any] = {}


def _start_worker(factory: Callable[[], Policy]) -> None:
    _WORKER["policy"] = factory()
    _WORKER["envs"] = EnvPool()
    multiprocessing.util.Finalize(None, _stop_worker, exitpriority=10)


def _stop_worker() -> None:
    _WORKER["envs"].close()
    _WORKER["policy"].close()


def _play_one(job: EpisodeJob, run_dir: Path) -> dict[str, Any]:
    records: list[dict[str, Any]] = []
    play(
        [job],
        _WORKER["policy"],
        run_dir=run_dir,
        concurrency=1,
        envs=_WORKER["envs"],
        on_finish=records.append,
    )
    return records[0]


def _remove_stale_temporaries(run_dir: Path) -> None:
    """Delete temporaries a killed run left behind (atomic writes' ``.name.*.tmp``)."""
    for tmp in (run_dir / EPISODES_DIR).rglob(".*.tmp"):
        tmp.unlink(missing_ok=True)


class Progress:
    """A progress bar (tqdm) with ETA and the running success rate; silent when disabled."""

    def __init__(self, total: int, *, initial: int, enabled: bool) -> None:
        self.wins = self.count = self.failed = 0
        self._bar = None
        if enabled:
            tqdm = require("bench", "tqdm", feature="the progress bar of `aem bench`").tqdm
            self._bar = tqdm(
                total=total, initial=initial, unit="ep", file=sys.stderr, dynamic_ncols=True
            )

    def describe(self, policy: str) -> None:
        """Start the running success rate afresh for the next policy."""
        self.wins = self.count = self.failed = 0
        if self._bar is not None:
            self._bar.set_description(policy)

    def update(self, record: dict[str, Any]) -> None:
        """Count a finished episode; failed ones (env errors) are shown apart, not as losses."""
        if record["error"] is not None:
            self.failed += 1
        else:
            self.count += 1
            self.wins += bool(record["won"])
        if self._bar is not None:
            rate = f"success {100 * self.wins / self.count:.0f}%" if self.count else ""
            failed = f" failed {self.failed}" if self.failed else ""
            self._bar.set_postfix_str(rate + failed)
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
