"""The small agent's start (``aem-small-init``): corpus from the train split only, a tokenizer
that makes an ALFWorld action a handful of tokens, a model built once into the cache."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest

from aem_agent import small
from aem_agent.models import BUNDLED_MODELS, MARKER, small_init_checkpoint
from aem_agent.prompts import read_prompt_layout
from aem_envs.registration import resolve_env_id

pytest.importorskip("transformers")

#: A few episodes and a narrow model: the test builds in seconds what the bundle builds larger.
EPISODES = 6
NARROW = {**small.SMALL_ARCHITECTURE, "hidden_size": 32, "intermediate_size": 64, "num_layers": 1}


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
        ids = env.unwrapped.task_ids(split)
        texts = set()
        for task_id in ids:
            _, info = env.reset(options={"split": split, "task_id": task_id})
            texts.add(info["instruction"])
        return texts
    finally:
        env.close()
