"""The one episode engine: a pool of envs and a lock-step driver, shared by every caller.

Who plays episodes: the trainer's rollouts (a token-recording ``act``,
:mod:`aem_agent.rollout.groups`), ``aem sft``'s demonstrations (the same rollout with an expert
``act``), ``aem bench`` (a
:class:`~aem_agent.policies.base.Policy` plus the trajectory recorder,
:mod:`benchmarks.episodes`) and the tokenizer corpora (:mod:`aem_agent.models.corpus`). They differ
only in how a batch of turns is answered and in what is kept of each episode; how an env is
made, reset and stepped, what the policy is shown and what the history holds is decided here,
once. (TRL's own tool loop, :mod:`aem_agent.grpo.tool_env`, keeps its conversation itself; its
episodes are reset from the same :class:`~aem_agent.rollout.records.EpisodeSpec`.)

Why lock-step: a model answers a whole batch of turns in one call, so episodes that run side
by side share one model and one forward pass. Env steps of a turn run in threads (engines,
browsers and containers spend their time outside the GIL).

The rules every caller gets:

* an episode is reset with its :class:`~aem_agent.rollout.records.EpisodeSpec`'s seed and options;
* the policy sees a :class:`~aem_agent.policies.base.PolicyInput` whose ``history`` holds
  (observation, action) pairs: the parsed action, or the raw reply when none parsed;
* a reply is parsed by :class:`~aem_envs.wrappers.LLMActionWrapper` (so a reply with no action
  takes the env's invalid-action path);
* an episode ends when the env terminates or truncates, when the env reports an
  infrastructure failure (``info["infra_error"]``), when an observer halts it, or at
  ``max_turns``; its env goes back to the pool, unless the episode failed (then it is closed).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import gymnasium as gym

from aem_agent.policies.base import PolicyInput
from aem_agent.rollout.records import EpisodeSpec
from aem_envs.core.errors import AEMError
from aem_envs.reply import ReplyFormat
from aem_envs.vector import make_ray_env
from aem_envs.wrappers import LLMActionWrapper


class Playable(Protocol):
    """What the driver needs of an episode to play: the spec, and how to make its env."""

    @property
    def spec(self) -> EpisodeSpec: ...

    @property
    def env(self) -> str:
        """The id ``gym.make`` takes (a ``module:`` prefix imports the module first)."""
        ...

    @property
    def env_kwargs(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Job:
    """A :class:`Playable` of nothing more (a bench job carries its suite and policy too)."""

    spec: EpisodeSpec
    env: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)


class Reply(Protocol):
    """An answer to one turn: ``reply`` is the text the env is stepped with."""

    @property
    def reply(self) -> str: ...


J = TypeVar("J", bound=Playable)
R = TypeVar("R", bound=Reply)


class EnvPool:
    """Idle environments kept for reuse, keyed by id and constructor keywords.

    Why: constructing an env can start an engine, a browser or a Ray actor; callers play many
    episodes of the same env, so one instance per concurrent episode is reused by reset. The
    pool holds bare envs; each episode puts its own wrappers (reply parser, recorder) on top.
    With ``ray_address`` each env is made in a Ray actor (:func:`aem_envs.vector.make_ray_env`);
    the episodes are the same either way: same seeds, same observations and rewards.
    """

    def __init__(self, ray_address: str | None = None) -> None:
        self.ray_address = ray_address
        self._idle: dict[str, list[gym.Env]] = {}
        self._lock = threading.Lock()  # envs are acquired from the driver's threads

    @staticmethod
    def _key(env: str, kwargs: dict[str, Any]) -> str:
        return json.dumps([env, kwargs], sort_keys=True, default=repr)

    def acquire(self, env: str, kwargs: dict[str, Any]) -> gym.Env:
        """An idle env of this id and keywords, or a new one."""
        with self._lock:
            idle = self._idle.get(self._key(env, kwargs))
            if idle:
                return idle.pop()
        if self.ray_address is not None:
            return make_ray_env(env, self.ray_address, **kwargs)
        return gym.make(env, **kwargs)

    def release(self, env: str, kwargs: dict[str, Any], instance: gym.Env) -> None:
        with self._lock:
            self._idle.setdefault(self._key(env, kwargs), []).append(instance)

    def idle(self) -> list[gym.Env]:
        """The envs waiting for their next episode."""
        with self._lock:
            return [instance for instances in self._idle.values() for instance in instances]

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for instances in idle.values():
            for instance in instances:
                instance.close()


@dataclass
class Step:
    """What one env step gave, and the observation the action was taken on."""

    acted_on: str
    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


class Live(Generic[J]):
    """An episode in progress: its env, what the policy sees next, and its running totals.

    ``env`` is ``bare`` (the pooled env) under ``below`` (e.g. a recorder; ``bare`` itself by
    default) under the reply parser. ``input`` is one :class:`PolicyInput` kept up to date
    turn by turn (the observation, the history, the admissible actions), so a caller can tell
    its episodes apart by it. A caller that branches an episode (the learning harness's exact
    evaluation) deep-copies its ``Live`` and steps the copy.
    """

    def __init__(
        self,
        job: J,
        bare: gym.Env,
        reply_format: ReplyFormat | None = None,
        below: gym.Env | None = None,
    ) -> None:
        self.job = job
        self.bare = bare
        self.env = LLMActionWrapper(bare if below is None else below, reply_format)
        self.input = PolicyInput(job.spec.env_id, "", "", [], None, self.env)
        self.info: dict[str, Any] = {}
        self.steps = 0
        self.reward = 0.0
        self.invalid_actions = 0
        self.env_time_s = 0.0
        self.policy_time_s = 0.0
        self.started = time.perf_counter()
        self.terminated = False
        self.truncated = False
        self.halted = False
        self.error: str | None = None

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated or self.halted or self.error is not None

    def halt(self) -> None:
        """End this episode before the env does (an observer's budget ran out)."""
        self.halted = True

    def reset(self, contain: bool = False) -> None:
        spec = self.job.spec
        tic = time.perf_counter()
        try:
            observation, info = self.env.reset(seed=spec.seed, options=spec.reset_options())
        except Exception as exc:
            if not contain:
                raise
            self.error = f"reset failed: {type(exc).__name__}: {exc}"
            return
        finally:
            self.env_time_s += time.perf_counter() - tic
        self._see(observation, info)

    def step(self, text: str, contain: bool = False) -> Step | None:
        tic = time.perf_counter()
        try:
            observation, reward, terminated, truncated, info = self.env.step(text)
        except Exception as exc:
            if not contain:
                raise
            self.error = f"step failed: {type(exc).__name__}: {exc}"
            return None
        finally:
            self.env_time_s += time.perf_counter() - tic
        acted_on = self.input.observation
        action = info.get("parsed_action")
        self.input.history.append((acted_on, action if action is not None else text))
        self.terminated, self.truncated = bool(terminated), bool(truncated)
        self.reward += float(reward)
        self.invalid_actions += 0 if info.get("action_valid", True) else 1
        self.steps += 1
        self._see(observation, info)
        return Step(acted_on, observation, float(reward), self.terminated, self.truncated, info)

    def _see(self, observation: str, info: dict[str, Any]) -> None:
        self.info = info
        self.input.observation = observation
        self.input.instruction = str(info.get("instruction", ""))
        self.input.admissible_actions = info.get("admissible_actions")
        infra = info.get("infra_error")
        if not infra:
            return
        # cut short by the machinery: an error, not a failure (aem_envs' Outcome reports a
        # kind and a message; an env of its own may report a line of text)
        if isinstance(infra, dict):
            self.error = f"infra_error ({infra.get('kind')}): {infra.get('message')}"
        else:
            self.error = f"infra_error: {infra}"


class Observer(Generic[J, R]):
    """What a caller keeps of its episodes: hooks the driver calls, each a no-op here.

    Every hook runs in the driver's thread, in the order of the episodes, except
    :meth:`replied`, which runs beside the env step in a worker thread.
    """

    def wrap(self, job: J, env: gym.Env) -> gym.Env:
        """The env an episode plays, under the reply parser (e.g. a recorder around ``env``)."""
        return env

    def started(self, episode: Live[J]) -> None:
        """After the reset (also when it failed: ``episode.error``)."""

    def replied(self, episode: Live[J], reply: R) -> None:
        """Before the env is stepped with ``reply``."""

    def stepped(self, episode: Live[J], reply: R, step: Step) -> None:
        """After a successful step; may :meth:`Live.halt` the episode."""

    def finished(self, episode: Live[J]) -> None:
        """When the episode ended (or ``max_turns`` came), before its env is released."""


def drive(
    jobs: Iterable[J],
    act: Callable[[list[PolicyInput]], Sequence[R]],
    observer: Observer[J, R],
    *,
    envs: EnvPool,
    concurrency: int,
    threads: ThreadPoolExecutor | None = None,
    reply_format: ReplyFormat | None = None,
    max_turns: int | None = None,
    sync: Callable[[int], int] | None = None,
    contain_errors: bool = False,
) -> None:
    """Play ``jobs`` with up to ``concurrency`` episodes in flight, one ``act`` call per turn.

    A slot freed by a finished episode is refilled at once, so the batch stays full. Envs are
    made, reset and stepped in ``threads`` (in this thread without). ``act`` answers the
    inputs of the episodes in flight, in the order their jobs came, one reply each.
    ``max_turns`` ends the whole drive after that many turns; ``sync`` (distributed runs) maps
    this process's count of episodes in flight to the count over all processes, so that every
    process calls ``act`` the same number of times (with an empty list once its own are done).

    With ``contain_errors`` an exception from an env (an engine crash, an image that fails to
    build) ends that episode with ``error`` set and the others go on; without, it propagates.
    A failure of ``act`` always propagates: every later turn would fail the same way. The
    envs of episodes in flight when an exception propagates are closed, not pooled.
    """
    pending: Iterator[J] = iter(jobs)
    live: list[Live[J]] = []

    def each(method: Callable[..., Any], *args: Sequence[Any]) -> list[Any]:
        if threads is None:
            return [method(*values) for values in zip(*args, strict=True)]
        return list(threads.map(method, *args))

    def end(episode: Live[J]) -> None:
        live.remove(episode)
        observer.finished(episode)
        if episode.error is None:
            envs.release(episode.job.env, episode.job.env_kwargs, episode.bare)
        else:
            episode.bare.close()

    def start() -> bool:
        fresh: list[J] = []
        while len(live) + len(fresh) < concurrency:
            job = next(pending, None)
            if job is None:
                break
            fresh.append(job)
        if not fresh:
            return False
        bare = each(lambda job: envs.acquire(job.env, job.env_kwargs), fresh)
        started = [
            Live(job, env, reply_format, observer.wrap(job, env))
            for job, env in zip(fresh, bare, strict=True)
        ]
        live.extend(started)
        each(lambda episode: episode.reset(contain_errors), started)
        for episode in started:
            observer.started(episode)
        for episode in [e for e in started if e.done]:
            end(episode)
        return True

    def turn(episode: Live[J], reply: R) -> Step | None:
        observer.replied(episode, reply)
        return episode.step(reply.reply, contain_errors)

    turns = 0
    try:
        while max_turns is None or turns < max_turns:
            if start() and not live:
                continue  # every new episode ended at its reset: take the next ones
            if not (len(live) if sync is None else sync(len(live))):
                break
            tic = time.perf_counter()
            replies = act([episode.input for episode in live])
            if len(replies) != len(live):
                raise AEMError(
                    f"the policy returned {len(replies)} replies for {len(live)} inputs; "
                    "a policy must answer every input in order"
                )
            if live:
                share = (time.perf_counter() - tic) / len(live)
                for episode in live:
                    episode.policy_time_s += share
            steps = each(turn, list(live), list(replies))
            for episode, reply, step in zip(list(live), replies, steps, strict=True):
                if step is not None:
                    observer.stepped(episode, reply, step)
            for episode in [e for e in live if e.done]:
                end(episode)
            turns += 1
        for episode in list(live):  # max_turns came first
            end(episode)
    finally:
        for episode in live:  # an exception: these episodes are cut, their envs unknown
            episode.bare.close()
