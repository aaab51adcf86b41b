"""The small-agent grid's driver script (``configs/alfworld-small-grid.sh``): its order, its
gate on the start, and how a failed lane stops it.

The script's pieces (``aem sft``, ``aem bench``, ``aem bench learning --run``) are tested
where they live; here ``$PYTHON`` is a recorder that plays each piece's part on disk (a model
file, a results file, a failure where asked), so what is checked is the script's own logic.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = Path("benchmarks") / "learning" / "configs"
SCRIPTS = ("alfworld-small-grid.sh", "alfworld-small-start.sh")

#: Stands in for ``$PYTHON``: logs its arguments, runs ``-c`` code with the real interpreter,
#: and leaves what each called piece would: a model for ``aem sft``, a results file with
#: ``$SUCCESS`` for ``aem bench --suite``; ``aem bench learning --run $FAIL_RUN`` fails.
RECORDER = """#!/usr/bin/env bash
echo "$*" >> "$CALLS"
if [[ $1 == -c ]]; then exec {python} "$@"; fi
args=("$@"); out=""; run=""
for ((i = 0; i < ${{#args[@]}}; i++)); do
    case ${{args[i]}} in --out|--output-dir) out=${{args[i+1]}};; --run) run=${{args[i+1]}};; esac
done
case "$2 $3 $4" in
    "aem_cli sft "*) mkdir -p "$out" && touch "$out/model.safetensors";;
    "aem_cli bench learning") [[ -z $run || $run != "${{FAIL_RUN:-}}" ]];;
    "aem_cli bench --suite") mkdir -p "$out"
        echo "{{\\"summary\\": [{{\\"success_rate\\": $SUCCESS}}]}}" > "$out/results.json";;
esac
"""


def grid(tmp_path: Path, *, success: float, fail_run: str = "") -> tuple[int, list[str], str]:
    """Run the grid script in ``tmp_path``: its exit status, the calls of this run, stderr."""
    (tmp_path / CONFIGS).mkdir(parents=True, exist_ok=True)
    for name in SCRIPTS:
        shutil.copy(ROOT / CONFIGS / name, tmp_path / CONFIGS / name)
    recorder = tmp_path / "python"
    recorder.write_text(RECORDER.format(python=sys.executable))
    recorder.chmod(0o755)
    calls = tmp_path / "calls.log"
    calls.unlink(missing_ok=True)
    env = {
        **os.environ,
        "PYTHON": str(recorder),
        "CALLS": str(calls),
        "SUCCESS": str(success),
        "FAIL_RUN": fail_run,
        # the script runs from the repository root, whose packages its `-c` code imports; here
        # the copied configs/ folder would shadow them
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        ["bash", str(CONFIGS / SCRIPTS[0]), "out"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, calls.read_text().splitlines(), done.stderr


def runs(calls: list[str]) -> list[str]:
    """The ``--run`` names, in call order."""
    return [c.split("--run ")[1] for c in calls if "--run " in c]


def first(calls: list[str], text: str) -> int:
    return next(i for i, c in enumerate(calls) if text in c)


def test_the_grid_builds_the_start_then_runs_each_pair_in_two_lanes(tmp_path: Path) -> None:
    status, calls, stderr = grid(tmp_path, success=24.3)
    assert status == 0, stderr
    stages = [c for c in calls if "aem_cli sft" in c]
    assert len(stages) == 2 and "--prompt-loss" in stages[0] and "small-start/read" in stages[1]
    named = runs(calls)
    assert sorted(named) == sorted(
        f"{arm}-seed{seed}"
        for arm in ("grpo", "aem", "dapo", "dapo-aem", "gspo", "gspo-aem")
        for seed in (0, 1, 2)
    )
    for arm in ("grpo", "aem", "dapo", "dapo-aem", "gspo", "gspo-aem"):  # seeds in turn
        assert [r for r in named if r.rsplit("-", 1)[0] == arm] == [
            f"{arm}-seed{s}" for s in (0, 1, 2)
        ]
        for seed in (0, 1, 2):  # each run's sampled held-out pass follows it
            run = f"{arm}-seed{seed}"
            assert first(calls, f"--run {run}") < first(calls, f"runs/{run}/final")
    # the later pairs wait for both lanes of the one before
    assert max(named.index(f"{a}-seed2") for a in ("grpo", "aem")) < named.index("dapo-seed0")
    assert max(named.index(f"{a}-seed2") for a in ("dapo", "dapo-aem")) < named.index("gspo-seed0")
    assert first(calls, "sampled/start") < first(calls, "--run aem-seed0")
    assert calls[-2].endswith("--status") and calls[-1] == "-m benchmarks.learning.readme"


def test_a_start_under_the_gate_stops_the_grid_before_any_run(tmp_path: Path) -> None:
    status, calls, stderr = grid(tmp_path, success=12.5)
    assert status == 3
    assert "wins 12.5 % of train games (< 20 %)" in stderr
    assert runs(calls) == []


def test_a_failed_lane_stops_the_next_pair_and_a_rerun_reuses_the_start(tmp_path: Path) -> None:
    status, calls, stderr = grid(tmp_path, success=24.3, fail_run="aem-seed1")
    assert status == 1 and "a lane stopped" in stderr
    named = runs(calls)
    assert "aem-seed2" not in named and not any(r.startswith(("dapo", "gspo")) for r in named)
    assert [r for r in named if r.startswith("grpo")] == ["grpo-seed0", "grpo-seed1", "grpo-seed2"]
    status, calls, stderr = grid(tmp_path, success=24.3)
    assert status == 0, stderr
    assert not any("aem_cli sft" in c for c in calls)  # both stages were built
    assert "gspo-aem-seed2" in runs(calls)


def test_a_committed_start_skips_the_sft_and_its_gate(tmp_path: Path) -> None:
    """The grid's start/ is committed: a fresh clone goes straight to the runs."""
    start = tmp_path / "out" / "start"
    start.mkdir(parents=True)
    (start / "model.safetensors").touch()
    status, calls, stderr = grid(tmp_path, success=12.5)  # a gate it must not read
    assert status == 0, stderr
    assert not any("aem_cli sft" in c or "small-agent-train" in c for c in calls)
    assert "aem-seed0" in runs(calls)


def test_a_sampled_pass_whose_results_say_it_finished_is_not_played_again(
    tmp_path: Path,
) -> None:
    """Its episodes are not committed: a fresh clone would play all 720 again (and the
    model it scored may be gone); a pass that stopped short is resumed."""
    for name, finished in (("grpo-seed0", 720), ("aem-seed0", 700)):
        folder = tmp_path / "out" / "sampled" / name
        folder.mkdir(parents=True)
        summary = {"success_rate": 12.5, "episodes": finished, "mean_wall_time_s": 1.0}
        counts = {"planned_episodes": 720, "finished_episodes": finished, "summary": [summary]}
        (folder / "results.json").write_text(json.dumps(counts))
    status, calls, stderr = grid(tmp_path, success=24.3)
    assert status == 0, stderr
    passes = [c for c in calls if "aem_cli bench --suite" in c and "/sampled/" in c]
    assert not any("sampled/grpo-seed0" in c for c in passes)
    assert any("sampled/aem-seed0" in c for c in passes)
    assert any("sampled/grpo-seed1" in c for c in passes)


def test_a_stage_resumes_only_from_a_whole_checkpoint(tmp_path: Path) -> None:
    """A session killed mid-save leaves a checkpoint without trainer_state.json: the stage
    starts over (``--overwrite``) instead of asking ``aem sft --resume`` for it, which refuses."""
    read = tmp_path / "runs" / "small-start" / "read"  # the script's $START, as run from its root
    (read / "checkpoint-50").mkdir(parents=True)
    status, calls, stderr = grid(tmp_path, success=24.3)
    assert status == 0, stderr
    assert "--resume" not in next(c for c in calls if "aem_cli sft" in c)
    for built in ("out", "runs"):
        shutil.rmtree(tmp_path / built)
    (read / "checkpoint-50").mkdir(parents=True)
    (read / "checkpoint-50" / "trainer_state.json").write_text("{}")
    status, calls, stderr = grid(tmp_path, success=24.3)
    assert status == 0, stderr
    assert "--resume" in next(c for c in calls if "aem_cli sft" in c)
