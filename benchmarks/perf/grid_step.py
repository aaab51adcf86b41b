"""What one GRPO step of the small agent costs at the learning grid's batch shapes.

The paper's step is 16 groups × 8 episodes of up to 50 turns; the small-agent grid
(``benchmarks/learning/configs/alfworld-small.yaml``) plays episodes of up to 30 turns. Its
shape is chosen from these rows: one real ``aem train`` step of the small agent at 8 × 8 and at
16 × 8 episodes, side by side in one run (:func:`benchmarks.perf.agent_models.small_step`),
with where each step's time goes. The random start plays every episode to its turn limit, so
a step of the trained start (which ends the episodes it wins) costs at most this much.

Run ``python -m benchmarks.perf.grid_step [--quick]`` (``--quick``: 3-turn episodes);
``aem bench perf --only grid_step`` adds the rows to the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.perf import perf_main, perf_row
from benchmarks.perf.agent_models import ENV_ID, QUICK_STEP_TURNS, small_step

BENCHMARK = "small-agent grid step"
#: (groups, episodes per group) of a step: the smaller shape first, the paper's second.
SHAPES: tuple[tuple[int, int], ...] = ((8, 8), (16, 8))
#: The grid's episode length.
MAX_TURNS = 30


def measure(quick: bool = False) -> list[dict[str, Any]]:
    """Rows: each shape's step wall time (the larger against the smaller), its turns, and its
    sampling, env and update shares."""
    turns = QUICK_STEP_TURNS if quick else MAX_TURNS
    steps = {shape: small_step(*shape, turns) for shape in SHAPES}
    base = steps[SHAPES[0]]
    rows = []
    for (groups, size), step in steps.items():
        label = f"{groups} x {size} episodes x <= {turns} turns"
        setting = (
            f"small agent's random start (3.4M parameters), 1 thread, float32, {ENV_ID}; "
            f"{step['turns']:.0f} turns played, rows of {step['mean_row_tokens']:.0f} tokens, "
            f"peak RSS {step['peak_rss_mb']:.0f} MB"
        )
        rows.append(
            perf_row(
                BENCHMARK,
                f"{label}: wall",
                step["wall_s"],
                base["wall_s"],
                "s",
                f"{setting}; ratio = this step / the {SHAPES[0][0]} x {SHAPES[0][1]} step",
                ratio=step["wall_s"] / base["wall_s"],
                digits=1,
            )
        )
        rows.append(
            perf_row(
                BENCHMARK,
                f"{label}: per turn",
                step["wall_s"] / max(step["turns"], 1),
                None,
                "s",
                f"CPU {step['cpu_s'] / max(step['turns'], 1):.3f} s per turn (the wall time "
                "counts other jobs on a shared core); "
                f"sampling {step['generate_s'] / step['wall_s']:.0%}, envs and prompts "
                f"{(step['rollout_s'] - step['generate_s']) / step['wall_s']:.0%}, update "
                f"{step['update_s'] / step['wall_s']:.0%} of the step",
                digits=3,
            )
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    return perf_main(measure, __doc__, f"episodes of at most {QUICK_STEP_TURNS} turns", argv)


if __name__ == "__main__":
    raise SystemExit(main())
