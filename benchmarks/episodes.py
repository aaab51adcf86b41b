"""Playing episodes: a policy drives many concurrent episodes in lock-step, one batch per turn.

Why lock-step: a model policy answers a whole batch of turns in one call, so episodes that
run side by side share one model and one forward pass instead of one model per worker.
Env steps of a turn run in threads (engines, browsers and containers spend their time
outside the GIL).

Every finished episode is written as one JSON Lines file, atomically, by the env's own
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
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

import aem_envs  # noqa: F401  (registers the aem ids before gym.make)
from aem_agent.policies.base import Policy, PolicyInput, PolicyOutput
from aem_envs.core.errors import AEMError
from aem_envs.vector import make_ray_env
from aem_envs.wrappers import LLMActionWrapper, TrajectoryRecorder

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

    def reset_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"task_id": self.task_id}
        if self.split is not None:
            options["split"] = self.split
        return options


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


class EnvPool:
    """Idle environments kept for reuse, keyed by id and constructor keywords.

    Why: constructing an env can start an engine or a browser; a benchmark plays many
    episodes of the same env, so one instance per concurrent episode is reused by reset.
    The pool holds the bare envs; each episode wraps its own recorder and reply parser.
    With ``ray_address`` each env is made in a Ray actor (:func:`aem_envs.vector.make_ray_env`).
    """

    def __init__(self, ray_address: str | None = None) -> None:
        self._idle: dict[str, list[gym.Env]] = {}
        self.ray_address = ray_address

    @staticmethod
    def _key(env: str, kwargs: dict[str, Any]) -> str:
        return json.dumps([env, kwargs], sort_keys=True, default=repr)

    def acquire(self, env: str, kwargs: dict[str, Any]) -> gym.Env:
        idle = self._idle.get(self._key(env, kwargs))
        if idle:
            return idle.pop()
        if self.ray_address is not None:
            return make_ray_env(env, self.ray_address, **kwargs)
        return gym.make(env, **kwargs)

    def release(self, env: str, kwargs: dict[str, Any], instance: gym.Env) -> None:
        self._idle.setdefault(self._key(env, kwargs), []).append(instance)

    def close(self) -> None:
        for instances in self._idle.values():
            for instance in instances:
                instance.close()
        self._idle.clear()


class _Live:
    """An episode in progress: its env, the turns so far, and its running totals.

    The env is the pooled one under a recorder writing into ``run_dir`` (only when told:
    the end row carries the record, timed after the last step) under the reply parser, so the
    recorder sees the parsed actions and rejected replies and this class adds the replies.
    """

    def __init__(self, job: EpisodeJob, env: gym.Env, run_dir: Path) -> None:
        self.job = job
        self.bare = env
        self.run_dir = run_dir
        self.recorder = TrajectoryRecorder(env, run_dir / EPISODES_DIR, write_on_end=False)
        self.env = LLMActionWrapper(self.recorder)
        self.started = time.perf_counter()
        self.observation = ""
        self.info: dict[str, Any] = {}
        self.history: list[tuple[str, str]] = []
        self.steps = 0
        self.totals = {
            "return": 0.0,
            "invalid_actions": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "policy_time_s": 0.0,
            "env_time_s": 0.0,
        }
        self.terminated = False
        self.truncated = False
        self.error: str | None = None

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated or self.error is not None

    def reset(self) -> None:
        job = self.job
        self.recorder.next_episode(
            job.episode_id,
            key=job.key,
            suite=job.suite,
            env_id=job.env_id,
            policy=job.policy,
            task_id=job.task_id,
            split=job.split,
            env_kwargs=job.env_kwargs,
        )
        tic = time.perf_counter()
        try:
            self.observation, self.info = self.env.reset(
                seed=self.job.seed, options=self.job.reset_options()
            )
        except Exception as exc:
            self.error = f"reset failed: {type(exc).__name__}: {exc}"
            return
        finally:
            self.totals["env_time_s"] += time.perf_counter() - tic
        self._note_infra_error()

    def policy_input(self) -> PolicyInput:
        return PolicyInput(
            env_id=self.job.env_id,
            instruction=str(self.info.get("instruction", "")),
            observation=self.observation,
            history=list(self.history),
            admissible_actions=self.info.get("admissible_actions"),
            env=self.env,
        )

    def step(self, output: PolicyOutput) -> None:
        self.recorder.next_step(
            reply=output.reply,
            prompt_tokens=output.prompt_tokens,
            completion_tokens=output.completion_tokens,
        )
        tic = time.perf_counter()
        try:
            observation, reward, terminated, truncated, info = self.env.step(output.reply)
        except Exception as exc:
            self.error = f"step failed: {type(exc).__name__}: {exc}"
            return
        finally:
            self.totals["env_time_s"] += time.perf_counter() - tic
        action = info.get("parsed_action")
        self.history.append((self.observation, action if action is not None else output.reply))
        self.observation, self.info = observation, info
        self.terminated, self.truncated = bool(terminated), bool(truncated)
        self.totals["return"] += float(reward)
        self.totals["invalid_actions"] += 0 if info.get("action_valid", True) else 1
        self.totals["prompt_tokens"] += output.prompt_tokens
        self.totals["completion_tokens"] += output.completion_tokens
        self.steps += 1
        self._note_infra_error()

    def _note_infra_error(self) -> None:
        """An episode the infrastructure cut short (``info["infra_error"]``) is an error, not a
        failure: reported apart, kept out of the rates, and played again on resume."""
        infra = self.info.get("infra_error")
        if infra:
            self.error = f"infra_error ({infra.get('kind')}): {infra.get('message')}"

    def record(self) -> dict[str, Any]:
        return {
            "key": self.job.key,
            "suite": self.job.suite,
            "env_id": self.job.env_id,
            "policy": self.job.policy,
            "task_id": self.job.task_id,
            "task_type": str(self.info.get("task_type", "unknown")),
            "split": self.job.split,
            "seed": self.job.seed,
            "won": bool(self.info.get("won", False)) and self.error is None,
            "score": float(self.info.get("score", 0.0)) if self.error is None else 0.0,
            "steps": self.steps,
            "max_steps": int(getattr(self.env.unwrapped, "max_steps", 0)),
            "terminated": self.terminated,
            "truncated": self.truncated,
            **self.totals,
            "wall_time_s": time.perf_counter() - self.started,
            "error": self.error,
        }

    def write(self) -> dict[str, Any]:
        """Write the trajectory atomically; an errored episode is kept but not finished."""
        record = self.record()
        record["trajectory"] = str(self.job.path(self.run_dir).relative_to(self.run_dir))
        self.recorder.finish(finished=self.error is None, record=record)
        return record


def drive(
    jobs: Iterable[EpisodeJob],
    policy: Policy,
    *,
    run_dir: Path,
    concurrency: int,
    envs: EnvPool,
    on_finish: Callable[[dict[str, Any]], None],
) -> None:
    """Play ``jobs`` with up to ``concurrency`` episodes in flight, one policy batch per turn.

    A slot freed by a finished episode is refilled at once, so the batch stays full.
    An exception from an env (an engine crash, an image that fails to build) is recorded
    in that episode, which a resumed run plays again; the other episodes go on. A policy
    that fails stops the run: every later episode would fail the same way.
    """
    pending: Iterator[EpisodeJob] = iter(jobs)
    live: list[_Live] = []
    threads = ThreadPoolExecutor(max_workers=concurrency) if concurrency > 1 else None

    def each(method: Callable[..., None], items: list, *args: list) -> None:
        if threads is None:
            for values in zip(items, *args, strict=True):
                method(*values)
        else:
            list(threads.map(method, items, *args))

    try:
        while True:
            fresh: list[_Live] = []
            while len(live) + len(fresh) < concurrency:
                job = next(pending, None)
                if job is None:
                    break
                fresh.append(_Live(job, envs.acquire(job.env, job.env_kwargs), run_dir))
            each(_Live.reset, fresh)
            live.extend(fresh)
            _finish([e for e in live if e.done], live, envs, on_finish)
            if not live:
                if not fresh:
                    return
                continue
            tic = time.perf_counter()
            outputs = policy.act([episode.policy_input() for episode in live])
            if len(outputs) != len(live):
                raise AEMError(
                    f"policy {policy.name!r} returned {len(outputs)} replies for "
                    f"{len(live)} inputs; a policy must answer every input in order"
                )
            share = (time.perf_counter() - tic) / len(live)
            for episode in live:
                episode.totals["policy_time_s"] += share
            each(_Live.step, list(live), outputs)
            _finish([e for e in live if e.done], live, envs, on_finish)
    finally:
        for episode in live:  # the bare env: an interrupted episode leaves no file
            episode.bare.close()
        if threads is not None:
            threads.shutdown()


def _finish(
    done: list[_Live],
    live: list[_Live],
    envs: EnvPool,
    on_finish: Callable[[dict[str, Any]], None],
) -> None:
    for episode in done:
        live.remove(episode)
        record = episode.write()
        if episode.error is None:
            envs.release(episode.job.env, episode.job.env_kwargs, episode.bare)
        else:
            episode.bare.close()
        on_finish(record)
