"""``accelerate launch`` with two CPU processes runs ``aem train`` on the CPU smoke config.

The run goes through the shipped accelerate config (``configs/accelerate/cpu-2proc.yaml``)
and the real command line (``aem_cli.main``), with the tiny model in place of SmolLM2 so the
step fits CI. Each rank records the group statistics it computed itself (mean entropy and
group id per unit, before any gather) and the α it then got for every unit of the batch. One
process, recomputing α over both ranks' statistics, must find the same numbers: the group
statistics are gathered across processes, not taken per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from aem_agent.credit.modulation import group_alpha

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "aem_agent" / "configs" / "accelerate" / "cpu-2proc.yaml"

RECORDING_LAUNCH = """
import json, sys
import aem_agent.credit.aem as credit_aem
import aem_agent.grpo.trainer as trainer
from aem_cli.main import main

records = {"local": [], "alpha": []}
local_turns, alpha_of = trainer.local_turns, credit_aem.group_alpha

def recording_turns(rows, units, **kwargs):
    batch = local_turns(rows, units, **kwargs)
    records["local"].append([batch.entropy.tolist(), batch.group.tolist()])
    return batch

def recording_alpha(hbar, groups, valid, **settings):
    alpha, gated = alpha_of(hbar, groups, valid, **settings)
    records["alpha"].append([alpha.tolist(), settings])
    return alpha, gated

trainer.local_turns, credit_aem.group_alpha = recording_turns, recording_alpha
code = main(sys.argv[1:])
import torch.distributed as dist
rank = dist.get_rank() if dist.is_initialized() else 0
import os, pathlib
record = json.dumps({"rank": rank, "code": code, **records})
pathlib.Path(os.environ["AEM_RANK_DIR"], f"rank-{rank}.json").write_text(record)
"""


@pytest.mark.slow
def test_two_processes_gather_aem_statistics_like_one(tiny_model_dir, tmp_path) -> None:
    script = tmp_path / "launch.py"
    script.write_text(RECORDING_LAUNCH)
    # The CPU smoke config without the 0.1-nat gate: the tiny random model's mean entropies
    # differ by less than that, and α = 1 everywhere would not show the gather.
    smoke = (ROOT / "aem_agent" / "configs" / "cpu-smoke.yaml").read_text()
    assert "aem_min_range: 0.1" in smoke
    config = tmp_path / "cpu-smoke-ungated.yaml"
    config.write_text(smoke.replace("aem_min_range: 0.1", "aem_min_range: 0.0"))
    accelerate = Path(sys.executable).with_name("accelerate")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    env["PYTHONPATH"] = str(ROOT)
    rank_dir = tmp_path / "ranks"
    rank_dir.mkdir()
    env["AEM_RANK_DIR"] = str(rank_dir)
    out = tmp_path / "run"
    done = subprocess.run(
        [
            str(accelerate),
            "launch",
            "--config_file",
            str(CONFIG),
            "--main_process_port",
            "29547",
            str(script),
            "train",
            "--config",
            str(config),
            "--model",
            str(tiny_model_dir),
            "--steps",
            "1",
            "--output-dir",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    # One file per rank: two processes printing to one pipe can interleave their lines.
    ranks = {r["rank"]: r for r in map(json.loads, map(Path.read_text, rank_dir.glob("*.json")))}
    assert done.returncode == 0 and set(ranks) == {0, 1}, done.stderr[-3000:]
    assert all(r["code"] == 0 for r in ranks.values())
    assert ranks[0]["alpha"] == ranks[1]["alpha"]  # both ranks hold the whole batch's α
    modulated = [a for alpha, _ in ranks[0]["alpha"] for a in alpha if abs(a - 1.0) > 1e-9]
    assert modulated, "every α was 1: the check would pass without any gather"
    for step, (alpha, settings) in enumerate(ranks[0]["alpha"]):
        per_rank = [ranks[k]["local"][step] for k in (0, 1)]
        # One process over both ranks' turns, in rank order: the batch the chain saw.
        hbar = torch.tensor([h for r in per_rank for h in r[0]], dtype=torch.float64)
        groups = torch.tensor([g for r in per_rank for g in r[1]])
        assert all(len(r[0]) > 0 for r in per_rank)
        single, _ = group_alpha(hbar, groups, torch.ones(len(hbar), dtype=torch.bool), **settings)
        torch.testing.assert_close(torch.tensor(alpha, dtype=torch.float64), single)
    assert (out / "metrics.csv").exists() or any(out.rglob("metrics.csv"))
