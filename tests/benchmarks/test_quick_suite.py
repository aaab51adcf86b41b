"""The bundled quick suite with the expert: every task of every in-process env is won.

This is the acceptance check behind the README's first command (the expert rows show 100%).
SWE needs a Docker engine (its tasks run in containers), so its entry is a docker test.
"""

from __future__ import annotations

import pytest

from aem_envs.core.errors import AEMError
from aem_envs.registration import entry as registered
from benchmarks.runner import policy_source, run_bench
from benchmarks.suite import Suite, load_suite

QUICK = load_suite("quick")


def _only(env_id: str) -> Suite:
    try:
        registered(env_id)
    except AEMError as exc:
        pytest.skip(str(exc))
    return Suite(QUICK.name, QUICK.description, tuple(e for e in QUICK.envs if e.env_id == env_id))


@pytest.mark.parametrize(
    "env_id",
    [
        "aem/ALFWorld-v0",
        "aem/WebShop-v0",
        pytest.param("aem/WebShopBrowser-v0", marks=pytest.mark.browser),
        pytest.param("aem/SWE-v0", marks=[pytest.mark.docker, pytest.mark.slow]),
    ],
)
def test_expert_wins_every_quick_task(env_id, tmp_path) -> None:
    suite = _only(env_id)
    run = run_bench(suite, [policy_source("expert")], tmp_path, workers=2, progress=False)
    assert not run.errors
    assert len(run.records) == suite.envs[0].tasks
    assert all(r["won"] and r["score"] == 1.0 for r in run.records), [
        (r["task_id"], r["steps"]) for r in run.records if not r["won"]
    ]
