"""The small agent's start: a causal LM of a few million parameters and a tokenizer learnt from
the bundled ALFWorld train split, built from a config on first use (``--model aem-small-init``).

Why: a SmolLM2-135M RL step costs minutes on two CPU cores, so the paper's batch shape (16
groups × 8 episodes of tens of turns) cannot be reached with it. A model of a few million
parameters whose tokenizer makes an ALFWorld action a handful of tokens samples and trains
fast enough. It starts random; ``aem sft --model aem-small-init --full`` teaches it from the
train split's expert (the same code path as SmolLM2's warm start), which is the start RL runs
from. Nothing here reads a held-out split.

The tokenizer's corpus is the text the agent will be shown and will write, played on the
train split exactly as the rollouts render it (:func:`split_corpus`): each step's prompt in
the small agent's prompt layout (:data:`SMALL_PROMPT`) and each reply's action, on episodes
where the env's expert acts with a share of random admissible actions mixed in (so the
observations of wrong turns are in it too). The build is seeded: a rebuilt start is the same.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aem_envs.reply import REPLY_FORMAT

#: The env the small agent is built for, and its expert (knows only what the episode showed).
SMALL_ENV_ID = "aem/ALFWorld-v0"
SMALL_ENV_KWARGS: dict[str, Any] = {"expert": "search"}
#: The prompt layout the small agent is trained and played in (``aem-prompt.json`` keys).
SMALL_PROMPT: dict[str, Any] = {
    "prompt_style": "compact",
    "history_window": 1,
    "reply_prefix": REPLY_FORMAT.action_open,
}
#: The architecture (:func:`aem_agent.models.tiny.build_tiny_model` settings) and tokenizer size.
SMALL_ARCHITECTURE: dict[str, int] = {
    "vocab_size": 2048,
    "hidden_size": 256,
    "intermediate_size": 768,
    "num_layers": 4,
    "num_heads": 4,
    "num_kv_heads": 2,
    "max_positions": 2048,
}
#: Train-split episodes the tokenizer's corpus is played from, their length, and the share of
#: turns on which a random admissible action is played instead of the expert's.
CORPUS_EPISODES = 360
CORPUS_MAX_TURNS = 30
CORPUS_EXPLORE = 0.3
#: The reply format's tags, kept whole (never split) by the tokenizer.
ACTION_TAGS = (REPLY_FORMAT.action_open, REPLY_FORMAT.action_close)


def split_corpus(
    env_id: str,
    *,
    episodes: int,
    split: str = "train",
    env_kwargs: Mapping[str, Any] | None = None,
    max_turns: int = CORPUS_MAX_TURNS,
    explore: float = CORPUS_EXPLORE,
    prompt_style: str = "compact",
    history_window: int = 1,
    seed: int = 0,
) -> list[str]:
    """Texts of ``episodes`` episodes of ``split``: every prompt as the rollout renders it
    (system and user text) and every action played.

    Episode ``k`` is reset with seed ``seed + k``; on each turn the env's expert acts, or with
    probability ``explore`` a random admissible action, so both the expert's path and the
    observations off it are in the corpus.
    """
    from aem_agent.models.corpus import played_texts

    def expert_or_explore(rng: random.Random, actions: list[str], env: Any) -> str:
        if actions and rng.random() < explore:
            return rng.choice(actions)
        return str(env.get_wrapper_attr("expert_action")())

    return played_texts(
        env_id,
        episodes=episodes,
        split=split,
        choose=expert_or_explore,
        reply=str,
        env_kwargs=env_kwargs,
        max_turns=max_turns,
        prompt_style=prompt_style,
        history_window=history_window,
        seed=seed,
    )


def build_small_model(
    directory: str | Path,
    corpus: Sequence[str],
    *,
    architecture: Mapping[str, int] | None = None,
    seed: int = 0,
) -> Path:
    """A tokenizer learnt from ``corpus`` and a random model of ``architecture`` (default
    :data:`SMALL_ARCHITECTURE`) written to ``directory``, with the small agent's prompt layout
    (``aem-prompt.json``) beside them so every loader plays it in that layout."""
    from aem_agent.models.tiny import build_tiny_model
    from aem_agent.prompts import write_prompt_layout

    directory = build_tiny_model(
        directory,
        corpus=corpus,
        corpus_repeats=1,
        added_tokens=ACTION_TAGS,
        seed=seed,
        **dict(architecture or SMALL_ARCHITECTURE),
    )
    write_prompt_layout(directory, {**SMALL_PROMPT, "system_prompt": None})
    return directory


def build_small_start(out: Path) -> None:
    """The bundled ``aem-small-init`` checkpoint, written into ``out`` (see
    :func:`aem_agent.models.bundled.small_init_checkpoint`): corpus, tokenizer and random
    weights."""
    corpus = split_corpus(
        SMALL_ENV_ID,
        episodes=CORPUS_EPISODES,
        env_kwargs=SMALL_ENV_KWARGS,
        prompt_style=SMALL_PROMPT["prompt_style"],
        history_window=SMALL_PROMPT["history_window"],
    )
    build_small_model(out, corpus)
