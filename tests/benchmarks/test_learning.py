"""The learning-experiment harness: the Pick env, learning for real, resume, the report.

The learning test trains a tiny model on a task whose reward is learnable (one door always
wins) and requires its held-out success to rise well above the start checkpoint's: if the
policy gradient, the completion mask or the advantages' sign were wired wrong, it would not.
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import os
import shutil
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from aem_envs.core.base import TextEnv
from aem_envs.core.outcome import Outcome, Task

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
pytest.importorskip("trl")

from aem_cli.main import main
from benchmarks.learning import config as lc
from benchmarks.learning.carry import CARRIED_DIR, carry
from benchmarks.learning.collect import write_results
from benchmarks.learning.drift import read_units
from benchmarks.learning.env import ENV_ID, register
from benchmarks.learning.grid import run_grid
from benchmarks.learning.report import final_table
from benchmarks.learning.start import warmup_teacher
from benchmarks.learning.status import run_status

LUCKY_ID = "aemtest/LuckyDoor-v0"


class LuckyDoorEnv(TextEnv):
    """Three doors listed in a task's order; the green one always wins, in one move.

    A random policy wins a third of the time and the right action never depends on the
    task, so a few policy-gradient steps are enough to learn it.
    """

    splits: ClassVar[tuple[str, ...]] = ("train", "test")
    default_max_steps: ClassVar[int] = 1
    DOORS = ("red", "green", "blue")
    ORDERS: ClassVar[list[str]] = [",".join(p) for p in itertools.permutations(DOORS)]

    def task_ids(self, split: str) -> Sequence[str]:
        return self.ORDERS[:4] if split == "train" else self.ORDERS[4:]

    def _start(self, task_id: str, split: str) -> tuple[Task, str]:
        self._doors = task_id.split(",")
        return Task(task_id, "lucky", "open the lucky door"), f"You see: {', '.join(self._doors)}."

    def _act(self, action: str) -> Outcome:
        door = action.strip()
        if door == "green":
            return Outcome("You win!", done=True, won=True, score=1.0)
        if door in self._doors:
            return Outcome(f"The {door} door is locked.")
        return Outcome(f"There is no {door[:20]!r} door.", valid=False)

    def _admissible(self) -> list[str]:
        return list(self._doors)


@pytest.fixture(scope="module")
def lucky_env_id() -> str:
    if LUCKY_ID not in gym.registry:
        gym.register(id=LUCKY_ID, entry_point=LuckyDoorEnv)
    return LUCKY_ID


def experiment(env_id: str, **overrides) -> lc.LearningConfig:
    """A small experiment on ``env_id``: a 32-wide tiny model, step layout, 1-token actions."""
    data = {
        "name": "t",
        "algorithms": ["grpo"],
        "seeds": [0],
        "env": {"id": env_id, "train_split": "train", "eval_split": "test"},
        "eval": {"every": 2, "episodes": 2, "temperature": 1.0, "seed": 0},
        "model": {"tiny": {"hidden_size": 32, "num_layers": 2, "vocab_size": 400}},
        "warmup": {"steps": 0},
        "train": {
            "torch_threads": 1,
            "rollout_layout": "step",
            "max_turns": 1,
            "max_turn_tokens": 2,
            "history_window": 0,
            "reply_prefix": "<action>",
            "num_tasks": 64,
            "max_steps": 4,
            "per_device_train_batch_size": 8,
            "num_generations": 4,
            "max_completion_length": 16,
            "learning_rate": 0.01,
            "lr_scheduler_type": "constant",
            "env_workers": 1,
        },
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return lc.parse_config(data)


# ---------------------------------------------------------------------------- the env
def test_pick_env_passes_check_env_and_splits_are_disjoint() -> None:
    register()
    env = gym.make(ENV_ID).unwrapped
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env, skip_render_check=False)
    train, test = set(env.task_ids("train")), set(env.task_ids("test"))
    assert train and test and not train & test


def test_pick_env_wins_misses_and_rejects() -> None:
    register()
    env = gym.make(ENV_ID).unwrapped
    _, info = env.reset(seed=3, options={"split": "test"})
    target = env.expert_action()
    wrong = next(a for a in info["admissible_actions"] if a != target)
    _, reward, terminated, truncated, info = env.step(wrong)
    assert (reward, terminated, truncated, info["action_valid"]) == (0.0, False, False, True)
    assert wrong not in info["admissible_actions"]
    _, reward, terminated, _, info = env.step(target)
    assert terminated and info["won"] and reward == 10.0
    env.reset(seed=3)
    _, reward, *_ = env.step("piano")
    assert reward == pytest.approx(-0.1)


def test_warmup_teacher_reads_the_envs_actions_in_any_prompt_style() -> None:
    """The warm-up's replies come from the env, not the prompt's text: a compact-prompt start
    once learnt to reply nothing because the teacher looked for the full layout's listing."""
    register()
    env = gym.make(ENV_ID)
    _, info = env.reset(seed=1)
    teach = warmup_teacher(0)
    replies = [teach(env) for _ in range(40)]
    picked = {r.removeprefix("<action> ").removesuffix("</action>") for r in replies}
    assert picked <= set(info["admissible_actions"]) and len(picked) > 2
    expert = env.unwrapped.expert_action()
    assert warmup_teacher(0, expert_share=1.0)(env) == f"<action> {expert}</action>"
    half = [warmup_teacher(s, expert_share=0.5)(env) for s in range(200)]
    assert 0.5 < half.count(f"<action> {expert}</action>") / 200 < 0.75  # 0.5 + 0.5 / 5

    class NoActions:
        def get_wrapper_attr(self, name: str) -> list[str]:
            return []

    with pytest.raises(lc.ExperimentError, match="lists none"):
        warmup_teacher(0)(NoActions())


def test_a_warmup_that_leaves_no_valid_replies_is_refused(tmp_path, lucky_env_id) -> None:
    """One warm-up step cannot teach the reply format: the start is refused, not used."""
    config = experiment(lucky_env_id, warmup={"steps": 1, "batch_size": 4, "episodes": 8})
    with pytest.raises(lc.ExperimentError, match="has not learnt the reply format"):
        run_grid(config, tmp_path / "out", log=lambda _: None)
    assert not (tmp_path / "out" / lc.START_DIR).exists()


# ---------------------------------------------------------------------------- learning
@pytest.mark.slow
def test_training_raises_heldout_success_above_the_start(tmp_path, lucky_env_id) -> None:
    """Warm up to valid-but-random, train GRPO a few steps, score held-out by sampling."""
    config = experiment(
        lucky_env_id,
        algorithms=["aem"],
        warmup={"steps": 60, "batch_size": 16, "learning_rate": 0.01, "episodes": 32},
        eval={"every": 6, "episodes": 2},
        train={"max_steps": 6, "per_device_train_batch_size": 16, "num_generations": 8},
    )
    results = run_grid(config, tmp_path / "out", log=lambda _: None)
    [run] = results["runs"]
    heldout = dict(run["curves"]["heldout/success_rate"])
    start, final = heldout[0], heldout[6]
    assert results["start"]["warmup"]["sampled_valid_rate"] > 0.8
    assert final >= max(0.8, start + 0.3), heldout


def test_held_out_passes_and_the_drift_probe_leave_training_as_it_was(
    tmp_path, lucky_env_id
) -> None:
    """Scoring during a run draws on its own random state: a run scored every step, with the
    drift probe every step and a sampled pass, trains exactly as one scored only at its end,
    so runs whose cadences differ remain comparable step by step."""

    def training_rows(name: str, eval_settings: dict) -> list[tuple]:
        config = experiment(
            lucky_env_id,
            algorithms=["aem"],
            warmup={"steps": 60, "batch_size": 16, "learning_rate": 0.01, "episodes": 32},
            eval={"episodes": 2, **eval_settings},
            train={"max_steps": 4, "per_device_train_batch_size": 16, "num_generations": 8},
        )
        run_grid(config, tmp_path / name, log=lambda _: None)
        with (tmp_path / name / lc.RUNS_DIR / "aem-seed0" / "metrics.csv").open() as handle:
            keys = ("step", "reward", "loss", "grad_norm", "episode/valid_rate")
            return [tuple(r[k] for k in keys) for r in csv.DictReader(handle) if r.get("loss")]

    quiet = training_rows("quiet", {"every": 4})
    busy = training_rows(
        "busy",
        {"every": 1, "drift_every": 1, "sampled": {"every": 2, "samples": 2, "temperature": 1.0}},
    )
    assert len(quiet) == 4 and len({row[2] for row in quiet}) > 1  # it trained
    with (tmp_path / "busy" / lc.RUNS_DIR / "aem-seed0" / "metrics.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [int(r["step"]) for r in rows if r.get("heldout/success_rate")] == [0, 1, 2, 3, 4]
    assert [int(r["step"]) for r in rows if r.get("drift/measured")] == [1, 2, 3, 4]
    assert busy == quiet


# ---------------------------------------------------------------------------- the harness
@pytest.mark.parametrize("updates", [1, 2])
def test_a_killed_run_resumes_from_its_checkpoint_and_a_done_run_is_skipped(
    tmp_path, lucky_env_id, updates: int
) -> None:
    """With ``updates`` optimizer steps per rollout batch (PPO mini-batches, the DAPO and
    GSPO arms' setting) the run still lasts, logs, is scored and checkpointed by batches."""
    mini_batches = {"steps_per_generation": updates, "per_device_train_batch_size": 8 // updates}
    sampled = {"sampled": {"every": 2, "samples": 3}}  # each held-out task 3 times, sampled
    config = experiment(lucky_env_id, train=mini_batches, eval=sampled)
    out = tmp_path / "out"
    run_dir = out / lc.RUNS_DIR / "grpo-seed0"

    from transformers import TrainerCallback

    class Kill(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 3 * updates - (updates > 1):  # inside batch 3
                raise KeyboardInterrupt("killed")

    with pytest.raises(KeyboardInterrupt):
        run_grid(config, out, callbacks=[Kill()], log=lambda _: None)
    assert not (run_dir / lc.DONE_MARKER).exists()
    assert [p.name for p in run_dir.glob("checkpoint-*")] == [f"checkpoint-{2 * updates}"]
    [stopped] = [s for s in run_status(config, out) if s.name == "grpo-seed0"]
    assert (stopped.checkpoint, stopped.note) == (2, f"resumes from checkpoint-{2 * updates}")

    resumed: list[str] = []
    results = run_grid(config, out, log=resumed.append)
    last = f"[grpo-seed0] step {4 * updates}/{4 * updates}: reward"  # TRL's optimizer steps
    assert any(line.startswith(last) for line in resumed), resumed
    done = json.loads((run_dir / lc.DONE_MARKER).read_text())
    assert done["resumed_from"] == f"checkpoint-{2 * updates}" and done["global_step"] == 4
    assert done["optimizer_steps"] == 4 * updates
    with (run_dir / "metrics.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    train_steps = [int(r["step"]) for r in rows if r.get("reward")]
    eval_steps = [int(r["step"]) for r in rows if r.get("heldout/success_rate")]
    assert train_steps == [1, 2, 3, 4] and eval_steps == [0, 2, 4]
    sampled_rows = [r for r in rows if r.get("heldout_sampled/success_rate")]
    assert [int(r["step"]) for r in sampled_rows] == [2, 4]  # not at 0, not again on resume
    for row in sampled_rows:  # 2 held-out tasks x 3 samples: a share in sixths
        share = 6 * float(row["heldout_sampled/success_rate"])
        assert share == pytest.approx(round(share)) and float(row["heldout_sampled/turns"]) == 1
    # The drift probe scored every step once, the resumed steps included, each unit once.
    drift_steps = [int(r["step"]) for r in rows if r.get("drift/measured")]
    assert drift_steps == [1, 2, 3, 4]
    units = read_units(run_dir)
    assert sorted({int(u["step"]) for u in units}) == [1, 2, 3, 4]
    assert all(u["entropy"] >= 0.0 and u["entropy_after"] >= 0.0 for u in units)
    assert results["runs"][0]["status"] == "done"
    files = sorted(p.name for p in run_dir.iterdir())
    assert files == ["done.json", "final", "metrics.csv", "sessions.json", "units.csv.gz"]
    sessions = json.loads((run_dir / "sessions.json").read_text())
    assert len(sessions) == 2  # the killed process's and the one that finished the run
    final = run_dir / "final"  # the trained weights outlive the checkpoints
    assert (final / "model.safetensors").is_file() and (final / "aem-prompt.json").is_file()

    marker = (run_dir / lc.DONE_MARKER).read_text()
    logged: list[str] = []
    run_grid(config, out, log=logged.append)
    assert any("done already, skipped" in line for line in logged)
    assert (run_dir / lc.DONE_MARKER).read_text() == marker


def test_a_run_resumed_off_the_held_out_cadence_scores_no_extra_pass(
    tmp_path, lucky_env_id
) -> None:
    """Checkpointed every step, killed in step 4, resumed from checkpoint-3: the held-out
    passes stay at the cadence's steps (0, 2, 4), as they are for a run never killed."""
    config = experiment(lucky_env_id, train={"save_steps": 1})
    out = tmp_path / "out"

    from transformers import TrainerCallback

    class Kill(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 4:  # before step 4's checkpoint is written
                raise KeyboardInterrupt("killed")

    with pytest.raises(KeyboardInterrupt):
        run_grid(config, out, callbacks=[Kill()], log=lambda _: None)
    run_dir = out / lc.RUNS_DIR / "grpo-seed0"
    assert sorted(p.name for p in run_dir.glob("checkpoint-*"))[-1] == "checkpoint-3"
    run_grid(config, out, log=lambda _: None)
    with (run_dir / "metrics.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [int(r["step"]) for r in rows if r.get("heldout/success_rate")] == [0, 2, 4]


def test_a_run_carried_to_a_fresh_machine_resumes_where_it_stopped(tmp_path, lucky_env_id) -> None:
    """Killed after its checkpoint-3, the run's newest checkpoint is carried; a copy of the
    grid without any ``checkpoint-*`` (what a fresh clone holds) resumes from the carried one
    and trains steps 4-5 exactly as the run never killed did."""
    config = experiment(lucky_env_id, train={"save_steps": 1, "max_steps": 5})
    training = ("step", "reward", "loss", "grad_norm", "episode/valid_rate")

    def training_rows(out: Path) -> list[tuple]:
        with (out / lc.RUNS_DIR / "grpo-seed0" / "metrics.csv").open() as handle:
            return [tuple(r[k] for k in training) for r in csv.DictReader(handle) if r.get("loss")]

    whole = tmp_path / "whole"
    run_grid(config, whole, log=lambda _: None)

    from transformers import TrainerCallback

    class Kill(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 4:  # before step 4's checkpoint is written
                raise KeyboardInterrupt("killed")

    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        run_grid(config, out, callbacks=[Kill()], log=lambda _: None)
    assert carry(out) == ["grpo-seed0: carries checkpoint-3"]
    assert carry(out) == ["grpo-seed0: carries checkpoint-3 already"]
    run_dir = out / lc.RUNS_DIR / "grpo-seed0"
    carried = run_dir / CARRIED_DIR / "checkpoint-3"
    for file in (run_dir / "checkpoint-3").iterdir():
        assert (carried / file.name).read_bytes() == file.read_bytes(), file.name

    def uncommitted(folder: str, names: list[str]) -> list[str]:  # as .gitignore says
        return [
            n for n in names if n.startswith("checkpoint-") and Path(folder).name != CARRIED_DIR
        ]

    fresh = tmp_path / "fresh"  # what git holds: no checkpoint-* folders but the carried one
    shutil.copytree(out, fresh, ignore=uncommitted)
    [stopped] = run_status(config, fresh)
    assert (stopped.checkpoint, stopped.note) == (3, "resumes from carried/checkpoint-3")
    logged: list[str] = []
    run_grid(config, fresh, log=logged.append)
    assert "[grpo-seed0] restored checkpoint-3 from carried/" in logged
    fresh_run = fresh / lc.RUNS_DIR / "grpo-seed0"
    assert json.loads((fresh_run / lc.DONE_MARKER).read_text())["resumed_from"] == "checkpoint-3"
    assert not (fresh_run / CARRIED_DIR).exists()  # a finished run carries nothing
    assert training_rows(fresh) == training_rows(whole)
    assert [row[0] for row in training_rows(fresh)] == ["1", "2", "3", "4", "5"]


def test_the_drift_probe_scores_only_every_drift_every_steps(tmp_path, lucky_env_id) -> None:
    config = experiment(  # warmed up to valid replies, so that some turns win
        lucky_env_id,
        eval={"drift_every": 2},
        warmup={"steps": 60, "batch_size": 16, "learning_rate": 0.01, "episodes": 32},
    )
    out = tmp_path / "out"
    run_grid(config, out, log=lambda _: None)
    run_dir = out / lc.RUNS_DIR / "grpo-seed0"
    with (run_dir / "metrics.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [int(r["step"]) for r in rows if r.get("drift/measured")] == [2, 4]
    units = read_units(run_dir)
    assert sorted({int(u["step"]) for u in units}) == [2, 4]
    # each unit row carries its own turn's reward and command: "green" wins, the other doors
    # are accepted without a reward, anything else is penalised
    assert {u["reward"] for u in units} <= {10.0, 0.0, -0.1}  # the paper's rewards
    by_reward = {r: {u["command"] for u in units if u["reward"] == r} for r in (10.0, 0.0)}
    assert by_reward[10.0] <= {"green"} and by_reward[0.0] <= {"red", "blue"}
    assert by_reward[10.0] | by_reward[0.0]  # the warm-up made some replies valid


def fake_run(out: Path, name: str, heldout: list[tuple[int, float]], *, done: bool) -> None:
    run_dir = out / lc.RUNS_DIR / name
    run_dir.mkdir(parents=True)
    lines = ["step,heldout/success_rate,reward,aem/entropy_mean,aem/alpha_min,aem/alpha_max"]
    lines += [f"{s},{v},,,," for s, v in heldout]
    lines += [f"{s},,{s},{1 - s / 10},0.5,1.5" for s in range(1, 11)]
    (run_dir / "metrics.csv").write_text("\n".join(lines) + "\n")
    if done:
        (run_dir / lc.DONE_MARKER).write_text(json.dumps({"global_step": 10}))


def test_results_json_drives_the_report_and_report_only_regenerates_it(tmp_path, capsys) -> None:
    config = experiment("aemtest/Unused-v0", algorithms=["grpo", "aem"], seeds=[0, 1])
    yaml_file = tmp_path / "exp.yaml"
    yaml_file.write_text(json.dumps(json.loads(json.dumps(config.to_dict())) | {}))
    out = tmp_path / "out"
    fake_run(out, "grpo-seed0", [(0, 0.2), (10, 0.4)], done=True)
    fake_run(out, "grpo-seed1", [(0, 0.2), (10, 0.6)], done=True)
    fake_run(out, "aem-seed0", [(0, 0.2), (10, 0.8)], done=True)
    fake_run(out, "aem-seed1", [(0, 0.2)], done=False)
    results = write_results(out, config)
    by_algo = {row["algo"]: row for row in results["summary"]}
    assert by_algo["grpo"]["final_heldout_success_mean"] == pytest.approx(0.5)
    assert by_algo["grpo"]["final_heldout_success_std"] == pytest.approx(0.1414, abs=1e-3)
    assert by_algo["aem"]["per_seed"] == {"0": 0.8}
    assert [r["status"] for r in results["runs"]] == ["done", "done", "done", "partial"]
    table = final_table(results)
    assert "| GRPO | 50.0 ± 14.1 | 0: 40.0, 1: 60.0 | 2/2 |" in table
    assert "| AEM | 80.0 ± 0.0 | 0: 80.0 | 1/2 |" in table

    # The report comes from results.json alone: delete the runs, regenerate it.
    import shutil

    shutil.rmtree(out / lc.RUNS_DIR)
    (out / "report.md").unlink(missing_ok=True)
    yaml_file.write_text(
        "name: t\nalgorithms: [grpo, aem]\nseeds: [0, 1]\nenv: {id: aemtest/Unused-v0}\n"
    )
    code = main(["bench", "learning", str(yaml_file), "--out", str(out), "--report-only"])
    assert code == 0
    assert "| GRPO | 50.0 ± 14.1 |" in capsys.readouterr().out
    report = (out / "report.md").read_text()
    assert "| GRPO | 50.0 ± 14.1 |" in report and "plots/curves.png" in report
    assert (out / "plots" / "curves.png").stat().st_size > 1000
    assert (out / "table.md").read_text() == table


def test_a_start_whose_weights_were_not_committed_is_refused_before_any_run(
    tmp_path, lucky_env_id
) -> None:
    out = tmp_path / "out"
    (out / lc.START_DIR).mkdir(parents=True)  # what a clone holds of a start kept as start.json
    (out / lc.START_DIR / lc.START_MARKER).write_text(json.dumps({"heldout_success": 0.25}))
    with pytest.raises(lc.ExperimentError, match=r"not the model it describes.*move .* away"):
        run_grid(experiment(lucky_env_id), out, log=lambda _: None)
    assert not (out / lc.RUNS_DIR).exists()


def test_a_start_from_a_local_model_copies_the_model_not_its_checkpoints(
    tmp_path, lucky_env_id
) -> None:
    """The grid's start/ is committed (the small agent's): the SFT run's own checkpoints,
    saved beside its model, are training state that would triple it."""
    first = tmp_path / "first"
    run_grid(experiment(lucky_env_id, train={"max_steps": 1}), first, log=lambda _: None)
    model = first / lc.START_DIR
    (model / "checkpoint-7").mkdir()
    (model / "checkpoint-7" / "optimizer.pt").write_bytes(b"moments")
    (model / "README.md").write_text("TRL's model card")
    (model / lc.START_MARKER).unlink()  # a model folder, as `aem sft` leaves one
    config = dataclasses.replace(
        experiment(lucky_env_id, train={"max_steps": 1}), model={"path": str(model)}
    )
    run_grid(config, tmp_path / "second", log=lambda _: None)
    start = tmp_path / "second" / lc.START_DIR
    assert (start / "model.safetensors").is_file() and (start / lc.START_MARKER).is_file()
    assert not list(start.glob("checkpoint-*")) and not (start / "README.md").exists()


def test_a_grid_spread_over_processes_trains_only_the_runs_named(tmp_path, lucky_env_id) -> None:
    config = experiment(lucky_env_id, algorithms=["grpo", "aem"], train={"max_steps": 1})
    out = tmp_path / "out"
    with pytest.raises(lc.ExperimentError, match=r"ppo-seed0.*not in the grid.*aem-seed0"):
        run_grid(config, out, only=["ppo-seed0"], log=lambda _: None)
    assert not out.exists()  # refused before anything was built
    results = run_grid(config, out, only=["aem-seed0"], log=lambda _: None)
    assert sorted(p.name for p in (out / lc.RUNS_DIR).iterdir()) == ["aem-seed0"]
    assert [r["status"] for r in results["runs"] if r["name"] == "aem-seed0"] == ["done"]


def test_heldout_tasks_are_the_suites_games() -> None:
    """``eval.tasks: N`` scores the games a suite's ``tasks: N`` plays, reset as it resets."""
    from benchmarks.learning.heldout import heldout_specs
    from benchmarks.suite import load_suite

    [entry] = load_suite("benchmarks/suites/aem-ref.yaml").envs
    config = lc.load_config("benchmarks/learning/configs/alfworld-sft.yaml")  # eval.tasks: 24
    assert config.eval_spread and config.eval_episodes == entry.tasks == 24
    specs = heldout_specs(config)
    env = gym.make("aem_envs:aem/ALFWorld-v0").unwrapped
    assert [s.task_id for s in specs] == entry.select(env.task_ids("valid_unseen"))
    _, info = env.reset(seed=specs[5].seed, options=specs[5].reset_options())
    assert info["task_id"] == specs[5].task_id
    with pytest.raises(lc.ExperimentError, match=r"eval\.tasks and eval\.episodes"):
        experiment("x/Y-v0", eval={"tasks": 3})  # the helper's eval has episodes


def test_more_heldout_episodes_than_the_split_holds_is_refused(lucky_env_id) -> None:
    """A report must not name more held-out tasks than were scored (LuckyDoor's test: 2)."""
    from benchmarks.learning.heldout import heldout_specs

    config = experiment(lucky_env_id, eval={"episodes": 2})
    assert len(heldout_specs(config)) == 2
    for spread in (False, True):
        too_many = dataclasses.replace(config, eval_episodes=3, eval_spread=spread)
        key = "tasks" if spread else "episodes"
        with pytest.raises(lc.ExperimentError, match=rf"eval\.{key}=3.* has 2 tasks"):
            heldout_specs(too_many)


def test_bad_configs_name_the_problem() -> None:
    for sampled, message in [
        ({"every": 5}, r"needs \['samples'\]"),
        ({"every": 5, "samples": 10, "temperature": 0}, "temperature above 0"),
        ({"every": 5, "samples": 10, "seeds": 2}, "unknown eval.sampled key"),
    ]:
        with pytest.raises(lc.ExperimentError, match=message):
            experiment("x/Y-v0", eval={"sampled": sampled})
    with pytest.raises(lc.ExperimentError, match="drift_every must be at least 1"):
        experiment("x/Y-v0", eval={"drift_every": 0})
    with pytest.raises(lc.ExperimentError, match="set by the harness"):
        experiment("x/Y-v0", train={"seed": 3})
    with pytest.raises(lc.ExperimentError, match="held-out"):
        experiment("x/Y-v0", env={"id": "x/Y-v0", "train_split": "a", "eval_split": "a"})
    with pytest.raises(lc.ExperimentError, match="algorithms"):
        experiment("x/Y-v0", algorithms=["ppo"])
    with pytest.raises(lc.ExperimentError, match="unknown warmup key"):
        experiment("x/Y-v0", warmup={"step": 10})
    with pytest.raises(lc.ExperimentError, match="expert_share"):
        experiment("x/Y-v0", warmup={"expert_share": 1.5})
