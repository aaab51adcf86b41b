"""The start checkpoint every run of a learning experiment begins from.

Why a warm-up: a randomly initialised model almost never writes an item, the closing action tag
and its end-of-turn token, so every episode is invalid, every GRPO group has one reward and there
is nothing to learn from. A few hundred supervised steps on replies of a *uniformly random*
admissible action teach the format and nothing about which action is right: the model starts
"valid but random", the state the RL comparison is about. With ``warmup.expert_share`` a
share of the replies is the env's expert action instead (see :func:`warmup_teacher`). The
warm-up is ``aem sft``'s path (:func:`warm_up`): the teacher's episodes played through the
rollout the runs train with, its samples, TRL's ``SFTTrainer``.

The checkpoint is built in a scratch folder and renamed into place with ``start.json``
inside, so a half-built start is never used. Built twice by the same code it is bit-identical
(seeded; ``tests/benchmarks/test_mechanism.py``); a start committed with older code does not
rebuild identically (the warm-up was a hand-written loop drawing its own batches, and the
tokenizer corpus has changed since some were made), which is why every run reads the
committed ``start/`` rather than rebuilding it.
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
    HELDOUT_SECONDS,
    ensure_env,
    evaluate,
    heldout_specs,
    isolated_rng,
)

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from aem_agent.rollout.groups import MultiTurnRollout

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
    from aem_agent.models.corpus import played_texts

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
    """A rollout :data:`aem_agent.rollout.recording.Teacher` replying (:func:`warmup_reply`)
    with the env's ``expert_action()`` on an ``expert_share`` of turns and a uniformly random action
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
    """Supervised steps on the warm-up teacher's replies, by ``aem sft``'s path (its samples,
    TRL's ``SFTTrainer`` scoring the reply tokens only); saves the model back to ``model_dir``.

    The teacher's episodes are played through the rollout the runs train with (and so the
    same prompts, history window and reply prefix). ``warmup.steps`` optimizer steps of
    plain AdamW at a constant ``warmup.learning_rate``, without weight decay or gradient
    clipping, in the runs' precision, on batches of ``warmup.batch_size`` from TRL's shuffled
    passes over the samples. Returns the warm-up's numbers (sample count, first and last
    losses) for ``start.json``.
    """
    from transformers import AutoTokenizer, PrinterCallback

    from aem_agent.grpo.run import build_config
    from aem_agent.rollout.groups import MultiTurnRollout
    from aem_agent.rollout.records import EpisodeSpec
    from aem_agent.sft.finetune import build_sft_trainer, sft_samples
    from aem_agent.sft.settings import SFTSettings, sft_model

    warm = config.warmup
    run = build_config(run_settings(config, "grpo", warm.seed, scratch, save_strategy="no"))
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    rollout = MultiTurnRollout.from_config(run.config, tokenizer)
    specs = [
        EpisodeSpec(config.env_id, 1_000_000 + warm.seed * 10_000 + i, config.train_split)
        for i in range(warm.episodes)
    ]
    try:
        episodes = rollout.play(specs, teacher=warmup_teacher(warm.seed, warm.expert_share))
    finally:
        rollout.close()
    samples = sft_samples(episodes, "step")
    settings = SFTSettings(
        output_dir=str(scratch / "sft"),
        max_steps=warm.steps,
        per_device_train_batch_size=warm.batch_size,
        gradient_accumulation_steps=1,
        learning_rate=warm.learning_rate,
        lr_scheduler_type="constant",
        warmup_steps=0,
        max_grad_norm=0.0,
        seed=warm.seed,
        save_strategy="no",
        logging_steps=1,
        bf16=run.config.bf16,
        use_cpu=run.config.use_cpu,
    )
    model = sft_model(model_name_or_path=str(model_dir), use_peft=False)
    trainer = build_sft_trainer(settings, model, model_dir, tokenizer, samples)
    trainer.remove_callback(PrinterCallback)  # a log line per step; the losses go to start.json
    trainer.train()
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    trainer.model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    return {
        "warmup_samples": len(samples),
        "warmup_loss_first": losses[0] if losses else None,
        "warmup_loss_last": sum(losses[-10:]) / max(len(losses[-10:]), 1) if losses else None,
    }


def warmup_probe(config: LearningConfig, trainer: Any) -> dict[str, float]:
    """The warmed-up start's sampled valid-action and success rates on 64 training tasks."""
    from aem_agent.rollout.records import EpisodeSpec
    from aem_agent.rollout.samplers import model_generator

    rollout = cast("MultiTurnRollout", trainer.rollout_func)
    probe = [EpisodeSpec(config.env_id, 2_000_000 + i, config.train_split) for i in range(64)]
    generate = model_generator(
        cast("PreTrainedModel", trainer.model),
        cast("PreTrainedTokenizerBase", trainer.processing_class),
        trainer.generation_config,
        max_new_tokens=trainer.args.max_turn_tokens,
    )
    with isolated_rng(config.warmup.seed):
        played = rollout.play(probe, generate)
    turns = [t for e in played for t in e.turns]
    return {
        "sampled_valid_rate": sum(t.action_valid for t in turns) / max(len(turns), 1),
        "sampled_train_success": sum(e.won for e in played) / len(played),
    }


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
        if not (start_dir / "config.json").is_file():  # a clone of a start not committed
            raise ExperimentError(
                f"{start_dir} holds {START_MARKER} but not the model it describes (its weights "
                f"are not committed); rebuild the start: move {marker} away and run again"
            )
        return json.loads(marker.read_text(encoding="utf-8"))
    from aem_agent.grpo.run import resolve_model
    from aem_agent.models.tiny import build_tiny_model
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
        # the model, not the training state its own run left beside it, nor TRL's generated
        # model card (it names no base model here)
        source = resolve_model(str(spec))
        leave = shutil.ignore_patterns("checkpoint-*", "README.md")
        shutil.copytree(source, model_dir, ignore=leave)
    log(f"[start] model in {model_dir}")
    info: dict[str, Any] = {"model": config.model}
    if config.warmup.steps > 0:
        info["warmup"] = warm_up(config, model_dir, scratch / "warmup")
    trainer = _start_trainer(config, model_dir, scratch / "probe")
    try:
        if config.warmup.steps > 0:
            info["warmup"].update(warmup_probe(config, trainer))
            log(f"[start] warm-up: {info['warmup']}")
            valid = info["warmup"]["sampled_valid_rate"]
            if valid < MIN_WARMUP_VALID:
                raise ExperimentError(
                    f"the warm-up left a start that writes a valid action on {valid:.0%} of its "
                    f"turns (at least {MIN_WARMUP_VALID:.0%} needed): it has not learnt the "
                    "reply format; raise warmup.steps or warmup.learning_rate"
                )
        if score_heldout:
            info["heldout"] = _start_heldout(config, trainer, log=log)
            info["heldout_success"] = info["heldout"][HELDOUT_KEYS[0]]
    finally:
        cast("MultiTurnRollout", trainer.rollout_func).close()  # the one the trainer built
    info["parameters"] = sum(p.numel() for p in trainer.model.parameters())
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


def _start_trainer(config: LearningConfig, model_dir: Path, scratch: Path) -> Any:
    """The trainer a run would build on the start (its rollout, tokenizer and sampling): what
    the start is probed and scored with."""
    from aem_agent.grpo.run import build_config, build_trainer

    run = build_config(run_settings(config, "grpo", 0, scratch, save_strategy="no"))
    return build_trainer(run.config, model_dir)


def _start_heldout(
    config: LearningConfig, trainer: Any, *, log: Callable[[str], None]
) -> dict[str, float]:
    """Held-out rates of the start checkpoint, scored exactly as the runs score it. A pass of
    a real model is minutes on CPU: it says how far it is."""
    cast("MultiTurnRollout", trainer.rollout_func).progress = lambda line: log(f"[start] {line}")
    log(f"[start] scoring {config.eval_episodes} held-out episodes")
    started = time.perf_counter()
    stats = evaluate(
        trainer,
        heldout_specs(config),
        temperature=config.eval_temperature,
        seed=config.eval_seed,
        method=config.eval_method,
    )
    stats[HELDOUT_SECONDS] = time.perf_counter() - started
    return stats
