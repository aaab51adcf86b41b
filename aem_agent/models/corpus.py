"""Texts of played episodes, for learning a tokenizer from an env's own words.

A tokenizer learnt from the prompts a model will read and the replies it will write makes an
action a handful of tokens. Both the small agent's tokenizer (:mod:`aem_agent.models.small`) and the
learning harness's tiny one (``benchmarks/learning/start.py``) are learnt from this corpus;
they differ only in who picks the actions and how a reply is written.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

from aem_agent.policies.base import PolicyInput, PolicyOutput
from aem_agent.rollout.engine import EnvPool, Job, Live, Observer, Step, drive
from aem_agent.rollout.records import EpisodeSpec
from aem_envs.reply import REPLY_FORMAT

#: Picks the action of a turn from ``(rng, admissible actions, env)``; ``None`` ends the episode.
Chooser = Callable[[random.Random, list[str], Any], "str | None"]


def played_texts(
    env_id: str,
    *,
    episodes: int,
    split: str,
    choose: Chooser,
    reply: Callable[[str], str],
    env_kwargs: Mapping[str, Any] | None = None,
    max_turns: int = 50,
    prompt_style: str = "full",
    history_window: int = 5,
    seed: int = 0,
) -> list[str]:
    """Every prompt of ``episodes`` episodes of ``split`` as the rollout renders it (system and
    user text, one text per turn) and, after each, ``reply(action)`` for the action played.

    Episode ``k`` is reset with seed ``seed + k``; one ``random.Random(seed)`` serves every
    ``choose`` call, so the corpus is a function of its arguments. The episodes are played
    one after another by the episode engine (:mod:`aem_agent.rollout.engine`), so the prompts hold
    the history a rollout's would.
    """
    from aem_envs.registration import resolve_env_id

    make_id, kwargs = resolve_env_id(env_id), dict(env_kwargs or {})
    jobs = [Job(EpisodeSpec(env_id, seed + k, split), make_id, kwargs) for k in range(episodes)]
    writer = _CorpusWriter(choose, reply, max_turns, prompt_style, history_window, seed)
    envs = EnvPool()
    try:
        drive(jobs, writer.act, writer, envs=envs, concurrency=1)
    finally:
        envs.close()
    return writer.texts


class _CorpusWriter(Observer[Job, PolicyOutput]):
    """Renders each turn's prompt and picks its action as soon as the observation is in
    (``choose`` may end the episode there, before the env is stepped again)."""

    def __init__(
        self,
        choose: Chooser,
        reply: Callable[[str], str],
        max_turns: int,
        prompt_style: str,
        history_window: int,
        seed: int,
    ) -> None:
        self.choose, self.reply, self.max_turns = choose, reply, max_turns
        self.prompt_style, self.history_window = prompt_style, history_window
        self.rng = random.Random(seed)
        self.texts: list[str] = []
        self._next: PolicyOutput | None = None

    def act(self, inputs: list[PolicyInput]) -> list[PolicyOutput]:
        assert self._next is not None and len(inputs) == 1  # one episode at a time
        return [self._next]

    def started(self, episode: Live[Job]) -> None:
        if not episode.done:
            self._turn(episode)

    def stepped(self, episode: Live[Job], reply: PolicyOutput, step: Step) -> None:
        if not episode.done and episode.steps < self.max_turns:
            self._turn(episode)
        else:
            episode.halt()

    def _turn(self, episode: Live[Job]) -> None:
        from aem_agent.prompts import build_messages

        messages = build_messages(
            episode.input,
            history_window=self.history_window,
            style=self.prompt_style,  # type: ignore[arg-type]  # checked by build_messages
        )
        self.texts.append("\n".join(m["content"] for m in messages))
        actions = list(episode.input.admissible_actions or [])
        action = self.choose(self.rng, actions, episode.env)
        if action is None:
            episode.halt()
            return
        self.texts.append(self.reply(action))
        self._next = PolicyOutput(REPLY_FORMAT.format(action))
