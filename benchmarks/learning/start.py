"""The start checkpoint every run of a learning experiment begins from.

Why a warm-up: a randomly initialised model almost never writes an item, the closing action tag
and its end-of-turn token, so every episode is invalid, every GRPO group has one reward and there
is nothing to learn from. A few hundred supervised steps on replies of a *uniformly random*
admissible action teach the format and nothing about which action is right: the model starts
"valid but random", the state the RL comparison is about. With ``warmup.expert_share`` a
share of the replies is the env's expert action instead (see :func:`warmup_teacher`). The
warm-up data are played through
the same rollout (and so the same prompts, history window and reply prefix) the runs train
with, built by :func:`aem_agent.train.build_trainer`.

The checkpoint is built in a scratch folder and renamed into place with ``start.json``
inside, so a half-built start is never used. Built twice by the same code it is bit-identical
(seeded; ``tests/benchmarks/test_mechanism.py``); a start committed with older code need not
rebuild identically (the warm-up's draws and the tokenizer corpus have changed since some
were made), which is why every run reads the committed ``start/`` rather than rebuilding it.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from aem_envs.reply import REPLY_FORMAT
from benchmarks.learning.config import (
    ACTION_TAGS,
    START_MARKER,
    ExperimentError,
    LearningConfig,
)
from benchmarks.learning.experiment import run_settings
from benchmarks.learning.heldout import (
    HELDOUT_KEYS,
    ensure_env,
    evaluate,
    heldout_specs,
    isolated_rng,
)

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from aem_agent.rollout import MultiTurnRollout

#: The least share of valid actions a warmed-up start must sample on training tasks: below it
#: the start has not learnt the reply format and every run would compare two broken policies.
MIN_WARMUP_VALID = 0.5


def warmup_reply(action: str) -> str:
    """The reply text of the warm-up and of the tiny tokenizer's corpus: one definition, so
    the tokenizer learns exactly the tokens the warm-up trains on.

    Why a space before the action: the tiny tokenizer's byte-level words carry their leading
    space, as the prompts spell the actions (``Actions: go to x | ...``), so reply and prompt
    share the action's tokens. The committed starts were built on exactly this text.
    """
    return REPLY_FORMAT.format(f" {action}")


def task_corpus(config: LearningConfig, *, episodes: int = 200, seed: int = 0) -> list[str]:
    """Texts the tiny tokenizer is trained on: prompts of random episodes on the train split
    and replies in the reply format, so prompt words and action words become single tokens."""
    from aem_agent.corpus import played_texts

    ensure_env(config.env_id)
    return played_texts(
        config.env_id,
        episodes=episodes,
        split=config.train_split,
        choose=lambda rng, actions, env: rng.choice(actions) if actions else None,
        reply=warmup_reply,
        env_kwargs=config.env_kwargs,
        max_turns=int(config.train.get("max_turns", 50)),
        prompt_style=config.train.get("prompt_style", "full"),
        history_window=int(config.train.get("history_window", 5)),
        seed=seed,
    )


def warmup_teacher(seed: int, expert_share: float = 0.0) -> Callable[[Any], str]:
    """A rollout :data:`aem_agent.rollout.Teacher` replying (:func:`warmup_reply`) with the
    env's ``expert_action()`` on an ``expert_share`` of turns and a uniformly random action
    from the env's own admissible list on the rest.

    Why the env's list and not the prompt's text: a prompt layout may show the actions in
    its own way (the ``compact`` style's ``Actions: a | b``) or only some of them; reading
    them back from the text taught a compact-prompt start to reply nothing at all. Why an
    expert share: at 0 the start is "valid but random" and RL must discover from bandit
    feedback alone that the reply depends on the task, which the tiny model did not in 150
    steps. On ``aem-bench/Pick-v0`` shares of 0.2-0.5 taught no copying in 200 steps either;
    a share of 1 stopped early (``mechanism-warm.yaml``: 120 steps) gives a start right about
    half the time, as an SFT-ed model is, and leaves RL the sharpening to do.
    """
    rng = random.Random(seed)

    def teach(env: Any) -> str:
        actions = env.get_wrapper_attr("admissible_actions")
        if not actions:
            raise ExperimentError(
                "the warm-up plays random admissible actions, but the env lists none at this "
                "step; use an env that lists them, or set warmup.steps: 0"
            )
        # Drawn on every turn, first: at share 0 the draws are those of the earlier random
        # warm-up, so the committed starts rebuild bit-identical.
        random_pick = rng.choice(list(actions))
        if expert_share and rng.random() < expert_share:
            return warmup_reply(env.get_wrapper_attr("expert_action")())
        return warmup_reply(random_pick)

    return teach


def warm_up(config: LearningConfig, model_dir: Path, scratch: Path) -> dict[str, Any]:
    """Supervised steps on random-admissible replies; saves the model back to ``model_dir``.

    Returns the warm-up's numbers (loss, and the sampled policy's valid and success rates on
    training tasks) for start.json.
    """
    import torch

    from aem_agent.episodes import EpisodeSpec
    from aem_agent.generators import model_generator
    from aem_agent.train import build_config, build_trainer

    warm = config.warmup
    seed = int(warm.get("seed", 0))
    settings = run_settings(config, "grpo", seed, scratch, save_strategy="no")
    train_config, _ = build_config(settings)
    trainer = build_trainer(train_config, model_dir)
    # What build_trainer made: the tokenizer it loaded, its rollout, the checkpoint's model.
    tokenizer = cast("PreTrainedTokenizerBase", trainer.processing_class)
    rollout = cast("MultiTurnRollout", trainer.rollout_func)
    model = cast("PreTrainedModel", trainer.model)
    try:
        specs = [
            EpisodeSpec(config.env_id, 1_000_000 + seed * 10_000 + i, config.train_split)
            for i in range(int(warm.get("episodes", 256)))
        ]
        teacher = warmup_teacher(seed, float(warm.get("expert_share", 0.0)))
        episodes = rollout.play(specs, teacher=teacher)
        samples = [(t.prompt_ids, t.reply.ids) for e in episodes for t in e.turns]
        torch.manual_seed(seed)
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=float(warm.get("learning_rate", 3e-3)), weight_decay=0.0
        )
        rng = random.Random(seed)
        batch_size = int(warm.get("batch_size", 32))
        pad = int(tokenizer.pad_token_id)
        model.train()
        losses = []
        for _ in range(int(warm.get("steps", 200))):
            batch = rng.sample(samples, min(batch_size, len(samples)))
            width = max(len(c) + len(r) for c, r in batch)
            ids = torch.full((len(batch), width), pad)
            labels = torch.full((len(batch), width), -100)
            attention = torch.zeros((len(batch), width), dtype=torch.long)
            for row, (context, reply) in enumerate(batch):
                seq = [*context, *reply]
                ids[row, : len(seq)] = torch.tensor(seq)
                labels[row, len(context) : len(seq)] = torch.tensor(reply)
                attention[row, : len(seq)] = 1
            loss = model(input_ids=ids, attention_mask=attention, labels=labels).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(float(loss))
        model.eval()
        probe = [EpisodeSpec(config.env_id, 2_000_000 + i, config.train_split) for i in range(64)]
        generation = trainer.generation_config
        with isolated_rng(seed):
            played = rollout.play(
                probe,
                model_generator(
                    model, tokenizer, generation, max_new_tokens=train_config.max_turn_tokens
                ),
            )
        turns = [t for e in played for t in e.turns]
        stats = {
            "warmup_samples": len(samples),
            "warmup_loss_first": losses[0] if losses else None,
            "warmup_loss_last": sum(losses[-10:]) / max(len(losses[-10:]), 1) if losses else None,
            "sampled_valid_rate": sum(t.action_valid for t in turns) / max(len(turns), 1),
            "sampled_train_success": sum(e.won for e in played) / len(played),
        }
        model.save_pretrained(model_dir)
        tokenizer.save_pretrained(model_dir)
    finally:
        rollout.close()
    return stats


def build_start(
    config: LearningConfig,
    start_dir: Path,
    *,
    log: Callable[[str], None] = print,
    score_heldout: bool = True,
) -> dict[str, Any]:
    """Build (once) the start checkpoint in ``start_dir``; return its ``start.json``.

    ``score_heldout=False`` leaves the held-out score out: a candidate start is chosen on the
    training split alone (:mod:`benchmarks.learning.startsearch`), so it is never computed.
    """
    marker = start_dir / START_MARKER
    if marker.is_file():
        return json.loads(marker.read_text(encoding="utf-8"))
    from aem_agent.tiny import build_tiny_model
    from aem_agent.train import resolve_model
    from aem_envs.core.io import atomic_write_json

    started = time.perf_counter()
    scratch = start_dir.with_name(f".{start_dir.name}.building")
    shutil.rmtree(scratch, ignore_errors=True)
    model_dir = scratch / "model"
    kind, spec = next(iter(config.model.items()))
    if kind == "tiny":
        spec = dict(spec or {})
        build_tiny_model(
            model_dir,
            corpus=task_corpus(config),
            corpus_repeats=int(spec.pop("corpus_repeats", 1)),
            added_tokens=ACTION_TAGS,
            **spec,
        )
    else:
        shutil.copytree(resolve_model(str(spec)), model_dir)
    log(f"[start] model in {model_dir}")
    info: dict[str, Any] = {"model": config.model}
    if int(config.warmup.get("steps", 0)) > 0:
        info["warmup"] = warm_up(config, model_dir, scratch / "warmup")
        log(f"[start] warm-up: {info['warmup']}")
        valid = info["warmup"]["sampled_valid_rate"]
        if valid < MIN_WARMUP_VALID:
            raise ExperimentError(
                f"the warm-up left a start that writes a valid action on {valid:.0%} of its "
                f"turns (at least {MIN_WARMUP_VALID:.0%} needed): it has not learnt the reply "
                "format; raise warmup.steps or warmup.learning_rate"
            )
    if score_heldout:
        info["heldout"], info["parameters"] = _start_heldout(
            config, model_dir, scratch / "probe", log=log
        )
        info["heldout_success"] = info["heldout"][HELDOUT_KEYS[0]]
    info["seconds"] = round(time.perf_counter() - started, 1)
    shutil.rmtree(scratch / "warmup", ignore_errors=True)
    shutil.rmtree(scratch / "probe", ignore_errors=True)
    for item in model_dir.iterdir():  # flatten: start/ is the checkpoint itself
        item.rename(scratch / item.name)
    model_dir.rmdir()
    atomic_write_json(scratch / START_MARKER, info)
    if start_dir.exists():  # a start without its marker is a leftover: replace it
        shutil.rmtree(start_dir)
    scratch.rename(start_dir)
    log(f"[start] ready: held-out success {info.get('heldout_success', 'not scored')}")
    return info


def _start_heldout(
    config: LearningConfig, model_dir: Path, scratch: Path, *, log: Callable[[str], None]
) -> tuple[dict[str, float], int]:
    """Held-out rates of the start checkpoint, scored exactly as the runs score it, and the
    model's parameter count. A pass of a real model is minutes on CPU: it says how far it is."""
    from aem_agent.train import build_config, build_trainer

    train_config, _ = build_config(run_settings(config, "grpo", 0, scratch, save_strategy="no"))
    trainer = build_trainer(train_config, model_dir)
    cast("MultiTurnRollout", trainer.rollout_func).progress = lambda line: log(f"[start] {line}")
    log(f"[start] scoring {config.eval_episodes} held-out episodes")
    started = time.perf_counter()
    try:
        stats = evaluate(
            trainer,
            heldout_specs(config),
            temperature=config.eval_temperature,
            seed=config.eval_seed,
            method=config.eval_method,
        )
    finally:
        cast("MultiTurnRollout", trainer.rollout_func).close()  # the one the trainer built
    stats["heldout/seconds"] = time.perf_counter() - started
    return stats, sum(p.numel() for p in trainer.model.parameters())
