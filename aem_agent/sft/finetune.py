"""Expert warm start (``aem sft``): supervised fine-tuning on the envs' own expert trajectories.

Why: a 135M model writes a valid action in a fraction of turns and never wins, so GRPO has no
positive advantage to learn from. Every aem env has an expert (``expert_action()``); imitating
it first gives RL a policy that sometimes wins.

Why the expert is played *through* :class:`aem_agent.rollout.groups.MultiTurnRollout`: a model is
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
context and observation token (``completion_only_loss=False``, ``aem sft --prompt-loss``, scores
them too). What a run leaves in ``output_dir``: the merged model as an ordinary Hugging Face
checkpoint (``aem train --model DIR``, ``aem bench --policy hf:DIR``), with LoRA the adapter alone
in ``adapter/`` (a few MB), ``aem-prompt.json`` (the prompt layout the model was trained on, which
:class:`aem_agent.policies.hf.HFPolicy` reads), ``aem-sft.json`` (settings and data
statistics), ``metrics.csv`` and ``checkpoint-*`` (``resume=True`` continues from the newest).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aem_agent.grpo.metrics import MetricsWriter
from aem_agent.grpo.run import (
    check_output_dir,
    checkpoint_step,
    last_checkpoint,
    resolve_model,
    save_policy,
)
from aem_agent.prompts import write_prompt_layout
from aem_agent.rollout.batches import LAYOUTS
from aem_agent.sft.demonstrations import (
    expert_teacher,
    explorer,
    oversample_rare,
    verb,
)
from aem_agent.sft.settings import (
    OUTPUTS,
    SETTINGS_FILE,
    SFTError,
    SFTSettings,
    check_settings,
    sft_model,
)
from aem_envs.core.base import TRAIN_SPLIT

if TYPE_CHECKING:
    from aem_agent.grpo.config import AgentModelConfig


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


def expert_episodes(rollout: Any, settings: SFTSettings, *, chunk: int = 16) -> list[Any]:
    """Play ``settings.episodes`` expert episodes on the train split through ``rollout``.

    Episode ``k`` is env ``env_ids[k % n]`` reset with seed ``seed + k`` (as
    :func:`aem_agent.rollout.records.task_dataset` numbers tasks), so a rerun sees the same data.
    """
    from aem_agent.rollout.records import EpisodeSpec

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
        **settings.prompt_record(),
        "system_prompt": settings.system_prompt,
        "layout": settings.layout,
        "think": settings.think,
    }


def run_sft(settings: SFTSettings, model: AgentModelConfig | None = None) -> SFTResult:
    """Play the expert, build the samples, train with TRL's ``SFTTrainer``, save the model
    (``model``: what to start from and its LoRA adapter; default :func:`sft_model`)."""
    model = model or sft_model()
    check_settings(settings, model)
    from aem_envs.registration import resolve_env_id

    for env_id in settings.env_ids:
        resolve_env_id(env_id)  # one clear line for an unknown id, before loading a model
    if settings.torch_threads:
        import torch

        torch.set_num_threads(int(settings.torch_threads))
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

    from transformers import AutoTokenizer

    from aem_agent.rollout.groups import MultiTurnRollout

    out = Path(settings.output_dir)
    model_dir = resolve_model(model.model_name_or_path)
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
    trainer = build_sft_trainer(settings, model, model_dir, tokenizer, samples)
    from aem_envs.core.io import atomic_write_json

    checkpoint = last_checkpoint(out) if settings.resume else None
    metrics = MetricsWriter(
        out / "metrics.csv",
        resume_step=checkpoint_step(checkpoint) if checkpoint else None,
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
    atomic_write_json(
        out / SETTINGS_FILE,
        {**_jsonable(asdict(model)), **_jsonable(settings.to_dict()), **stats},
    )
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
    settings: SFTSettings,
    model: AgentModelConfig,
    model_dir: Path,
    tokenizer: Any,
    samples: list[dict[str, list[int]]],
) -> Any:
    """TRL's ``SFTTrainer`` (scoring reply positions only) on the pre-tokenised samples, with
    the LoRA adapter of ``model`` (TRL's ``get_peft_config``), or on ``init_adapter``."""
    from datasets import Dataset
    from trl import get_peft_config

    from aem_agent.grpo.lm_head import ReplyScoringSFTTrainer

    settings.model_init_kwargs = model.model_init_kwargs(settings.model_init_kwargs)
    peft_config = get_peft_config(model)
    start: Any = str(model_dir)  # a path, or the PEFT model of an adapter trained on
    if settings.init_adapter:
        from peft import PeftModel
        from transformers import AutoModelForCausalLM

        base = AutoModelForCausalLM.from_pretrained(model_dir)
        start = PeftModel.from_pretrained(base, settings.init_adapter, is_trainable=True)
        peft_config = None
    return ReplyScoringSFTTrainer(
        model=start,
        args=settings,
        train_dataset=Dataset.from_list(samples),
        processing_class=tokenizer,
        peft_config=peft_config,
    )


def _jsonable(data: dict[str, Any]) -> dict[str, Any]:
    import json

    return json.loads(json.dumps(data, default=str))
