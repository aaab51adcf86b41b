"""What one :meth:`~aem_agent.rollout.groups.MultiTurnRollout.play` records: the token-recording
``act`` and the observer that fills an :class:`~aem_agent.rollout.records.Episode` per spec.

Why apart from :mod:`aem_agent.rollout.groups`: the rollout owns the tokenizer and the context
rules (its ``_context``, ``_record`` and prompt encoders, which this recorder calls as their one
user); what happens turn by turn inside the episode engine's driver is this module.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast

from aem_agent.policies.base import PolicyInput
from aem_agent.rollout.engine import Job, Live, Observer, Step
from aem_agent.rollout.records import Episode, EpisodeSpec
from aem_agent.rollout.samplers import Generate, Generated

if TYPE_CHECKING:
    import gymnasium as gym
    from transformers import PreTrainedTokenizerBase

#: Writes the reply for an env's current state in place of the model (e.g. the env's expert,
#: for supervised warm starts); the text must start with the rollout's ``reply_prefix``.
Teacher = Callable[["gym.Env"], str]
#: ``behaviour(env, label)``: the reply text to execute when a teacher's label is ``label``
#: (the label itself, or another action that takes the episode off the teacher's path).
Behaviour = Callable[["gym.Env", str], str]

#: Seconds between two progress lines of one rollout.
PROGRESS_SECONDS = 15.0


class Contexts(Protocol):
    """What the recorder asks of its rollout (:class:`~aem_agent.rollout.groups.MultiTurnRollout`
    is the one implementation): the token contexts, the teacher's ids, and the record of a turn.
    A protocol rather than an import, so the rollout can import the recorder."""

    tokenizer: PreTrainedTokenizerBase
    reply_prefix: str
    progress: Callable[[str], None] | None
    eos_id: int

    def first_prompt(self, inp: PolicyInput) -> list[int]: ...
    def context(self, episode: Episode, inp: PolicyInput) -> list[int]: ...
    def teacher_reply(self, text: str) -> Generated: ...
    def record(
        self,
        episode: Episode,
        inp: PolicyInput,
        turn: int,
        context: list[int],
        reply: Generated,
        text: str,
        step: Step,
    ) -> None: ...


@dataclass(frozen=True)
class Sampled:
    """One turn's answer: the text the env is stepped with, the reply's tokens as sampled (or
    the teacher's label), and the context they continue."""

    reply: str
    generated: Generated
    context: list[int]


class Recording(Observer[Job, Sampled]):
    """One :meth:`MultiTurnRollout.play`: the token-recording ``act`` and the observer that
    fills an :class:`Episode` per spec, turn by turn."""

    def __init__(
        self,
        rollout: Contexts,
        specs: Sequence[EpisodeSpec],
        generate: Generate | None,
        teacher: Teacher | None,
        behaviour: Behaviour | None,
        full_batch: bool,
    ) -> None:
        self.rollout = rollout
        self.episodes = [Episode(spec) for spec in specs]
        self.generate = generate
        self.teacher = teacher
        self.behaviour = behaviour
        self.full_batch = full_batch
        #: The episode of each policy input (the engine keeps one input per episode).
        self._index: dict[int, int] = {}
        self._envs: list[gym.Env] = []
        self._turn = 0
        self._last_report = time.monotonic()

    def started(self, live: Live[Job]) -> None:
        index = self._index[id(live.input)] = len(self._index)
        self._envs.append(live.env)
        self.episodes[index].prompt_ids = self.rollout.first_prompt(live.input)

    def act(self, inputs: list[PolicyInput]) -> list[Sampled]:
        """One reply per input: sampled by ``generate`` from each episode's context, or the
        teacher's; with ``full_batch`` every finished episode adds a one-token placeholder."""
        rollout, episodes = self.rollout, self.episodes
        if rollout.progress is not None and time.monotonic() - self._last_report > PROGRESS_SECONDS:
            rollout.progress(progress_line(episodes, self._turn))
            self._last_report = time.monotonic()
        self._turn += 1
        by_index = {self._index[id(inp)]: inp for inp in inputs}
        active = list(by_index)
        asked = range(len(episodes)) if self.full_batch else active
        contexts = {
            i: rollout.context(episodes[i], by_index[i]) if i in by_index else [rollout.eos_id]
            for i in asked
        }
        if self.teacher is not None:
            labels = {i: self.teacher(self._envs[i]) for i in active}
            replies = {i: rollout.teacher_reply(labels[i]) for i in active}
        else:
            assert self.generate is not None  # play() takes exactly one of generate and teacher
            replies = dict(zip(contexts, self.generate(list(contexts.values())), strict=True))
        texts = [
            rollout.reply_prefix
            + cast("str", rollout.tokenizer.decode(replies[i].ids, skip_special_tokens=True))
            if self.behaviour is None
            else self.behaviour(self._envs[i], labels[i])
            for i in active
        ]
        return [Sampled(t, replies[i], contexts[i]) for i, t in zip(active, texts, strict=True)]

    def stepped(self, live: Live[Job], reply: Sampled, step: Step) -> None:
        episode = self.episodes[self._index[id(live.input)]]
        turn = live.steps - 1  # every episode of a rollout starts at the first turn
        self.rollout.record(
            episode, live.input, turn, reply.context, reply.generated, reply.reply, step
        )
        if episode.out_of_tokens:
            live.halt()

    def finished(self, live: Live[Job]) -> None:
        infra = live.info.get("infra_error")
        episode = self.episodes[self._index[id(live.input)]]
        if infra and episode.infra_error is None:  # the reset already failed
            episode.infra_error, episode.done = str(infra), True


def progress_line(episodes: Sequence[Episode], turn: int) -> str:
    turns = [t for e in episodes for t in e.turns]
    done = sum(e.done or e.out_of_tokens for e in episodes)
    valid = sum(t.action_valid for t in turns) / max(len(turns), 1)
    return (
        f"  rollout: turn {turn}, {done}/{len(episodes)} episodes done, "
        f"{len(turns)} turns played, valid actions {valid:.0%}"
    )
