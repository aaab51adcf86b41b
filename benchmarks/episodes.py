"""The bench's episodes: what to play (:class:`EpisodeJob`) and what is kept of each.

The episodes are played by the agent's episode engine (:mod:`aem_agent.rollout.engine`: a pool of
envs, many episodes in lock-step, one policy batch per turn); this module names them and writes
them. Every finished episode is written as one JSON Lines file, atomically, by the env's own
:class:`~aem_envs.wrappers.TrajectoryRecorder`, at a path derived from its key
(policy/env/split/task/seed, :attr:`EpisodeJob.episode_id`): line 1 ``kind="episode"`` (what
was played: the recorder's header plus the job), one ``kind="step"`` line per turn (the
recorder's row — parsed action, observation, reward, flags, info — plus the policy's raw
reply and token counts), then ``kind="end"`` holding, beside the recorder's totals, the
episode's ``record``. The file is the only state a run keeps, which is what makes a killed
run resumable: an episode is done exactly when its file exists and ends with a finished
record.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

import aem_envs  # noqa: F401  (registers the aem ids before gym.make)
from aem_agent.policies.base import Policy, PolicyOutput
from aem_agent.rollout.engine import EnvPool, Live, Observer, Step, drive
from aem_agent.rollout.records import EpisodeSpec
from aem_envs.wrappers import TrajectoryRecorder

EPISODES_DIR = "episodes"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def slug(text: str) -> str:
    """A file-name-safe form of ``text``; a short hash keeps distinct texts distinct."""
    safe = _UNSAFE.sub("_", text).strip("._") or "x"
    if safe == text and len(text) <= 80:
        return text
    return f"{safe[:80]}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class EpisodeJob:
    """One episode to play: a task of a suite's env, with a seed, for a named policy."""

    suite: str
    env: str
    policy: str
    task_id: str
    split: str | None
    seed: int
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def env_id(self) -> str:
        return self.env.split(":", 1)[-1]

    @property
    def key(self) -> str:
        """suite/env/split/policy/task/seed: splits may reuse task ids (ALFWorld's do)."""
        return f"{self.suite}/{self.env_id}/{self.split}/{self.policy}/{self.task_id}/{self.seed}"

    @property
    def episode_id(self) -> str:
        """The trajectory's name under ``<run_dir>/episodes``: policy/env/split/task__seed."""
        folders = (slug(self.policy), slug(self.env_id), slug(str(self.split)))
        return "/".join([*folders, f"{slug(self.task_id)}__seed{self.seed}"])

    def path(self, run_dir: Path) -> Path:
        """Where this episode's trajectory lives inside ``run_dir``."""
        return run_dir / EPISODES_DIR / f"{self.episode_id}.jsonl"

    @property
    def spec(self) -> EpisodeSpec:
        """The episode itself, as every caller of the episode engine names one."""
        return EpisodeSpec(self.env_id, self.seed, self.split, self.task_id)


def read_record(path: Path) -> dict[str, Any] | None:
    """The record of a finished episode file, or None if the file is absent or unfinished."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    for line in reversed(lines):
        if line.strip():
            row = json.loads(line)
            if row.get("kind") == "end" and row.get("finished"):
                return row["record"]
            return None
    return None


class TrajectoryWriter(Observer[EpisodeJob, PolicyOutput]):
    """The bench's observer of the episode engine: a recorder under each episode's reply
    parser (so it sees the parsed actions and rejected replies), the policy's raw replies and
    token counts beside it, and the record written with the trajectory at the end (timed
    after the last step)."""

    def __init__(self, run_dir: Path, on_finish: Callable[[dict[str, Any]], None]) -> None:
        self.run_dir = run_dir
        self.on_finish = on_finish
        self._recorders: dict[int, TrajectoryRecorder] = {}
        self._tokens: dict[int, list[int]] = {}

    def wrap(self, job: EpisodeJob, env: gym.Env) -> gym.Env:
        recorder = TrajectoryRecorder(env, self.run_dir / EPISODES_DIR, write_on_end=False)
        recorder.next_episode(
            job.episode_id,
            key=job.key,
            suite=job.suite,
            env_id=job.env_id,
            policy=job.policy,
            task_id=job.task_id,
            split=job.split,
            env_kwargs=job.env_kwargs,
        )
        self._recorders[id(env)] = recorder
        return recorder

    def started(self, episode: Live[EpisodeJob]) -> None:
        self._tokens[id(episode)] = [0, 0]

    def replied(self, episode: Live[EpisodeJob], reply: PolicyOutput) -> None:
        self._recorders[id(episode.bare)].next_step(
            reply=reply.reply,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
        )

    def stepped(self, episode: Live[EpisodeJob], reply: PolicyOutput, step: Step) -> None:
        tokens = self._tokens[id(episode)]
        tokens[0] += reply.prompt_tokens
        tokens[1] += reply.completion_tokens

    def finished(self, episode: Live[EpisodeJob]) -> None:
        """Write the trajectory atomically; an errored episode is kept but not finished."""
        recorder = self._recorders.pop(id(episode.bare))
        record = self.record(episode)
        record["trajectory"] = str(episode.job.path(self.run_dir).relative_to(self.run_dir))
        recorder.finish(finished=episode.error is None, record=record)
        self.on_finish(record)

    def record(self, episode: Live[EpisodeJob]) -> dict[str, Any]:
        job, info, error = episode.job, episode.info, episode.error
        prompt_tokens, completion_tokens = self._tokens.pop(id(episode), [0, 0])
        return {
            "key": job.key,
            "suite": job.suite,
            "env_id": job.env_id,
            "policy": job.policy,
            "task_id": job.task_id,
            "task_type": str(info.get("task_type", "unknown")),
            "split": job.split,
            "seed": job.seed,
            "won": bool(info.get("won", False)) and error is None,
            "score": float(info.get("score", 0.0)) if error is None else 0.0,
            "steps": episode.steps,
            "max_steps": int(getattr(episode.env.unwrapped, "max_steps", 0)),
            "terminated": episode.terminated,
            "truncated": episode.truncated,
            "return": episode.reward,
            "invalid_actions": episode.invalid_actions,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "policy_time_s": episode.policy_time_s,
            "env_time_s": episode.env_time_s,
            "wall_time_s": time.perf_counter() - episode.started,
            "error": error,
        }


def play(
    jobs: Iterable[EpisodeJob],
    policy: Policy,
    *,
    run_dir: Path,
    concurrency: int,
    envs: EnvPool,
    on_finish: Callable[[dict[str, Any]], None],
) -> None:
    """Play ``jobs`` with ``policy``, up to ``concurrency`` at once, one batch per turn
    (:func:`aem_agent.rollout.engine.drive`), writing each finished episode's trajectory.

    An exception from an env is recorded in that episode, which a resumed run plays again;
    the other episodes go on. A policy that fails stops the run.
    """

    writer = TrajectoryWriter(run_dir, on_finish)
    threads = ThreadPoolExecutor(max_workers=concurrency) if concurrency > 1 else None
    try:
        drive(
            jobs,
            policy.act,
            writer,
            envs=envs,
            concurrency=concurrency,
            threads=threads,
            contain_errors=True,
        )
    finally:
        if threads is not None:
            threads.shutdown()
