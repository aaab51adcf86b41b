"""Two gloo processes (``torchrun``): the step layout with unequal rows per rank.

Episodes on the Doors env end after different numbers of turns, so the two ranks hold
different numbers of turn rows; the trainer must pad them to one count and make the same
number of forward calls and gathers on both, or the run hangs or crashes. Group statistics are
gathered (with GiGPO's anchor states), so both ranks must log the same AEM and GiGPO numbers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import json, sys
import gymnasium as gym
from tests.agent.conftest import DOORS_ENV_ID, DoorsEnv
gym.register(id=DOORS_ENV_ID, entry_point=DoorsEnv)
from aem_agent.grpo.config import AEMConfig
from aem_agent.grpo.trainer import AEMGRPOTrainer

config = AEMConfig(
    output_dir=sys.argv[2], per_device_train_batch_size=4, num_generations=4, max_steps=2,
    learning_rate=1e-3, logging_steps=1, save_strategy="no", report_to=[], use_cpu=True,
    activation_checkpointing=False, seed=3, env_ids=[DOORS_ENV_ID], max_turns=3,
    max_turn_tokens=8, num_tasks=8, env_workers=1, temperature=1.0, top_k=0,
    rollout_layout="step", aem_min_range=0.0, step_token_budget=256, credit="gigpo+aem",
)
trainer = AEMGRPOTrainer(model=sys.argv[1], args=config)
rows = []
original = trainer._step_batch
def recording(inputs, out, want):
    batch, step_rows, entropies, source = original(inputs, out, want)
    rows.append([int(step_rows.real.sum()), len(step_rows.episode)])
    return batch, step_rows, entropies, source
trainer._step_batch = recording
trainer.train()
logs = [r for r in trainer.state.log_history if "aem/alpha_min" in r]
import os, pathlib
rank = trainer.accelerator.process_index
pathlib.Path(os.environ["AEM_RANK_DIR"], f"rank-{rank}.json").write_text(json.dumps({
    "rank": rank, "rows": rows, "step": trainer.state.global_step,
    "alpha": [[r["aem/alpha_min"], r["aem/alpha_max"], r["aem/units"]] for r in logs],
    "gigpo": [[r["gigpo/step_groups"], r["gigpo/step_advantage_abs"]] for r in logs],
}))
"""


@pytest.mark.slow
def test_two_processes_train_the_step_layout_in_lockstep(tiny_model_dir, tmp_path) -> None:
    script = tmp_path / "two_ranks.py"
    script.write_text(SCRIPT)
    torchrun = Path(sys.executable).with_name("torchrun")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    env["PYTHONPATH"] = str(Path(__file__).parents[3])
    rank_dir = tmp_path / "ranks"
    rank_dir.mkdir()
    env["AEM_RANK_DIR"] = str(rank_dir)
    done = subprocess.run(
        [
            str(torchrun),
            "--nproc_per_node",
            "2",
            "--master_addr",
            "127.0.0.1",
            str(script),
            str(tiny_model_dir),
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    # One file per rank: two processes printing to one pipe can interleave their lines.
    ranks = [json.loads(p.read_text()) for p in sorted(rank_dir.glob("rank-*.json"))]
    assert done.returncode == 0 and len(ranks) == 2, done.stderr[-3000:]
    by_rank = {r["rank"]: r for r in ranks}
    assert by_rank[0]["step"] == by_rank[1]["step"] == 2
    for step in range(2):
        padded = {by_rank[k]["rows"][step][1] for k in (0, 1)}
        assert len(padded) == 1  # one padded row count on both ranks
    real = [(by_rank[0]["rows"][s][0], by_rank[1]["rows"][s][0]) for s in range(2)]
    assert all(a > 0 and b > 0 for a, b in real)
    assert by_rank[0]["alpha"] == by_rank[1]["alpha"]  # gathered group statistics
    assert by_rank[0]["gigpo"] == by_rank[1]["gigpo"]  # anchor states gathered too
    assert all(
        units == a + b for (_, _, units), (a, b) in zip(by_rank[0]["alpha"], real, strict=True)
    )
