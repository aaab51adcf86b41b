"""Fixtures for the agent tests: a tiny random chat model built on the spot, no download.

Why build one: unit tests of rollouts and the trainer need a real tokenizer, a chat template
and a causal LM that TRL accepts, but must run offline in CI in well under a second per step.
A byte-level BPE trained on a few sentences plus a 2-layer ``Qwen2ForCausalLM`` is all that.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import gymnasium as gym
import pytest

from aem_envs.core.base import Outcome, Task, TextEnv

os.environ.setdefault("OMP_NUM_THREADS", "1")

#: ChatML, the template Qwen2.5 and SmolLM2 use; ``add_generation_prompt`` opens a reply.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_CORPUS = [
    "You are an agent in a text world. Think, then act.",
    "<think>I should look around first.</think><action>look</action>",
    "<think>The key is on the table.</think><action>take key from table</action>",
    "Observation: You are in a kitchen. There is a table, a fridge and a door.",
    "Admissible actions: look, go north, go south, open fridge, take key from table.",
    "Your task is to put a clean apple in the fridge. Reply with <action>...</action>.",
    "0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ .,;:!?'\"()[]{}<>/=-_",
]


def build_tiny_model(directory: Path, *, vocab_size: int = 320, seed: int = 0) -> Path:
    """Write a tokenizer (ChatML template) and a random 2-layer Qwen2 model to ``directory``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(_CORPUS * 4, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    tokenizer.save_pretrained(directory)

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Path of a tiny random chat model (tokenizer + ChatML template + 2-layer Qwen2)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


class DoorsEnv(TextEnv):
    """Three doors, the seed hides a prize behind one; opening it wins, others do nothing.

    Small enough for rollout and trainer tests to play whole episodes in milliseconds.
    """

    default_max_steps = 4
    DOORS = ("red", "green", "blue")

    def task_ids(self, split: str) -> Sequence[str]:
        return [f"prize-{door}" for door in self.DOORS]

    def _start(self, task_id: str, split: str) -> tuple[Task, str]:
        self._prize = task_id.removeprefix("prize-")
        return Task(task_id, "doors", "find the prize"), "You see a red, a green and a blue door."

    def _act(self, action: str) -> Outcome:
        door = action.removeprefix("open ").strip()
        if door not in self.DOORS:
            return Outcome(f"There is no {door!r} door.", valid=False)
        if door == self._prize:
            return Outcome("You found the prize!", done=True, won=True, score=1.0)
        return Outcome(f"The {door} door is empty.")

    def _admissible(self) -> list[str]:
        return [f"open {door}" for door in self.DOORS]

    def expert_action(self) -> str:
        return f"open {self._prize}"


DOORS_ENV_ID = "aemtest/Doors-v0"


@pytest.fixture(scope="session")
def doors_env_id() -> str:
    """Id of :class:`DoorsEnv`, registered with Gymnasium for the session."""
    if DOORS_ENV_ID not in gym.registry:
        gym.register(id=DOORS_ENV_ID, entry_point=DoorsEnv)
    return DOORS_ENV_ID
