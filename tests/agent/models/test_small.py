"""The small agent's start (``aem-small-init``): corpus from the train split only, a tokenizer
that makes an ALFWorld action a handful of tokens, a model built once into the cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from aem_agent.models import small
from aem_agent.models.bundled import BUNDLED_MODELS, MARKER, small_init_checkpoint
from aem_agent.prompts import read_prompt_layout
from aem_envs.registration import resolve_env_id

pytest.importorskip("transformers")

#: A few episodes and a narrow model: the test builds in seconds what the bundle builds larger.
EPISODES = 6
NARROW = {**small.SMALL_ARCHITECTURE, "hidden_size": 32, "intermediate_size": 64, "num_layers": 1}
#: SFT steps of the held-out test: enough for its model to learn to copy the item asked for.
MAX_STEPS = 120


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    return small.split_corpus(
        small.SMALL_ENV_ID, episodes=EPISODES, env_kwargs=small.SMALL_ENV_KWARGS
    )


def test_corpus_holds_train_prompts_and_actions_only(corpus: list[str]) -> None:
    train = _instructions("train")
    prompts = [t for t in corpus if t.startswith("You act in a text environment")]
    tasks = {line.removeprefix("Task: ") for t in prompts for line in t.splitlines()[1:2]}
    assert prompts and tasks <= train
    actions = [t for t in corpus if t not in prompts]
    assert any(a.startswith("go to ") for a in actions)
    assert any(a.startswith("take ") for a in actions)


def test_an_action_is_a_handful_of_tokens(corpus: list[str], tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory = small.build_small_model(tmp_path / "m", corpus, architecture=NARROW)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    prompts = {t for t in corpus if t.startswith("You act in a text environment")}
    actions = [t for t in corpus if t not in prompts]
    lengths = [len(tokenizer(f"{a}</action>")["input_ids"]) for a in actions]
    assert max(lengths) <= 10, max(lengths)  # e.g. take | mug | _ | 1 | from | ... | </action>
    assert len(tokenizer("</action>")["input_ids"]) == 1
    model = AutoModelForCausalLM.from_pretrained(directory)
    assert model.config.vocab_size == len(tokenizer)
    assert read_prompt_layout(directory)["prompt_style"] == small.SMALL_PROMPT["prompt_style"]


def test_the_bundled_start_builds_once_named_by_its_recipe(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(small, "CORPUS_EPISODES", 2)
    monkeypatch.setattr(small, "SMALL_ARCHITECTURE", NARROW)
    first = small_init_checkpoint(tmp_path)
    assert (first / MARKER).is_file() and (first / "config.json").is_file()
    assert json.loads((first / MARKER).read_text())[0] == NARROW
    assert small_init_checkpoint(tmp_path) == first  # reused, not rebuilt
    monkeypatch.setattr(small, "CORPUS_EPISODES", 3)
    assert small_init_checkpoint(tmp_path) != first  # another recipe, another directory
    assert "aem-small-init" in BUNDLED_MODELS


def _instructions(split: str) -> set[str]:
    env = gym.make(resolve_env_id(small.SMALL_ENV_ID))
    try:
        ids = env.get_wrapper_attr("task_ids")(split)
        texts = set()
        for task_id in ids:
            _, info = env.reset(options={"split": split, "task_id": task_id})
            texts.add(info["instruction"])
        return texts
    finally:
        env.close()


def test_sft_on_the_train_split_beats_a_random_valid_policy_on_heldout_tasks(
    tmp_path: Path,
) -> None:
    """A small model built from an easy task's train text and trained a few ``aem sft`` steps
    on its expert (the path the ALFWorld start takes) wins held-out tasks, and more of them
    than a policy that plays a random valid action on every turn of the same tasks: it has
    learnt to copy the item asked for out of the prompt, not only the reply format and the
    items' words (a model that knew only those wins at most what the random valid policy
    wins, and one that always names the same item less)."""
    from aem_agent.sft.finetune import run_sft
    from aem_agent.sft.settings import SFTSettings, sft_model
    from benchmarks.learning.env import ENV_ID, register

    register()
    kwargs = {"n_items": 5}
    corpus = small.split_corpus(
        ENV_ID, episodes=40, env_kwargs=kwargs, max_turns=2, prompt_style="compact"
    )
    start = small.build_small_model(
        tmp_path / "start",
        corpus,
        architecture={**NARROW, "hidden_size": 64, "intermediate_size": 128, "num_layers": 2},
    )
    layout: dict[str, Any] = {
        "reply_prefix": "<action>",
        "history_window": 0,
        "max_turns": 2,
        "prompt_style": "compact",
    }
    before, _ = _heldout(start, ENV_ID, kwargs, layout)
    random_valid, _ = _heldout(start, ENV_ID, kwargs, layout, random_valid=True)
    settings = SFTSettings(
        env_ids=[ENV_ID],
        output_dir=str(tmp_path / "sft"),
        episodes=64,
        max_steps=MAX_STEPS,
        per_device_train_batch_size=16,
        gradient_accumulation_steps=1,
        learning_rate=3e-3,
        max_turn_tokens=4,
        env_kwargs=kwargs,
        torch_threads=1,
        save_steps=1000,
        **layout,
    )
    run_sft(settings, sft_model(model_name_or_path=str(start), use_peft=False))
    after, valid = _heldout(tmp_path / "sft", ENV_ID, kwargs, layout)
    assert valid >= 0.9 and after >= random_valid + 0.2 and after > before, (
        before,
        random_valid,
        after,
        valid,
    )


def _heldout(
    model_dir: Path,
    env_id: str,
    env_kwargs: dict[str, Any],
    layout: dict[str, Any],
    *,
    random_valid: bool = False,
) -> tuple[float, float]:
    """Success and valid-action rate on 48 tasks of the env's held-out (test) split: the
    model's greedy replies, or (``random_valid``) a seeded random admissible action each turn."""
    import random

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from aem_agent.rollout.groups import MultiTurnRollout
    from aem_agent.rollout.records import EpisodeSpec
    from aem_agent.rollout.samplers import model_generator
    from aem_envs.reply import REPLY_FORMAT

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rollout = MultiTurnRollout(
        tokenizer,
        env_kwargs=env_kwargs,
        workers=1,
        max_turn_tokens=4,
        reply_prefix=layout["reply_prefix"],
        history_window=layout["history_window"],
        max_turns=layout["max_turns"],
        prompt_style=layout["prompt_style"],
    )
    specs = [EpisodeSpec(env_id, seed, "test") for seed in range(48)]
    rng = random.Random(0)
    try:
        if random_valid:
            episodes = rollout.play(
                specs,
                teacher=lambda env: REPLY_FORMAT.format(
                    rng.choice(env.get_wrapper_attr("admissible_actions"))
                ),
            )
        else:
            model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
            greedy = GenerationConfig(
                do_sample=False,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id,
            )
            episodes = rollout.play(
                specs, model_generator(model, tokenizer, greedy, max_new_tokens=4)
            )
    finally:
        rollout.close()
    turns = [t for e in episodes for t in e.turns]
    return sum(e.won for e in episodes) / len(episodes), sum(t.action_valid for t in turns) / len(
        turns
    )
