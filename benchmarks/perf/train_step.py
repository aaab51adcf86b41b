"""One CPU training step of SmolLM2 on ALFWorld: today's settings against the earlier ones.

The batch is 8 episodes (2 groups of 4) × up to 5 turns × 32 new tokens in the step layout,
the action tag as ``reply_prefix``, one torch thread. Both configurations run the same code, each in
a fresh child process (so peak RSS is its own), one after the other in this script:

* ``ours``: what ``aem train`` does on CPU now — LoRA (``use_peft``), no gradient
  checkpointing, float32, turn rows micro-batched by a token budget — in the layout the
  reference agent is trained with: the ``compact`` prompt style (ALFWorld's memory of places
  searched instead of a history window) and the last action;
* ``ours-bf16``: the same with ``bf16: true`` (autocast, sampling included), the opt-in for
  CPUs that multiply bf16 natively;
* ``baseline``: the earlier CPU defaults — every weight trained in float32, TRL's default
  gradient checkpointing, the ``full`` prompt with a history window of 5, turn rows in chunks
  of up to 4,096 tokens — and the earlier head: TRL's fused head projecting every position of
  a row onto the vocabulary, as it does off Triton (``aem_agent.grpo.lm_head`` is bypassed). Its
  rollout needs no adapter merge: it has no adapter.

What this does *not* capture: the earlier code also ran TRL's forwards over episode rows
(first prompt + every reply glued together) and repeated the whole user prompt in every
trajectory-layout observation segment; those paths are gone, so they cannot be timed beside
the new ones. The ratio is therefore a lower bound on the speed-up against the earlier code.

Run ``python -m benchmarks.perf.train_step [--quick]``; ``aem bench perf`` gathers the rows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from aem_envs.reply import REPLY_FORMAT
from benchmarks.perf import perf_main, perf_row

if TYPE_CHECKING:
    from aem_agent.rollout.groups import MultiTurnRollout

BENCHMARK = "train step"
ENV_ID = "aem/ALFWorld-v0"
#: The two configurations, as ``aem train`` settings on top of :data:`COMMON`.
CONFIGS: dict[str, dict[str, Any]] = {
    "ours": {"prompt_style": "compact", "history_window": 1},
    "ours-bf16": {"prompt_style": "compact", "history_window": 1, "bf16": True},
    "baseline": {
        "use_peft": False,
        "activation_checkpointing": True,
        "bf16": False,
        "prompt_style": "full",
        "history_window": 5,
        "loss_token_budget": 4096,
    },
}
#: The configurations that run with TRL's own head (every position scored), as the code did.
TRL_HEAD = frozenset({"baseline"})
COMMON: dict[str, Any] = {
    "env_ids": [ENV_ID],
    "rollout_layout": "step",
    "per_device_train_batch_size": 8,
    "num_generations": 4,
    "num_tasks": 2,
    "max_turns": 5,
    "max_turn_tokens": 32,
    "max_completion_length": 4096,
    "reply_prefix": REPLY_FORMAT.action_open,
    "max_steps": 1,
    "save_strategy": "no",
    "report_to": "none",
    "env_workers": 2,
    "top_k": 0,
    "seed": 0,
    "learning_rate": 1e-5,
}

#: Turns per episode with ``--quick`` (the step is otherwise about 9 minutes per configuration).
QUICK_TURNS = 2

_CHILD = (
    "import json, sys\n"
    "from benchmarks.perf.train_step import one_step\n"
    "result = one_step(json.loads(sys.argv[1]), trl_head=sys.argv[2] == 'trl-head', "
    "model=sys.argv[3])\n"
    "print('AEM-PERF ' + json.dumps(result))\n"
)


def one_step(
    settings: dict[str, Any], *, trl_head: bool = False, model: str = "smollm2"
) -> dict[str, float]:
    """Build the trainer for ``settings`` on ``model`` (a bundled name or a checkpoint) and
    time one training step (call in a child), the rollout's sampling calls apart;
    ``trl_head``: score every position in the LM head, as TRL does off Triton."""
    import contextlib
    import resource
    import time

    import torch

    from aem_agent.grpo import trl_private
    from aem_agent.grpo.run import build_config, build_trainer, resolve_model
    from aem_agent.rollout import groups as rollout_module

    torch.set_num_threads(1)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    if trl_head:  # this child process only

        @contextlib.contextmanager
        def every_position(device: torch.device) -> Iterator[None]:
            yield

        trl_private.reply_positions_only = every_position
    played = {"seconds": 0.0, "generate_s": 0.0, "turns": 0, "rows_tokens": 0}
    sampler = rollout_module.trainer_generator

    def timed_sampler(*args: Any, **kwargs: Any) -> Any:
        generate = sampler(*args, **kwargs)

        def timed(contexts: list[list[int]]) -> Any:
            tic = time.perf_counter()
            replies = generate(contexts)
            played["generate_s"] += time.perf_counter() - tic
            return replies

        return timed

    rollout_module.trainer_generator = timed_sampler  # this child process only
    setup = build_config(settings)
    config = setup.config
    trainer = build_trainer(config, resolve_model(model), model=setup.model)
    rollout = cast("MultiTurnRollout", trainer.rollout_func)  # the one the trainer built
    play = rollout.play

    def timed_play(*args: Any, **kwargs: Any) -> Any:
        tic = time.perf_counter()
        episodes = play(*args, **kwargs)
        played["seconds"] += time.perf_counter() - tic
        turns = [t for e in episodes for t in e.turns]
        played["turns"] += len(turns)
        played["rows_tokens"] += sum(len(t.prompt_ids) + len(t.reply.ids) for t in turns)
        return episodes

    rollout.play = timed_play  # type: ignore[method-assign]  # times every play, on purpose
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        trainer.train()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        rollout.close()
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "rollout_s": played["seconds"],
        "generate_s": played["generate_s"],
        "update_s": wall - played["seconds"],
        "turns": played["turns"],
        "mean_row_tokens": played["rows_tokens"] / max(played["turns"], 1),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _run_child(name: str, output_dir: str, *, quick: bool) -> dict[str, float]:
    settings = {**COMMON, **CONFIGS[name], "output_dir": os.path.join(output_dir, name)}
    if quick:
        settings["max_turns"] = QUICK_TURNS
    return run_child(settings, trl_head=name in TRL_HEAD, name=name)


def run_child(
    settings: dict[str, Any], *, trl_head: bool = False, model: str = "smollm2", name: str = "a"
) -> dict[str, float]:
    """:func:`one_step` in a fresh process with one OpenMP thread (its own peak RSS)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD,
            json.dumps(settings),
            "trl-head" if trl_head else "ours",
            model,
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("AEM-PERF ")), None)
    if done.returncode != 0 or line is None:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{name} step failed: {tail[0]}")
    return json.loads(line[len("AEM-PERF ") :])


def measure(quick: bool = False) -> list[dict[str, Any]]:
    """Rows: step wall time, rollout and update time, peak RSS, ours against the baseline."""
    from aem_envs.core.errors import MissingDependencyError
    from aem_envs.registration import ENTRIES

    try:
        from aem_agent.models.bundled import smollm2_checkpoint

        smollm2_checkpoint()
    except MissingDependencyError as exc:
        return [perf_row(BENCHMARK, "step wall", None, None, "s", f"skipped: {exc}")]
    if ENV_ID not in {e.id for e in ENTRIES if not e.missing_modules()}:
        return [perf_row(BENCHMARK, "step wall", None, None, "s", f"skipped: {ENV_ID} missing")]
    with tempfile.TemporaryDirectory() as tmp:
        ours = _run_child("ours", tmp, quick=quick)
        bf16 = _run_child("ours-bf16", tmp, quick=quick)
        base = _run_child("baseline", tmp, quick=quick)
    setting = (
        f"SmolLM2-135M, 1 CPU thread, {ENV_ID}, 8 episodes x <={QUICK_TURNS if quick else 5} "
        "turns x 32 tokens, step layout; "
        f"{ours['turns']:.0f} vs {base['turns']:.0f} turn rows of {ours['mean_row_tokens']:.0f} "
        f"vs {base['mean_row_tokens']:.0f} tokens; ours: the CPU defaults (LoRA, float32) with "
        "the compact prompt; baseline: full weights, gradient checkpointing, full prompt with "
        "history window 5, 4,096-token chunks, TRL's head scoring every position (the earlier "
        "code path)"
    )
    rss_note = "whole child process (model load included); target <= 2048 MB"
    return [
        perf_row(BENCHMARK, "step wall", ours["wall_s"], base["wall_s"], "s", setting),
        perf_row(BENCHMARK, "rollout", ours["rollout_s"], base["rollout_s"], "s", setting),
        perf_row(BENCHMARK, "update", ours["update_s"], base["update_s"], "s", setting),
        perf_row(BENCHMARK, "peak RSS", ours["peak_rss_mb"], base["peak_rss_mb"], "MB", rss_note),
        perf_row(
            BENCHMARK,
            "step wall, bf16: true",
            bf16["wall_s"],
            base["wall_s"],
            "s",
            "the same step with bf16 autocast (opt-in: native bf16 on this CPU; off by default "
            f"because it hurt learning in a test); rollout {bf16['rollout_s']:.0f} s, update "
            f"{bf16['update_s']:.0f} s",
        ),
        perf_row(
            BENCHMARK,
            "peak RSS, bf16: true",
            bf16["peak_rss_mb"],
            base["peak_rss_mb"],
            "MB",
            rss_note,
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    return perf_main(measure, __doc__, f"episodes of at most {QUICK_TURNS} turns", argv)


if __name__ == "__main__":
    raise SystemExit(main())
