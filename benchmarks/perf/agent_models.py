"""How fast the agent models sample and train on one CPU core, against that core's matmul rate.

Rows, each beside the peak it is measured against in the same minutes:

* ``matmul rate``: one thread multiplying 1024 × 1024 matrices, float32 and bfloat16 — the
  ceiling every other row is a share of (model-FLOP utilisation, MFU);
* per model (the small agent ``aem-small-init`` and SmolLM2-135M): sampled tokens/s of the
  rollout's own sampler (:func:`aem_agent.rollout.samplers.model_generator`, i.e. HF ``generate``)
  on a batch of real ALFWorld step-layout contexts, and trained tokens/s of a forward and
  backward over the same rows (reply positions scored, as the trainer scores them), each with
  the model FLOPs it achieved as a share of the matmul rate measured just before and after it
  (:func:`beside_peak`); the small agent also under bfloat16 autocast;
* where a GRPO step of the small agent goes: sampling, the envs, and the update, from a real
  ``aem train`` step (:func:`benchmarks.perf.train_step.one_step`).

Model FLOPs are :mod:`benchmarks.perf.flops`'s; a backward costs twice the forward with every
weight trained and once with LoRA (no weight gradients for the frozen weights).

Run ``python -m benchmarks.perf.agent_models [--quick]``; ``aem bench perf`` gathers the rows.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from aem_envs.reply import REPLY_FORMAT
from benchmarks.perf import perf_main, perf_row
from benchmarks.perf.flops import Shape, beside_peak, matmul_rate

BENCHMARK = "agent models"
ENV_ID = "aem/ALFWorld-v0"
#: The models measured: (row label, bundled name, trained with LoRA as ``aem train`` does,
#: measured under bfloat16 autocast too).
MODELS: tuple[tuple[str, str, bool, bool], ...] = (
    ("small agent", "aem-small-init", False, True),
    ("SmolLM2-135M", "smollm2", True, False),
)
#: The small agent's prompt layout, which both models are measured in.
LAYOUT: dict[str, Any] = {
    "prompt_style": "compact",
    "history_window": 1,
    "reply_prefix": REPLY_FORMAT.action_open,
}
#: Contexts sampled or trained together (one step's active episodes at a time).
BATCH = 16
#: Rows per training forward: SmolLM2's activations for all 16 rows at once took 13 GB.
TRAIN_ROWS = 4
#: New tokens per sampled reply (an ALFWorld action is 6-9 tokens of the small agent's).
NEW_TOKENS = 8
#: The small agent's GRPO step measured: groups × episodes per group × turns per episode.
STEP = {"num_tasks": 2, "num_generations": 8, "max_turns": 10}
QUICK_STEP_TURNS = 3


def expert_turns(tokenizer: Any, count: int) -> list[tuple[list[int], list[int]]]:
    """``count`` (context, reply) token ids of the searching expert's train-split turns,
    rendered by the rollout in :data:`LAYOUT` for ``tokenizer``."""
    from aem_agent.rollout.groups import MultiTurnRollout
    from aem_agent.rollout.records import EpisodeSpec
    from aem_agent.sft.demonstrations import expert_teacher

    rollout = MultiTurnRollout(
        tokenizer, max_turns=30, env_kwargs={"expert": "search"}, workers=1, **LAYOUT
    )
    turns: list[tuple[list[int], list[int]]] = []
    try:
        seed = 0
        while len(turns) < count:
            [episode] = rollout.play([EpisodeSpec(ENV_ID, seed, "train")], teacher=expert_teacher())
            turns += [(list(t.prompt_ids), list(t.reply.ids)) for t in episode.turns]
            seed += 1
    finally:
        rollout.close()
    return turns[:count]


def sampling_rate(model: Any, tokenizer: Any, contexts: list[list[int]]) -> tuple[float, float]:
    """(sampled tokens/s, model FLOP/s) of the rollout's sampler on ``contexts``, each
    reply exactly :data:`NEW_TOKENS` long."""
    from transformers import GenerationConfig

    from aem_agent.rollout.samplers import model_generator

    config = GenerationConfig(
        do_sample=True,
        temperature=1.0,
        top_k=0,
        min_new_tokens=NEW_TOKENS,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    generate = model_generator(model, tokenizer, config, max_new_tokens=NEW_TOKENS)
    generate(contexts[:2])  # warm-up
    start = time.perf_counter()
    replies = generate(contexts)
    seconds = time.perf_counter() - start
    sampled = sum(len(r.ids) for r in replies)
    width = max(len(c) for c in contexts)  # left-padded: every row is prefilled to the longest
    shape = Shape.of(model)
    prefill = shape.forward_flops(
        len(contexts) * width, len(contexts), len(contexts) * width**2 // 2
    )
    decode = shape.forward_flops(sampled, sampled, sum((width + k) for k in range(sampled)))
    return sampled / seconds, (prefill + decode) / seconds


def training_rate(
    model: Any, rows: list[tuple[list[int], list[int]]], *, lora: bool
) -> tuple[float, float]:
    """(trained tokens/s, model FLOP/s) of a forward and backward over ``rows`` (context +
    reply, the reply positions scored), padded to one width, :data:`TRAIN_ROWS` rows per
    forward with the gradients accumulated."""
    import torch

    pad = model.config.pad_token_id or 0
    width = max(len(c) + len(r) for c, r in rows)
    ids = torch.full((len(rows), width), pad)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    scored = torch.zeros((len(rows), width), dtype=torch.bool)
    for row, (context, reply) in enumerate(rows):
        ids[row, : len(context) + len(reply)] = torch.tensor([*context, *reply])
        attention[row, : len(context) + len(reply)] = 1
        scored[row, len(context) - 1 : len(context) + len(reply) - 1] = True  # predict the reply
    targets = torch.roll(ids, -1, dims=1)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    model.train()

    def step() -> None:
        for first in range(0, len(rows), TRAIN_ROWS):
            chunk = slice(first, first + TRAIN_ROWS)
            hidden = base.model(input_ids=ids[chunk], attention_mask=attention[chunk])
            logits = base.lm_head(hidden.last_hidden_state[scored[chunk]])
            loss = torch.nn.functional.cross_entropy(logits.float(), targets[chunk][scored[chunk]])
            loss.backward()
        model.zero_grad(set_to_none=True)

    step()  # warm-up
    start = time.perf_counter()
    step()
    seconds = time.perf_counter() - start
    tokens = int(attention.sum())
    forward = Shape.of(model).forward_flops(
        len(rows) * width, int(scored.sum()), len(rows) * width**2 // 2
    )
    return tokens / seconds, forward * (2 if lora else 3) / seconds


def model_rows(label: str, name: str, *, lora: bool, bf16: bool) -> list[dict[str, Any]]:
    """Sampling and training rows of one model; with ``bf16``, the same under bfloat16
    autocast (``bf16: true`` of ``aem train``) against the bfloat16 matmul rate."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from aem_agent.grpo.run import resolve_model

    directory = resolve_model(name)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    model: Any = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32)
    params = sum(p.numel() for p in model.parameters())
    turns = expert_turns(tokenizer, BATCH)
    contexts = [c for c, _ in turns]
    context_tokens = sum(map(len, contexts)) / len(contexts)
    reply_tokens = sum(len(r) for _, r in turns) / len(turns)
    model.eval()
    fp32, half = torch.float32, torch.bfloat16
    with torch.no_grad():
        sampled, sample_flops, sample_peak = beside_peak(
            lambda: sampling_rate(model, tokenizer, contexts), fp32
        )
        if bf16:
            with torch.autocast("cpu", dtype=half):
                sampled_bf16, sample_flops_bf16, sample_peak_bf16 = beside_peak(
                    lambda: sampling_rate(model, tokenizer, contexts), half
                )
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(
            model,
            LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"),
        )
    trained, train_flops, train_peak = beside_peak(
        lambda: training_rate(model, turns, lora=lora), fp32
    )
    if bf16:
        with torch.autocast("cpu", dtype=half):
            trained_bf16, train_flops_bf16, train_peak_bf16 = beside_peak(
                lambda: training_rate(model, turns, lora=lora), half
            )
    setting = (
        f"{label} ({params / 1e6:.1f}M parameters), 1 thread, float32, {BATCH} train-split "
        f"ALFWorld contexts of {context_tokens:.0f} tokens on average (compact prompt), an "
        f"expert action {reply_tokens:.1f} tokens with its end of turn"
    )
    rows = [
        perf_row(
            BENCHMARK,
            f"{label}: sampled tokens/s",
            sampled,
            None,
            "tokens/s",
            f"{setting}; {NEW_TOKENS} tokens sampled per context by the rollout's sampler (HF "
            "generate), prompt prefill included",
            digits=1,
        ),
        perf_row(
            BENCHMARK,
            f"{label}: sampling MFU",
            sample_flops / 1e9,
            sample_peak / 1e9,
            "GFLOP/s",
            "model FLOPs of that sampling (prefill and decode) against the float32 matmul "
            "rate measured just before and after it; ratio = MFU",
            ratio=sample_flops / sample_peak,
            digits=2,
        ),
        perf_row(
            BENCHMARK,
            f"{label}: trained tokens/s",
            trained,
            None,
            "tokens/s",
            f"{setting}; forward and backward over context + reply, reply positions scored, "
            + (
                "LoRA r16 on every linear layer (aem train's CPU default)"
                if lora
                else "every weight trained"
            ),
            digits=1,
        ),
        perf_row(
            BENCHMARK,
            f"{label}: training MFU",
            train_flops / 1e9,
            train_peak / 1e9,
            "GFLOP/s",
            "model FLOPs of that update against the float32 matmul rate measured just before "
            "and after it; ratio = MFU",
            ratio=train_flops / train_peak,
            digits=2,
        ),
    ]
    if bf16:
        autocast = "bfloat16 autocast (bf16: true); ratio = speed-up over float32; MFU against "
        rows += [
            perf_row(
                BENCHMARK,
                f"{label}: sampled tokens/s, bf16",
                sampled_bf16,
                sampled,
                "tokens/s",
                f"{autocast}the bfloat16 matmul rate: {sample_flops_bf16 / sample_peak_bf16:.2f}",
                ratio=sampled_bf16 / sampled,
                digits=1,
            ),
            perf_row(
                BENCHMARK,
                f"{label}: trained tokens/s, bf16",
                trained_bf16,
                trained,
                "tokens/s",
                f"{autocast}the bfloat16 matmul rate: {train_flops_bf16 / train_peak_bf16:.2f}",
                ratio=trained_bf16 / trained,
                digits=1,
            ),
        ]
    return rows


def small_step(num_tasks: int, num_generations: int, max_turns: int) -> dict[str, float]:
    """One real ``aem train`` GRPO step of the small agent's random start (every episode
    plays its ``max_turns``: the most a step of this shape can cost), timed in a child
    process (:func:`benchmarks.perf.train_step.one_step`)."""
    from benchmarks.perf.train_step import run_child

    settings = {
        **LAYOUT,
        "num_tasks": num_tasks,
        "num_generations": num_generations,
        "max_turns": max_turns,
        "env_ids": [ENV_ID],
        "env_kwargs": {"expert": "search"},
        "rollout_layout": "step",
        "use_peft": False,
        "per_device_train_batch_size": num_tasks * num_generations,
        "max_turn_tokens": 16,
        "max_completion_length": 4096,
        "max_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "env_workers": 1,
        "top_k": 0,
        "seed": 0,
        "learning_rate": 1e-4,
    }
    with tempfile.TemporaryDirectory() as tmp:
        return run_child(
            {**settings, "output_dir": os.path.join(tmp, "step")}, model="aem-small-init"
        )


def step_rows(*, quick: bool) -> list[dict[str, Any]]:
    """Where one GRPO step of the small agent goes, from a real ``aem train`` step."""
    settings = {**STEP, "max_turns": QUICK_STEP_TURNS if quick else STEP["max_turns"]}
    step = small_step(**settings)
    episodes = STEP["num_tasks"] * STEP["num_generations"]
    setting = (
        f"small agent, 1 thread, float32, {ENV_ID}, {STEP['num_tasks']} groups x "
        f"{STEP['num_generations']} episodes x <= {settings['max_turns']} turns "
        f"({step['turns']:.0f} turns played, rows of {step['mean_row_tokens']:.0f} tokens)"
    )
    share = {k: step[k] / step["wall_s"] for k in ("generate_s", "rollout_s", "update_s")}
    return [
        perf_row(BENCHMARK, "small agent GRPO step: wall", step["wall_s"], None, "s", setting),
        perf_row(
            BENCHMARK,
            "small agent GRPO step: sampling",
            step["generate_s"],
            step["wall_s"],
            "s",
            f"HF generate calls of the rollout; ratio = share of the step ({episodes} episodes)",
            ratio=share["generate_s"],
        ),
        perf_row(
            BENCHMARK,
            "small agent GRPO step: envs and prompts",
            step["rollout_s"] - step["generate_s"],
            step["wall_s"],
            "s",
            "the rest of the rollout: env steps, prompt rendering and tokenising; ratio = share",
            ratio=(step["rollout_s"] - step["generate_s"]) / step["wall_s"],
        ),
        perf_row(
            BENCHMARK,
            "small agent GRPO step: update",
            step["update_s"],
            step["wall_s"],
            "s",
            "TRL's forwards, backward and optimizer step over the turn rows; ratio = share",
            ratio=share["update_s"],
        ),
    ]


def measure(quick: bool = False) -> list[dict[str, Any]]:
    """Rows: the matmul rates, each model's sampling and training rates, the step's split."""
    import torch

    from aem_envs.core.errors import MissingDependencyError

    torch.set_num_threads(1)
    fp32 = matmul_rate(torch.float32)
    bf16 = matmul_rate(torch.bfloat16)
    peak = "one thread, 1024 x 1024 matrices"
    rows = [
        perf_row(BENCHMARK, "matmul rate, float32", fp32 / 1e9, None, "GFLOP/s", peak, digits=1),
        perf_row(
            BENCHMARK,
            "matmul rate, bfloat16",
            bf16 / 1e9,
            fp32 / 1e9,
            "GFLOP/s",
            f"{peak}; ratio = bfloat16 / float32",
            ratio=bf16 / fp32,
            digits=1,
        ),
    ]
    for label, name, lora, autocast in MODELS:
        try:
            rows += model_rows(label, name, lora=lora, bf16=autocast)
        except MissingDependencyError as exc:
            rows.append(
                perf_row(
                    BENCHMARK,
                    f"{label}: sampled tokens/s",
                    None,
                    None,
                    "tokens/s",
                    f"skipped: {exc}",
                )
            )
    rows += step_rows(quick=quick)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    return perf_main(measure, __doc__, f"a GRPO step of at most {QUICK_STEP_TURNS} turns", argv)


if __name__ == "__main__":
    raise SystemExit(main())
