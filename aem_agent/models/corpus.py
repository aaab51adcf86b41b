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
    ``choose`` call, so the corpus is a function of its arguments.
    """
    import gymnasium as gym

    from aem_agent.policies.base import PolicyInput
    from aem_agent.prompts import build_messages
    from aem_envs.registration import resolve_env_id

    env = gym.make(resolve_env_id(env_id), **dict(env_kwargs or {}))
    rng = random.Random(seed)
    texts: list[str] = []
    try:
        for episode in range(episodes):
            obs, info = env.reset(seed=seed + episode, options={"split": split})
            history: list[tuple[str, str]] = []
            for _ in range(max_turns):
                actions = list(info.get("admissible_actions") or [])
                inp = PolicyInput(env_id, info["instruction"], obs, history, actions)
                messages = build_messages(
                    inp,
                    history_window=history_window,
                    style=prompt_style,  # type: ignore[arg-type]  # checked by build_messages
                )
                texts.append("\n".join(m["content"] for m in messages))
                action = choose(rng, actions, env)
                if action is None:
                    break
                texts.append(reply(action))
                next_obs, _, terminated, truncated, info = env.step(action)
                history = [*history, (obs, action)]
                obs = next_obs
                if terminated or truncated:
                    break
    finally:
        env.close()
    return texts
