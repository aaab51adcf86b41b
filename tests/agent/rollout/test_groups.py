"""Multi-turn rollouts on a small text env: groups, both layouts, token ids kept as generated.

The env ids are a parameter so that tests on the real envs (ALFWorld, WebShop, SWE) can reuse
:func:`check_rollout` once they land.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from aem_agent.rollout.batches import trajectory_batch
from aem_agent.rollout.groups import MultiTurnRollout
from aem_agent.rollout.records import EpisodeSpec, RolloutError, task_dataset
from aem_agent.rollout.samplers import Generated
from aem_envs.registration import ENTRIES


class ScriptedGenerator:
    """Replies from a script of texts, tokenised; records every context it was given."""

    def __init__(self, tokenizer, replies: Sequence[str]) -> None:
        self.tokenizer = tokenizer
        self.replies = list(replies)
        self.contexts: list[list[int]] = []
        self.outputs: list[list[int]] = []
        self.calls = 0

    def __call__(self, contexts: list[list[int]]) -> list[Generated]:
        out = []
        for context in contexts:
            text = self.replies[self.calls % len(self.replies)]
            self.calls += 1
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            ids = [*ids, self.tokenizer.eos_token_id]
            self.contexts.append(list(context))
            self.outputs.append(ids)
            out.append(Generated(ids, [-0.5] * len(ids), [1.0] * len(ids)))
        return out


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def check_rollout(env_id: str, tokenizer, replies: Sequence[str], group: int = 2) -> list:
    """Play one group on ``env_id`` and check the trajectory layout's invariants."""
    rollout = MultiTurnRollout(
        tokenizer, layout="trajectory", max_turns=3, max_turn_tokens=64, workers=2
    )
    generator = ScriptedGenerator(tokenizer, replies)
    try:
        episodes = rollout.play([EpisodeSpec(env_id, seed=7)] * group, generator)
    finally:
        rollout.close()
    batch = trajectory_batch(episodes)
    assert batch["prompt_ids"][0] == batch["prompt_ids"][1]  # same task, same seed
    generated = iter(zip(generator.contexts, generator.outputs, strict=True))
    by_episode: dict[int, list] = {i: [] for i in range(group)}
    for turn in range(rollout.max_turns):
        for i, episode in enumerate(episodes):
            if turn < len(episode.turns):
                by_episode[i].append(next(generated))
    for i, episode in enumerate(episodes):
        n = len(episode.completion_ids)
        assert len(episode.env_mask) == len(episode.logprobs) == len(episode.entropies) == n
        assert len(episode.turn_ids) == n
        offset = 0
        for turn, (context, output) in enumerate(by_episode[i]):
            # The model's context is exactly prompt + completion so far: no re-tokenisation.
            assert context == episode.prompt_ids + episode.completion_ids[:offset]
            assert episode.completion_ids[offset : offset + len(output)] == output
            assert episode.env_mask[offset : offset + len(output)] == [1] * len(output)
            assert set(episode.turn_ids[offset : offset + len(output)]) == {turn}
            offset += len(output)
            while offset < n and episode.env_mask[offset] == 0:
                offset += 1
        assert offset == n
    return episodes


#: Env ids the layout invariants are checked on: the test env and every aem id.
ROLLOUT_ENV_IDS = ["aemtest/Doors-v0"] + [
    pytest.param(item.id, id=item.id, marks=[getattr(pytest.mark, r) for r in item.resources])
    for item in ENTRIES
]


@pytest.mark.parametrize("env_id", ROLLOUT_ENV_IDS)
def test_rollout_invariants_hold(env_id: str, tokenizer, doors_env_id: str) -> None:
    check_rollout(env_id, tokenizer, ["<think>hm</think><action>look</action>", "no action"])


def test_trajectory_layout_keeps_generated_ids_and_masks_observations(
    tokenizer, doors_env_id: str
) -> None:
    episodes = check_rollout(
        doors_env_id, tokenizer, ["<think>try</think><action>open red</action>", "open nothing"]
    )
    first = episodes[0]
    masked = [t for t, m in zip(first.completion_ids, first.env_mask, strict=True) if m == 0]
    text = tokenizer.decode(masked)
    assert "<|im_start|>user" in text and "<|im_start|>assistant" in text
    assert "Observation:" in text  # the env's reply sits in the masked segment
    # Compact segments: the task and the reply format are in the first prompt only.
    assert "Your task is to" not in text and "Example reply" not in text
    assert first.entropies[first.env_mask.index(0)] == 0.0


def test_episode_reward_follows_the_env_scheme(tokenizer, doors_env_id: str) -> None:
    rollout = MultiTurnRollout(
        tokenizer, layout="trajectory", max_turns=3, max_turn_tokens=64, workers=1
    )
    replies = ["<action>open red</action>", "<action>open green</action>", "nonsense"]
    specs = [EpisodeSpec(doors_env_id, seed=s) for s in range(6)]
    episodes = rollout.play(specs, lambda contexts: _script(tokenizer, contexts, replies))
    rollout.close()
    for episode in episodes:
        invalid = sum(not t.action_valid for t in episode.turns)
        expected = (10.0 if episode.won else 0.0) - 0.1 * invalid
        assert episode.reward == pytest.approx(expected)
        assert episode.done or len(episode.turns) == 3
    assert any(e.won for e in episodes) and not all(e.won for e in episodes)


def _script(tokenizer, contexts: list[list[int]], replies: list[str]) -> list[Generated]:
    """Every episode opens red, then green, then says nonsense (turn read off the context)."""
    out = []
    for context in contexts:
        turn = tokenizer.decode(context).count("<|im_start|>assistant") - 1
        ids = [*tokenizer(replies[turn])["input_ids"], tokenizer.eos_token_id]
        out.append(Generated(ids, [0.0] * len(ids), [0.0] * len(ids)))
    return out


def test_step_layout_gives_one_sample_per_step_with_history(tokenizer, doors_env_id: str) -> None:
    rollout = MultiTurnRollout(
        tokenizer, layout="step", max_turns=3, max_turn_tokens=64, history_window=1, workers=1
    )
    generator = ScriptedGenerator(tokenizer, ["<action>open purple</action>"])
    episodes = rollout.play([EpisodeSpec(doors_env_id, seed=1)] * 2, generator)
    rollout.close()
    eos = tokenizer.eos_token_id
    batch = trajectory_batch(episodes, stand_in_eos=eos)
    # TRL sees one-token stand-in rows (its forwards over them cost nothing).
    assert batch["completion_ids"] == [[eos], [eos]]
    assert all(len(p) == 1 for p in batch["prompt_ids"])
    assert batch["valid_rate"] == [0.0, 0.0]
    steps = batch["steps"]
    assert all("entropies" in row for rows in steps for row in rows)
    assert [len(rows) for rows in steps] == [3, 3]
    assert all(row["completion_ids"] == generator.outputs[0] for rows in steps for row in rows)
    assert [row["prompt_ids"] for row in steps[0]] == generator.contexts[0::2]
    third = tokenizer.decode(steps[0][2]["prompt_ids"])
    assert "[Step 2]" in third and "[Step 1]" not in third  # window of 1
    assert all(e.reward == pytest.approx(-0.3) for e in episodes)


def test_task_dataset_round_trips_specs(doors_env_id: str) -> None:
    data = task_dataset([doors_env_id, "other/Env-v0"], 4, seed=10, split="train")
    specs = [EpisodeSpec.from_prompt(p) for p in data["prompt"]]
    assert [(s.env_id, s.seed) for s in specs] == [
        (doors_env_id, 10),
        ("other/Env-v0", 11),
        (doors_env_id, 12),
        ("other/Env-v0", 13),
    ]
    with pytest.raises(RolloutError, match="episode spec"):
        EpisodeSpec.from_prompt("What is 2 + 2?")


def test_budget_stops_an_episode_before_it_overflows(tokenizer, doors_env_id: str) -> None:
    rollout = MultiTurnRollout(
        tokenizer, layout="trajectory", max_turns=3, max_turn_tokens=32, max_total_tokens=40
    )
    generator = ScriptedGenerator(tokenizer, ["<action>open purple</action>"])
    (episode,) = rollout.play([EpisodeSpec(doors_env_id, seed=0)], generator)
    rollout.close()
    assert episode.out_of_tokens and len(episode.turns) == 1
    assert len(episode.completion_ids) <= 40


def test_lockstep_keeps_every_process_generating_the_same_batch(
    tokenizer, doors_env_id: str
) -> None:
    """Distributed runs: same number of generate calls and (vLLM) same batch on every process."""
    rollout = MultiTurnRollout(
        tokenizer, layout="trajectory", max_turns=3, max_turn_tokens=64, workers=1
    )
    replies = ["<action>open red</action>", "<action>open green</action>", "<action>x</action>"]
    batches: list[list[list[int]]] = []

    def generate(contexts: list[list[int]]) -> list[Generated]:
        batches.append(contexts)
        return _script(tokenizer, contexts, replies)

    specs = [EpisodeSpec(doors_env_id, seed=s) for s in (0, 1, 2)]
    episodes = rollout.play(specs, generate, sync=lambda local: 1, full_batch=True)
    rollout.close()
    assert len(batches) == 3  # another process still playing keeps this one in step
    assert all(len(b) == 3 for b in batches)
    placeholders = sum(c == [tokenizer.eos_token_id] for b in batches for c in b)
    assert placeholders == sum(3 - len(e.turns) for e in episodes) > 0


class FakeVLLM:
    """Stands in for TRL's vLLM backend: one fixed reply per prompt, log-probs only."""

    max_completion_length = 512

    def __init__(self) -> None:
        self.limits: list[int] = []

    def generate(self, prompts, images, num_generations):
        self.limits.append(self.max_completion_length)
        replies = [[5, 6, 7] for _ in prompts]
        return prompts, replies, [[[-0.5], [None], [-1.0]] for _ in prompts], None


def test_vllm_generation_gives_logprobs_and_leaves_entropies_to_the_trainer(
    tokenizer, doors_env_id: str
) -> None:
    from types import SimpleNamespace

    from aem_agent.rollout.samplers import vllm_generator

    backend = FakeVLLM()
    generate = vllm_generator(SimpleNamespace(vllm_generation=backend), max_new_tokens=16)
    (reply,) = generate([[1, 2, 3]])
    assert backend.limits == [16] and backend.max_completion_length == 512
    assert reply.ids == [5, 6, 7] and reply.entropies is None
    assert reply.logprobs[0] == -0.5 and reply.logprobs[1] != reply.logprobs[1]  # NaN kept
    rollout = MultiTurnRollout(tokenizer, max_turns=2, max_turn_tokens=16, workers=1)
    episodes = rollout.play([EpisodeSpec(doors_env_id, seed=0)], generate)
    rollout.close()
    assert "sampler_entropies" not in trajectory_batch(episodes)


@pytest.mark.parametrize("layout", ["trajectory", "step"])
def test_reply_prefix_ends_every_context_and_starts_every_parsed_reply(
    tokenizer, doors_env_id: str, layout: str
) -> None:
    """The prefix is pre-filled as context tokens, never added to the sampled ids."""
    rollout = MultiTurnRollout(
        tokenizer,
        layout=layout,
        max_turns=2,
        max_turn_tokens=64,
        workers=1,
        reply_prefix="<action>",
    )
    prefix = tokenizer("<action>", add_special_tokens=False)["input_ids"]
    # Seed 0 hides the prize behind blue: both turns are valid, neither ends the episode, and
    # each reply parses as an action only with the prefix in front.
    generator = ScriptedGenerator(tokenizer, ["open red</action>", "open green</action>"])
    (episode,) = rollout.play([EpisodeSpec(doors_env_id, seed=0)], generator)
    rollout.close()
    assert len(episode.turns) == 2
    for context, output, turn in zip(
        generator.contexts, generator.outputs, episode.turns, strict=True
    ):
        assert context[-len(prefix) :] == prefix
        assert turn.reply.ids == output  # exactly as generated
        assert turn.text.startswith("<action>open ") and turn.action_valid
    if layout == "trajectory":
        assert episode.prompt_ids[-len(prefix) :] == prefix
        seen = len(generator.contexts[1]) - len(episode.prompt_ids)
        assert generator.contexts[1] == episode.prompt_ids + episode.completion_ids[:seen]
        # The second turn's prefix closes the masked observation segment: no loss on it.
        assert episode.completion_ids[seen - len(prefix) : seen] == prefix
        assert episode.env_mask[seen - len(prefix) : seen] == [0] * len(prefix)


def test_an_episode_spec_round_trips_with_and_without_its_task() -> None:
    plain = EpisodeSpec("aem/ALFWorld-v0", 3, "train")
    assert "task_id" not in plain.to_prompt()  # training prompts are as before
    assert EpisodeSpec.from_prompt(plain.to_prompt()) == plain
    assert plain.reset_options() == {"split": "train"}
    pinned = EpisodeSpec("aem/ALFWorld-v0", 0, "valid_unseen", "some-task")
    assert EpisodeSpec.from_prompt(pinned.to_prompt()) == pinned
    assert pinned.reset_options() == {"split": "valid_unseen", "task_id": "some-task"}
    assert EpisodeSpec("aem/ALFWorld-v0", 0).reset_options() is None
