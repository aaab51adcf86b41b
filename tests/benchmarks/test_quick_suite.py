"""The bundled suites behind the README: the quick suite's rule for choosing tasks, and the
expert winning every task of the quick and smoke suites.

The quick suite is the main job (the README's first command): its table must be a fair
held-out comparison, so what is checked here is the rule, never the agents' results — the
tasks are the split's own ids spread by the same rule every suite uses, no hand-picked ids;
the split is held out of training; every policy gets the same tasks and step limit; the base
model plays in the trained agent's layout. SWE needs a Docker engine, so its smoke entry is
a docker test.
"""

from __future__ import annotations

import pytest

from aem_agent.models.bundled import REFERENCE_DIR
from aem_agent.prompts import read_prompt_layout
from aem_envs.alfworld import ALFWorldEnv
from aem_envs.core.base import TRAIN_SPLIT
from aem_envs.core.errors import AEMError
from aem_envs.registration import entry as registered
from benchmarks.runner import plan, policy_source, run_bench
from benchmarks.suite import Suite, load_suite, spread

QUICK = load_suite("quick")
SMOKE = load_suite("smoke")
MAIN_JOB = ("expert", "smollm2", "aem-ref")


def test_quick_tasks_are_the_held_out_split_spread_by_rule_for_every_policy() -> None:
    (entry,) = QUICK.envs
    assert entry.env_id == "aem/ALFWorld-v0"
    assert entry.split is not None and entry.split != TRAIN_SPLIT
    assert not entry.task_ids, "no hand-picked ids: the rule picks them"
    env = ALFWorldEnv()  # ids repeat across splits (as ALFWorld's do): the split is the key
    try:
        held_out = list(env.task_ids(entry.split))
    finally:
        env.close()
    chosen = spread(held_out, entry.tasks)
    assert {task.split("/")[0] for task in chosen} == {t.split("/")[0] for t in held_out}
    jobs = plan(QUICK, [policy_source(spec, QUICK.kwargs_for(spec)) for spec in MAIN_JOB])
    for spec in MAIN_JOB:
        mine = [job for job in jobs if job.policy == spec]
        assert [job.task_id for job in mine] == chosen
        assert {job.env_kwargs["max_steps"] for job in mine} == {entry.max_steps}


def test_the_base_model_plays_in_the_trained_agents_layout() -> None:
    trained = read_prompt_layout(REFERENCE_DIR)
    base = QUICK.kwargs_for("smollm2")
    assert base["max_new_tokens"] == trained["max_turn_tokens"]
    for key in ("reply_prefix", "history_window", "prompt_style"):
        assert base[key] == trained[key], key
    assert base["temperature"] == QUICK.kwargs_for("aem-ref")["temperature"] == 0


def _only(suite: Suite, env_id: str) -> Suite:
    try:
        registered(env_id)
    except AEMError as exc:
        pytest.skip(str(exc))
    return Suite(suite.name, suite.description, tuple(e for e in suite.envs if e.env_id == env_id))


@pytest.mark.parametrize(
    ("suite", "env_id"),
    [
        (QUICK, "aem/ALFWorld-v0"),
        (SMOKE, "aem/ALFWorld-v0"),
        (SMOKE, "aem/WebShop-v0"),
        pytest.param(SMOKE, "aem/WebShopBrowser-v0", marks=pytest.mark.browser),
        pytest.param(SMOKE, "aem/SWE-v0", marks=[pytest.mark.docker, pytest.mark.slow]),
    ],
    ids=["quick", "smoke-alfworld", "smoke-webshop", "smoke-browser", "smoke-swe"],
)
def test_expert_wins_every_task_within_the_limit(suite, env_id, tmp_path) -> None:
    chosen = _only(suite, env_id)
    run = run_bench(chosen, [policy_source("expert")], tmp_path, workers=2, progress=False)
    assert not run.errors
    assert len(run.records) == chosen.envs[0].tasks
    assert all(r["won"] and r["score"] == 1.0 for r in run.records), [
        (r["task_id"], r["steps"]) for r in run.records if not r["won"]
    ]
