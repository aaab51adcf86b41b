"""The runner: planning, process and batched play, trajectories, resume, per-episode errors."""

from __future__ import annotations

import json

import pytest

from aem_envs.core.errors import AEMError
from benchmarks.episodes import read_record
from benchmarks.runner import PolicySource, Progress, plan, policy_source, run_bench
from benchmarks.suite import Suite, parse_suite
from tests.benchmarks.toy import ENV, BatchingExpert, always_inc


def counter_suite(**entry) -> Suite:
    entry = {"env": ENV, "split": "eval", **entry}
    return parse_suite({"name": "toy", "seeds": [0, 1], "envs": [entry]})


def test_plan_covers_tasks_seeds_and_policies_with_model_step_limits() -> None:
    suite = counter_suite(tasks=3, max_steps=10, model_max_steps=6)
    sources = [policy_source("expert"), PolicySource("m", BatchingExpert, model=True)]
    jobs = plan(suite, sources)
    assert len(jobs) == 3 * 2 * 2
    assert {j.task_id for j in jobs} == {"eval-0", "eval-2", "eval-4"}
    assert {j.env_kwargs["max_steps"] for j in jobs if j.policy == "expert"} == {10}
    assert {j.env_kwargs["max_steps"] for j in jobs if j.policy == "m"} == {6}
    assert len({j.key for j in jobs}) == len(jobs)
    assert len(plan(suite, sources, limit=1)) == 1 * 2 * 2


def test_expert_in_worker_processes_wins_every_episode_and_saves_trajectories(tmp_path) -> None:
    run = run_bench(counter_suite(), [policy_source("expert")], tmp_path, workers=2, progress=False)
    assert run.played == 12 and run.skipped == 0 and not run.errors
    assert len(run.records) == 12
    assert all(r["won"] and r["score"] == 1.0 for r in run.records)
    record = run.records[0]
    rows = [json.loads(line) for line in (tmp_path / record["trajectory"]).open()]
    assert rows[0]["kind"] == "episode" and rows[0]["task_id"] == record["task_id"]
    steps = [r for r in rows if r["kind"] == "step"]
    assert len(steps) == record["steps"] == abs(int(rows[0]["info"]["instruction"].split()[-1]))
    assert steps[0]["action"] in ("inc", "dec") and "<action>" in steps[0]["reply"]
    assert {"prompt_tokens", "completion_tokens"} <= set(steps[0])
    end = rows[-1]
    assert end["kind"] == "end" and end["finished"] and end["record"] == record
    assert end["length"] == record["steps"] and end["won"] and end["return"] == record["return"]
    job = next(j for j in run.jobs if j.key == record["key"])
    assert tmp_path / record["trajectory"] == job.path(tmp_path)  # where resume looks


def test_rerun_skips_finished_episodes_and_no_resume_replays(tmp_path) -> None:
    suite = counter_suite(tasks=2)
    first = run_bench(suite, [policy_source("expert")], tmp_path, workers=1, progress=False)
    stamps = {r["key"]: (tmp_path / r["trajectory"]).stat().st_mtime_ns for r in first.records}
    again = run_bench(suite, [policy_source("expert")], tmp_path, workers=1, progress=False)
    assert again.played == 0 and again.skipped == 4 and len(again.records) == 4
    assert stamps == {
        r["key"]: (tmp_path / r["trajectory"]).stat().st_mtime_ns for r in again.records
    }
    replay = run_bench(
        suite, [policy_source("expert")], tmp_path, workers=1, resume=False, progress=False
    )
    assert replay.played == 4 and replay.skipped == 0


def test_model_policy_is_built_once_batches_episodes_and_counts_tokens(tmp_path) -> None:
    policy = BatchingExpert()
    built = []

    def factory() -> BatchingExpert:
        built.append(1)
        return policy

    suite = counter_suite(model_max_steps=8)
    source = PolicySource("m", factory, model=True)
    run = run_bench(suite, [source], tmp_path, workers=1, batch_size=4, progress=False)
    assert built == [1] and policy.closed
    assert max(policy.batch_sizes) == 4 and sum(policy.batch_sizes) == sum(
        r["steps"] for r in run.records
    )
    by_task = {(r["task_id"], r["seed"]): r for r in run.records}
    down = by_task[("eval-1", 0)]  # target -2: one reply without an action, then two steps
    assert down["won"] and down["steps"] == 3 and down["invalid_actions"] == 1
    assert down["prompt_tokens"] == 30 and down["completion_tokens"] == 9
    assert by_task[("eval-0", 0)]["invalid_actions"] == 0
    assert all(r["policy_time_s"] >= 0 and r["wall_time_s"] > 0 for r in run.records)


def test_losing_policy_is_recorded_as_lost_at_the_step_limit(tmp_path) -> None:
    suite = counter_suite(tasks=2, max_steps=5)
    run = run_bench(suite, [PolicySource("inc", always_inc, False)], tmp_path, progress=False)
    outcome = {r["task_id"]: r for r in run.records if r["seed"] == 0}
    assert outcome["eval-0"]["won"] and outcome["eval-0"]["steps"] == 3
    assert not outcome["eval-3"]["won"] and outcome["eval-3"]["truncated"]
    assert outcome["eval-3"]["steps"] == 5


def test_a_crashing_episode_is_recorded_and_retried_not_fatal(tmp_path) -> None:
    suite = counter_suite(tasks=2, kwargs={"crash_task": "eval-3"})
    run = run_bench(suite, [policy_source("expert")], tmp_path, workers=2, progress=False)
    assert len(run.records) == 2 and len(run.errors) == 2
    assert all("the engine crashed" in e["error"] for e in run.errors)
    crashed = [j for j in run.jobs if j.task_id == "eval-3"]
    assert all(j.path(tmp_path).exists() and read_record(j.path(tmp_path)) is None for j in crashed)
    again = run_bench(suite, [policy_source("expert")], tmp_path, workers=1, progress=False)
    assert again.played == 2 and again.skipped == 2


def test_a_policy_answering_the_wrong_number_of_inputs_stops_the_run(tmp_path) -> None:
    class Mute(BatchingExpert):
        def act(self, inputs):
            return []

    with pytest.raises(AEMError, match="returned 0 replies for 2 inputs"):
        run_bench(counter_suite(tasks=1), [PolicySource("mute", Mute, True)], tmp_path)


def test_unknown_split_and_bad_worker_count_are_one_line_errors(tmp_path) -> None:
    with pytest.raises(AEMError, match="has no split 'nope'"):
        plan(counter_suite(split="nope"), [policy_source("expert")])
    with pytest.raises(AEMError, match=r"cannot make 'aemtest/Nope-v0'.*aem envs"):
        plan(counter_suite(env="aemtest/Nope-v0"), [policy_source("expert")])
    with pytest.raises(AEMError, match="--workers and --batch-size must be at least 1"):
        run_bench(counter_suite(), [policy_source("expert")], tmp_path, workers=0)


def test_progress_line_shows_running_success_rate_and_failures(capsys) -> None:
    bar = Progress(4, initial=1, enabled=True)
    bar.describe("expert")
    bar.update({"won": True, "error": None})
    bar.update({"won": False, "error": None})
    bar.update({"won": False, "error": "reset failed"})
    bar.close()
    line = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert line.startswith("expert: 100%|") and "4/4" in line
    assert "success 50% failed 1" in line
