"""Expert warm start (``aem sft``): supervised fine-tuning on the envs' own expert trajectories.

Why: a 135M model writes a valid action in a fraction of turns and never wins, so GRPO has no
positive advantage to learn from. Every aem env has an expert (``expert_action()``); imitating
it first gives RL a policy that sometimes wins.

Why the expert is played *through* :class:`aem_agent.rollout.MultiTurnRollout`: a model is
only warm-started for the rollouts if it is trained on exactly the contexts they will give it
(system prompt, history window, observation clipping, chat template, ``reply_prefix``).
:meth:`MultiTurnRollout.play` with a teacher records each turn's context as the very token
ids the model would see, and the teacher's reply as the ids it should produce (the reply
prefix is part of the context, so the reply carries only the rest, then EOS). Nothing here
re-renders a prompt.

Samples (``layout``):

* ``step`` — one ``(context, reply)`` sample per turn, the rollout's step layout;
* ``trajectory`` — one sequence per episode: first prompt, replies and observation
  segments, with the observation tokens masked (the rollout's ``env_mask``).

Loss is on reply tokens only: samples are pre-tokenised ``input_ids`` with a
``completion_mask`` and TRL's ``completion_only_loss``, so TRL's ``labels`` are -100 on every
context and observation token (``prompt_loss`` scores them too). What a run leaves in
``output_dir``: the merged model as an ordinary Hugging Face checkpoint (``aem train --model
DIR``, ``aem bench --policy hf:DIR``), with LoRA the adapter alone in ``adapter/`` (a few MB),
``aem-prompt.json`` (the prompt layout the model was trained on, which
:class:`aem_agent.policies.hf.HFPolicy` reads), ``aem-sft.json`` (settings and data
statistics), ``metrics.csv`` and ``checkpoint-*`` (``resume=True`` continues from the newest).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from aem_agent.batches import LAYOUTS, Layout
from aem_agent.demonstrations import expert_reply, expert_teacher, explorer, oversample_rare, verb
from aem_agent.metrics import MetricsWriter
from aem_agent.prompts import PROMPT_FILE, PromptSettings, write_prompt_layout
from aem_agent.train import (
    ADAPTER_DIR,
    METRICS_FILE,
    check_output_dir,
    last_checkpoint,
    resolve_model,
    save_policy,
)
from aem_envs.core.base import TRAIN_SPLIT
from aem_envs.core.errors import AEMError

SETTINGS_FILE = "aem-sft.json"
#: What ``aem sft`` writes into an output directory; ``overwrite`` replaces exactly these.
OUTPUTS = (PROMPT_FILE, SETTINGS_FILE, ADAPTER_DIR, METRICS_FILE)
#: LoRA on every linear layer of the blocks (attention and MLP), not the LM head.
LORA_TARGETS = "all-linear"


class SFTError(AEMError, ValueError):
    """An SFT run cannot start as configured (split, output directory, expert data)."""


@dataclass(kw_only=True)
class SFTSettings(PromptSettings):
    """One ``aem sft`` run: the prompt settings of ``aem train`` (:class:`PromptSettings`,
    one definition for both) plus the expert data and the supervised run's own."""

    env_ids: Sequence[str]
    output_dir: str | os.PathLike[str]
    model: str = "smollm2"
    episodes: int = 100
    epochs: float = 1.0
    learning_rate: float = 2e-4
    layout: Layout = "step"
    system_prompt: str | None = None
    #: ``None``: replies are the action block only; else a fixed ``<think>`` text first.
    think: str | None = None
    #: Share of turns on which a random admissible action is played instead of the expert's
    #: (the turn is still labelled with the expert's action): see :func:`explorer`.
    explore: float = 0.0
    max_total_tokens: int = 4096
    split: str = TRAIN_SPLIT
    seed: int = 0
    full: bool = False
    #: Score the prompt tokens too, not only the replies (TRL's ``completion_only_loss`` off):
    #: a model trained from scratch learns to read the env's text (and to copy a place or an
    #: item from it) from every token of a sample instead of the dozen of its reply.
    prompt_loss: bool = False
    #: Repeat each step sample whose action verb (``take``, ``open``...) is rarer than the most
    #: common one up to this many times (1: off): see :func:`oversample_rare`.
    oversample: int = 1
    #: A LoRA adapter directory to go on training (e.g. an earlier run's ``adapter/``) instead
    #: of a new adapter; the result is still one adapter over ``model``.
    init_adapter: str | None = None
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    #: Samples per forward; the logits dominate memory (8 rows of ~870 tokens peaked at 23.6 GB
    #: on CPU, 2 × 4 accumulated at 7.5 GB: the same batch and loss).
    batch_size: int = 2
    gradient_accumulation_steps: int = 4
    max_steps: int = -1
    logging_steps: int = 10
    save_steps: int = 100
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    torch_threads: int | None = None
    overwrite: bool = False
    resume: bool = False


@dataclass(frozen=True)
class SFTResult:
    """Where a finished run put its outputs, with what it trained on."""

    output_dir: Path
    adapter_dir: Path | None
    episodes: int
    won: int
    samples: int
    reply_tokens: int
    global_step: int
    train_loss: float | None


def check_settings(settings: SFTSettings) -> None:
    """Fail in one line before anything is loaded: split, layout, sizes, output directory."""
    if settings.split != TRAIN_SPLIT:
        raise SFTError(
            f"split={settings.split!r}: aem sft trains on the {TRAIN_SPLIT!r} split only "
            "(valid/test splits are for measuring the trained model)"
        )
    if settings.layout not in LAYOUTS:
        raise SFTError(f"layout={settings.layout!r}; choose one of {list(LAYOUTS)}")
    if not settings.env_ids:
        raise SFTError("no env id given; name at least one, e.g. aem/ALFWorld-v0")
    if settings.episodes < 1 or settings.epochs <= 0 or settings.history_window < 0:
        raise SFTError(
            f"need episodes >= 1, epochs > 0, history_window >= 0; got {settings.episodes}, "
            f"{settings.epochs}, {settings.history_window}"
        )
    adapter = settings.init_adapter
    if adapter is not None and (
        settings.full or not (Path(adapter) / "adapter_config.json").exists()
    ):
        raise SFTError(
            f"init_adapter={settings.init_adapter!r} must be a LoRA adapter directory (with "
            "adapter_config.json, e.g. an earlier run's adapter/) and needs LoRA, not --full"
        )
    if settings.oversample < 1 or (settings.oversample > 1 and settings.layout != "step"):
        raise SFTError(
            f"oversample={settings.oversample}: give 1 (off) or more; it repeats step samples, "
            "so it needs layout='step'"
        )
    if not 0.0 <= settings.explore < 1.0:
        raise SFTError(f"explore={settings.explore}: give a share of turns in [0, 1)")
    if settings.explore and settings.layout != "step":
        raise SFTError("explore needs layout='step' (each turn is its own labelled sample)")
    prefix = settings.reply_prefix or ""
    if settings.think is not None and not expert_reply("a", settings.think).startswith(prefix):
        raise SFTError(
            f"reply_prefix {settings.reply_prefix!r} does not start a reply with a think "
            "block; drop --think or the prefix"
        )
    out = Path(settings.output_dir)
    if out.exists() and not out.is_dir():
        raise SFTError(f"output dir {out} is a file; give a directory")
    if settings.resume:
        if last_checkpoint(out) is None:
            raise SFTError(f"--resume: no checkpoint-* directory in {out}; start without it")
    elif not settings.overwrite:
        check_output_dir(out, overwrite=False, outputs=OUTPUTS)


def expert_episodes(rollout: Any, settings: SFTSettings, *, chunk: int = 16) -> list[Any]:
    """Play ``settings.episodes`` expert episodes on the train split through ``rollout``.

    Episode ``k`` is env ``env_ids[k % n]`` reset with seed ``seed + k`` (as
    :func:`aem_agent.episodes.task_dataset` numbers tasks), so a rerun sees the same data.
    """
    from aem_agent.episodes import EpisodeSpec

    specs = [
        EpisodeSpec(settings.env_ids[k % len(settings.env_ids)], settings.seed + k, TRAIN_SPLIT)
        for k in range(settings.episodes)
    ]
    teacher = expert_teacher(settings.think)
    behaviour = (
        explorer(settings.explore, settings.seed, settings.think) if settings.explore else None
    )
    episodes = []
    for start in range(0, len(specs), chunk):
        chunk_specs = specs[start : start + chunk]
        episodes.extend(rollout.play(chunk_specs, teacher=teacher, behaviour=behaviour))
    return episodes


def sft_samples(episodes: Sequence[Any], layout: str) -> list[dict[str, list[int]]]:
    """Pre-tokenised SFT rows: ``input_ids`` and ``completion_mask`` (1 = reply token).

    ``step``: each turn's context exactly as the model saw it, then its reply. ``trajectory``:
    the episode's first prompt, then its completion with observation segments masked.
    """
    if layout not in LAYOUTS:
        raise SFTError(f"layout={layout!r}; choose one of {list(LAYOUTS)}")
    rows = []
    for episode in episodes:
        if layout == "step":
            for turn in episode.turns:
                rows.append(
                    {
                        "input_ids": [*turn.prompt_ids, *turn.reply.ids],
                        "completion_mask": [0] * len(turn.prompt_ids) + [1] * len(turn.reply.ids),
                    }
                )
        elif episode.completion_ids:
            rows.append(
                {
                    "input_ids": [*episode.prompt_ids, *episode.completion_ids],
                    "completion_mask": [0] * len(episode.prompt_ids) + list(episode.env_mask),
                }
            )
    return rows


def prompt_layout(settings: SFTSettings) -> dict[str, Any]:
    """What ``aem-prompt.json`` holds: the prompt settings a policy must reuse."""
    return {
        "history_window": settings.history_window,
        "prompt_style": settings.prompt_style,
        "reply_prefix": settings.reply_prefix or "",
        "system_prompt": settings.system_prompt,
        "layout": settings.layout,
        "max_turn_tokens": settings.max_turn_tokens,
        "think": settings.think,
    }


def run_sft(settings: SFTSettings) -> SFTResult:
    """Play the expert, build the samples, train with TRL's ``SFTTrainer``, save the model."""
    check_settings(settings)
    from aem_envs.registration import resolve_env_id

    for env_id in settings.env_ids:
        resolve_env_id(env_id)  # one clear line for an unknown id, before loading a model
    if settings.torch_threads:
        import torch

        torch.set_num_threads(int(settings.torch_threads))
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

    from transformers import AutoTokenizer

    from aem_agent.rollout import MultiTurnRollout

    out = Path(settings.output_dir)
    model_dir = resolve_model(settings.model)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    rollout = MultiTurnRollout(
        tokenizer,
        layout=settings.layout,
        max_turns=settings.max_turns,
        max_turn_tokens=settings.max_turn_tokens,
        max_total_tokens=settings.max_total_tokens,
        history_window=settings.history_window,
        env_kwargs=settings.env_kwargs,
        workers=1,
        system_prompt=settings.system_prompt,
        reply_prefix=settings.reply_prefix,
        prompt_style=settings.prompt_style,
    )
    try:
        episodes = expert_episodes(rollout, settings)
    finally:
        rollout.close()
    won = [e for e in episodes if e.won]
    if not won:
        raise SFTError(
            f"the expert won none of {len(episodes)} episodes (max_turns={settings.max_turns}); "
            "nothing to imitate"
        )
    samples = sft_samples(won, settings.layout)
    if settings.oversample > 1:
        replies = [t.reply.ids for e in won for t in e.turns]
        verbs = [verb(str(tokenizer.decode(ids, skip_special_tokens=True))) for ids in replies]
        samples = oversample_rare(samples, verbs, settings.oversample)
    reply_tokens = sum(sum(row["completion_mask"]) for row in samples)

    if settings.overwrite and not settings.resume:
        check_output_dir(out, overwrite=True, outputs=OUTPUTS)
    out.mkdir(parents=True, exist_ok=True)
    trainer = build_sft_trainer(settings, model_dir, tokenizer, samples)
    from aem_envs.core.io import atomic_write_json

    checkpoint = last_checkpoint(out) if settings.resume else None
    metrics = MetricsWriter(
        out / "metrics.csv",
        resume_step=int(checkpoint.name.split("-")[1]) if checkpoint else None,
    )
    trainer.add_callback(metrics.callback())
    stats = {
        "model": str(model_dir),
        "episodes": len(episodes),
        "expert_won": len(won),
        "samples": len(samples),
        "reply_tokens": reply_tokens,
        "max_sample_tokens": max(len(r["input_ids"]) for r in samples),
    }
    atomic_write_json(out / SETTINGS_FILE, {**_jsonable(asdict(settings)), **stats})
    output = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    adapter_dir = save_policy(trainer.model, tokenizer, out)
    write_prompt_layout(out, prompt_layout(settings))
    return SFTResult(
        out,
        adapter_dir,
        len(episodes),
        len(won),
        len(samples),
        reply_tokens,
        trainer.state.global_step,
        getattr(output, "training_loss", None),
    )


def build_sft_trainer(
    settings: SFTSettings, model_dir: Path, tokenizer: Any, samples: list[dict[str, list[int]]]
) -> Any:
    """TRL's ``SFTTrainer`` (scoring reply positions only) on the pre-tokenised samples; LoRA
    unless ``settings.full``."""
    import torch
    from datasets import Dataset
    from trl import SFTConfig

    from aem_agent.head import ReplyScoringSFTTrainer
    from aem_agent.models import cpu_bf16_supported

    cpu = not torch.cuda.is_available()
    config = SFTConfig(
        output_dir=str(settings.output_dir),
        num_train_epochs=settings.epochs,
        max_steps=settings.max_steps,
        learning_rate=settings.learning_rate,
        per_device_train_batch_size=settings.batch_size,
        gradient_accumulation_steps=settings.gradient_accumulation_steps,
        completion_only_loss=not settings.prompt_loss,
        max_length=None,  # never cut a sample: its reply is at the end
        shuffle_dataset=True,
        seed=settings.seed,
        logging_steps=settings.logging_steps,
        save_steps=settings.save_steps,
        save_total_limit=2,
        report_to="none",
        use_cpu=cpu,
        bf16=not cpu or cpu_bf16_supported(),
        activation_checkpointing=False,  # small models: recomputing costs more than it saves
        lr_scheduler_type="cosine",
        warmup_steps=0.05,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    peft_config = None
    model: Any = str(model_dir)  # a path, or the PEFT model of an adapter trained on
    if settings.init_adapter:
        from peft import PeftModel
        from transformers import AutoModelForCausalLM

        base = AutoModelForCausalLM.from_pretrained(model_dir)
        model = PeftModel.from_pretrained(base, settings.init_adapter, is_trainable=True)
    elif not settings.full:
        from aem_envs.core.errors import require

        peft = require("agent", "peft", feature="LoRA fine-tuning (aem sft without --full)")
        peft_config = peft.LoraConfig(
            r=settings.lora_r,
            lora_alpha=settings.lora_alpha,
            lora_dropout=settings.lora_dropout,
            target_modules=LORA_TARGETS,
            task_type="CAUSAL_LM",
        )
    return ReplyScoringSFTTrainer(
        model=model,
        args=config,
        train_dataset=Dataset.from_list(samples),
        processing_class=tokenizer,
        peft_config=peft_config,
    )


def _jsonable(data: dict[str, Any]) -> dict[str, Any]:
    import json

    return json.loads(json.dumps(data, default=str))
