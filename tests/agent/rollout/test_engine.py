"""The episode engine (:mod:`aem_agent.rollout.engine`): the rules every caller's episodes
follow."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym
import pytest

from aem_agent.policies.base import PolicyInput, PolicyOutput
from aem_agent.rollout.engine import EnvPool, Job, Live, Observer, Step, drive
from aem_agent.rollout.records import EpisodeSpec
from aem_envs.core.errors import DataError
from aem_envs.reply import REPLY_FORMAT
from aem_envs.wrappers import LLMActionWrapper
from tests.benchmarks.toy import ENV as COUNTER


class Kept(Observer[Job, PolicyOutput]):
    """Keeps what the engine reports: each episode's steps, its end and its env."""

    def __init__(self, halt_after: int | None = None) -> None:
        self.halt_after = halt_after
        self.steps: dict[EpisodeSpec, list[tuple[str, str, float]]] = {}
        self.ended: dict[EpisodeSpec, Live[Job]] = {}
        self.wrapped: list[gym.Env] = []

    def wrap(self, job: Job, env: gym.Env) -> gym.Env:
        self.wrapped.append(env)
        return env

    def started(self, episode: Live[Job]) -> None:
        self.steps[episode.job.spec] = []

    def stepped(self, episode: Live[Job], reply: PolicyOutput, step: Step) -> None:
        self.steps[episode.job.spec].append((step.acted_on, reply.reply, step.reward))
        if self.halt_after is not None and episode.steps >= self.halt_after:
            episode.halt()

    def finished(self, episode: Live[Job]) -> None:
        self.ended[episode.job.spec] = episode


def expert(inputs: list[PolicyInput]) -> list[PolicyOutput]:
    assert all(isinstance(inp.env, LLMActionWrapper) for inp in inputs)  # under the parser
    return [
        PolicyOutput(REPLY_FORMAT.format(inp.env.get_wrapper_attr("expert_action")()))
        for inp in inputs
        if inp.env is not None
    ]


@pytest.mark.parametrize("env_id", ["aem/ALFWorld-v0", "aem/WebShop-v0"])
def test_episodes_are_the_same_one_at_a_time_and_side_by_side(env_id: str) -> None:
    """Lock-step with refilled slots in threads plays exactly the episodes played one by one,
    and one env per slot serves every episode."""
    jobs = [Job(EpisodeSpec(env_id, seed, "train"), env_id) for seed in range(5)]
    played = []
    for concurrency in (1, 3):
        kept, envs = Kept(), EnvPool()
        with ThreadPoolExecutor(concurrency) as threads:
            drive(jobs, expert, kept, envs=envs, concurrency=concurrency, threads=threads)
        assert len({id(env) for env in kept.wrapped}) == concurrency == len(envs.idle())
        envs.close()
        assert all(e.info["won"] and e.error is None for e in kept.ended.values())
        played.append(kept.steps)
    assert played[0] == played[1]


def test_history_holds_the_parsed_action_or_else_the_raw_reply(doors_env_id: str) -> None:
    replies = iter(["I open a door.", REPLY_FORMAT.format("open red")])
    seen: list[list[tuple[str, str]]] = []

    def act(inputs: list[PolicyInput]) -> list[PolicyOutput]:
        seen.append(list(inputs[0].history))
        return [PolicyOutput(next(replies, REPLY_FORMAT.format("open blue")))]

    envs = EnvPool()
    job = Job(EpisodeSpec(doors_env_id, 0), doors_env_id)
    drive([job], act, Kept(), envs=envs, concurrency=1, max_turns=3)
    envs.close()
    first = "You see a red, a green and a blue door."
    assert seen[1] == [(first, "I open a door.")]
    assert seen[2][1][1] == "open red"


def test_max_turns_and_sync_keep_every_process_calling_act(doors_env_id: str) -> None:
    """A halted episode ends at once; with ``sync`` reporting episodes elsewhere, ``act`` is
    still called (with no inputs) until ``max_turns``; the envs go back to the pool."""
    calls: list[int] = []

    def act(inputs: list[PolicyInput]) -> list[PolicyOutput]:
        calls.append(len(inputs))
        return [PolicyOutput(REPLY_FORMAT.format("look")) for _ in inputs]

    envs, kept = EnvPool(), Kept(halt_after=1)
    jobs = [Job(EpisodeSpec(doors_env_id, seed), doors_env_id) for seed in range(2)]
    drive(jobs, act, kept, envs=envs, concurrency=2, max_turns=3, sync=lambda n: n + 1)
    assert calls == [2, 0, 0]
    assert all(e.halted and not e.truncated for e in kept.ended.values())
    assert len(envs.idle()) == 2
    envs.close()


def test_an_env_error_propagates_or_is_contained_and_its_env_is_not_reused() -> None:
    spec = EpisodeSpec(COUNTER, 0, "eval", "eval-1")
    job = Job(spec, COUNTER, {"crash_task": "eval-1"})
    envs = EnvPool()
    with pytest.raises(DataError, match="the engine crashed"):
        drive([job], expert, Kept(), envs=envs, concurrency=1)
    kept = Kept()
    drive([job], expert, kept, envs=envs, concurrency=1, contain_errors=True)
    assert kept.ended[spec].error == "reset failed: DataError: the engine crashed"
    assert envs.idle() == []  # both crashed envs were closed, not pooled
