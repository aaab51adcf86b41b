"""``aem sft``: expert samples from the rollout's own contexts, a real SFT run, clear errors."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from aem_agent.grpo.config import AgentModelConfig
from aem_agent.policies import load_policy
from aem_agent.policies.base import PolicyInput
from aem_agent.prompts import read_prompt_layout
from aem_agent.rollout.groups import MultiTurnRollout
from aem_agent.sft.demonstrations import oversample_rare
from aem_agent.sft.finetune import build_sft_trainer, expert_episodes, run_sft, sft_samples
from aem_agent.sft.settings import SFTError, SFTSettings, check_settings, sft_model
from aem_cli.main import main

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def settings(tmp_path: Path, env_id: str, model: Path, **overrides) -> SFTSettings:
    values = dict(
        env_ids=[env_id],
        output_dir=str(tmp_path / "sft"),
        episodes=12,
        max_turns=3,
        max_turn_tokens=16,
        reply_prefix="<action>",
        per_device_train_batch_size=8,
        gradient_accumulation_steps=1,
        save_steps=1000,
        logging_steps=1,
        torch_threads=1,
    )
    values.update(overrides)
    return SFTSettings(**values)


def model_of(model: Path, **overrides) -> AgentModelConfig:
    return sft_model(model_name_or_path=str(model), **overrides)


@pytest.mark.parametrize("layout", ["step", "trajectory"])
def test_samples_are_the_rollout_contexts_with_reply_only_loss(
    tiny_model_dir, tmp_path, doors_env_id, layout
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    config = settings(tmp_path, doors_env_id, tiny_model_dir, layout=layout)
    rollout = MultiTurnRollout(
        tokenizer, layout=layout, max_turns=3, max_turn_tokens=16, reply_prefix="<action>"
    )
    try:
        episodes = expert_episodes(rollout, config)
    finally:
        rollout.close()
    assert all(e.won for e in episodes)  # the expert opens the prize door
    rows = sft_samples(episodes, layout)
    prefix = tokenizer("<action>", add_special_tokens=False)["input_ids"]
    reply = [*tokenizer("open ", add_special_tokens=False)["input_ids"]]
    for row, episode in zip(rows, episodes, strict=False):
        ids, mask = row["input_ids"], row["completion_mask"]
        assert len(ids) == len(mask) and sum(mask) > 0
        first = mask.index(1)
        assert ids[first - len(prefix) : first] == prefix  # the context ends with the prefix
        assert ids[first : first + len(reply)] == reply  # the loss starts at the reply body
        if layout == "step":
            turn = episode.turns[0]
            assert ids[:first] == turn.prompt_ids  # exactly what the model was given
    if layout == "step":
        assert len(rows) == sum(len(e.turns) for e in episodes)
    else:
        assert len(rows) == len(episodes)


def test_explore_plays_off_path_actions_but_labels_every_turn_with_the_expert(
    tiny_model_dir, tmp_path, doors_env_id
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    config = settings(tmp_path, doors_env_id, tiny_model_dir, explore=0.6, max_turns=4)
    rollout = MultiTurnRollout(
        tokenizer, layout="step", max_turns=4, max_turn_tokens=16, reply_prefix="<action>"
    )
    try:
        episodes = expert_episodes(rollout, config)
    finally:
        rollout.close()
    turns = [t for e in episodes for t in e.turns]
    labels = ["<action>" + tokenizer.decode(t.reply.ids, skip_special_tokens=True) for t in turns]
    played = [t.text for t in turns]
    off_path = [i for i, (a, b) in enumerate(zip(played, labels, strict=True)) if a != b]
    assert off_path and len(off_path) < len(turns)  # some turns explored, not all
    for i in off_path:
        assert turns[i].action_valid and turns[i].reward <= 0  # a valid wrong door
    # The label of an off-path turn is the prize door (the expert), the same for the episode.
    for episode in episodes:
        doors = {tokenizer.decode(t.reply.ids, skip_special_tokens=True) for t in episode.turns}
        assert len(doors) == 1
    assert sum(e.won for e in episodes) > len(episodes) / 2  # the expert recovers
    with pytest.raises(SFTError, match="explore needs layout='step'"):
        check_settings(
            settings(tmp_path, doors_env_id, tiny_model_dir, explore=0.3, layout="trajectory")
        )
    with pytest.raises(SFTError, match=r"explore=1.0"):
        check_settings(settings(tmp_path, doors_env_id, tiny_model_dir, explore=1.0))


def valid_share(model_dir: Path, env_id: str) -> float:
    import gymnasium as gym

    policy = load_policy(f"hf:{model_dir}", temperature=0.0)
    env = gym.make(env_id)
    valid = []
    for seed in range(6):
        obs, info = env.reset(seed=seed)
        inp = PolicyInput(env_id, info["instruction"], obs, [], info["admissible_actions"])
        [out] = policy.act([inp])
        valid.append(
            out.reply.removeprefix("<action>").split("</action>")[0] in inp.admissible_actions
        )
    env.close()
    return sum(valid) / len(valid)


def test_sft_teaches_the_action_format_and_writes_a_loadable_model(
    tiny_model_dir, tmp_path, doors_env_id
) -> None:
    assert valid_share(tiny_model_dir, doors_env_id) == 0.0  # random weights: never an action
    config = settings(
        tmp_path, doors_env_id, tiny_model_dir, learning_rate=1e-2, num_train_epochs=30
    )
    result = run_sft(config, model_of(tiny_model_dir, use_peft=False))
    out = Path(config.output_dir)
    assert result.won == result.episodes == 12 and result.adapter_dir is None
    with (out / "metrics.csv").open() as handle:
        losses = [float(r["loss"]) for r in csv.DictReader(handle) if r.get("loss")]
    assert losses[-1] < 0.5 * losses[0]
    assert read_prompt_layout(out) == {
        "history_window": 2,
        "reply_prefix": "<action>",
        "max_turn_tokens": 16,
        "prompt_style": "full",
    }
    assert valid_share(out, doors_env_id) >= 0.8  # played with the prompts it was trained on


def test_lora_sft_writes_the_adapter_and_a_merged_model(tiny_model_dir, tmp_path, doors_env_id):
    config = settings(tmp_path, doors_env_id, tiny_model_dir, max_steps=2, episodes=4)
    result = run_sft(config, model_of(tiny_model_dir))
    assert (result.adapter_dir / "adapter_config.json").is_file()
    assert (result.output_dir / "config.json").is_file()
    assert load_policy(f"hf:{result.output_dir}").reply_prefix == "<action>"


def test_bad_runs_stop_with_one_line(tiny_model_dir, tmp_path, doors_env_id, capsys) -> None:
    with pytest.raises(SFTError, match="train"):
        check_settings(settings(tmp_path, doors_env_id, tiny_model_dir, split="valid_unseen"))
    out = tmp_path / "sft"
    out.mkdir()
    (out / "metrics.csv").write_text("step\n")
    with pytest.raises(Exception, match="--overwrite"):
        check_settings(settings(tmp_path, doors_env_id, tiny_model_dir))
    code = main(["sft", doors_env_id, "--output-dir", str(out), "--split", "test"])
    assert code == 2 and "train" in capsys.readouterr().err


def test_rare_actions_are_repeated_up_to_the_cap() -> None:
    samples = ["go1", "go2", "go3", "go4", "take", "open1", "open2"]
    verbs = ["go", "go", "go", "go", "take", "open", "open"]
    assert oversample_rare(samples, verbs, 3) == [
        "go1", "go2", "go3", "go4", "take", "take", "take",
        "open1", "open1", "open2", "open2",
    ]  # fmt: skip
    assert oversample_rare(samples, verbs, 1) == samples


def test_sft_goes_on_training_an_earlier_adapter(tiny_model_dir, tmp_path, doors_env_id) -> None:
    from safetensors.torch import load_file

    model = model_of(tiny_model_dir)
    first = run_sft(settings(tmp_path / "a", doors_env_id, tiny_model_dir, max_steps=2), model)
    again = settings(
        tmp_path / "b",
        doors_env_id,
        tiny_model_dir,
        max_steps=2,
        init_adapter=str(first.adapter_dir),
        oversample=3,
    )
    second = run_sft(again, model)
    before = load_file(first.adapter_dir / "adapter_model.safetensors")
    after = load_file(second.adapter_dir / "adapter_model.safetensors")
    assert before.keys() == after.keys()
    for name, weight in before.items():
        # continued from the first adapter: close to it, not a fresh random initialisation
        assert (after[name] - weight).abs().max() < 0.1 * weight.abs().max() + 1e-3, name
    assert any(not after[n].equal(w) for n, w in before.items())  # and trained further
    with pytest.raises(SFTError, match="layout='step'"):
        check_settings(
            settings(
                tmp_path / "c", doors_env_id, tiny_model_dir, oversample=2, layout="trajectory"
            )
        )
    with pytest.raises(SFTError, match="init_adapter"):
        check_settings(settings(tmp_path / "c", doors_env_id, tiny_model_dir, init_adapter="x"))


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.browser
def test_sft_output_plays_the_smoke_suite_through_aem_bench(tiny_model_dir, tmp_path) -> None:
    """The README's warm start as a user runs it: ``aem sft`` on ALFWorld's expert, then
    ``aem bench --suite smoke --policy hf:<output>`` on every env of the smoke suite."""
    sft_out, bench_out = tmp_path / "sft", tmp_path / "bench"
    sft = ["sft", "aem/ALFWorld-v0", "--model", str(tiny_model_dir), "--output-dir", str(sft_out)]
    flags = ["--episodes", "1", "--max-turns", "12", "--epochs", "1", "--torch-threads", "1"]
    assert main([*sft, *flags, "--reply-prefix", "<action>", "--max-turn-tokens", "8"]) == 0
    bench = ["bench", "--suite", "smoke", "--policy", f"hf:{sft_out}", "--limit", "1"]
    assert main([*bench, "--out", str(bench_out), "--no-progress"]) == 0
    results = json.loads((bench_out / "results.json").read_text())
    played = {row["env_id"]: row["episodes"] for row in results["summary"]}
    assert played == {
        "aem/ALFWorld-v0": 1,
        "aem/WebShop-v0": 1,
        "aem/WebShopBrowser-v0": 1,
        "aem/SWE-v0": 1,
    }
    assert results["policies"] == [{"name": f"hf:{sft_out}", "model": True}]
    assert results["errors"] == [] and results["finished_episodes"] == 4


@pytest.mark.parametrize("prompt_loss", [False, True])
def test_prompt_loss_scores_the_prompt_tokens_too(tiny_model_dir, tmp_path, prompt_loss) -> None:
    """``aem sft --prompt-loss`` (``completion_only_loss=False``) labels every token."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    rows = [{"input_ids": [5, 6, 7, 8, 9], "completion_mask": [0, 0, 0, 1, 1]}]
    config = settings(tmp_path, "unused", tiny_model_dir, completion_only_loss=not prompt_loss)
    model = model_of(tiny_model_dir, use_peft=False)
    trainer = build_sft_trainer(config, model, tiny_model_dir, tokenizer, rows)
    labels = trainer.train_dataset[0]["labels"]
    assert labels == ([5, 6, 7, 8, 9] if prompt_loss else [-100, -100, -100, 8, 9])
