"""Grading with swebench's report: scores from logs, and every bundled instance end to end."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from aem_envs.swe import integrity
from aem_envs.swe.grading import evaluate, grade_log, make_test_spec
from aem_envs.swe.tasks import load_instances

INSTANCES = load_instances()
BY_ID = {instance.instance_id: instance for instance in INSTANCES}
SPACED = next(i for i in INSTANCES if any(" " in t for t in i.data["FAIL_TO_PASS"]))


def _log(statuses: dict[str, str], exit_code: int) -> str:
    lines = [f"{status} {test}" for test, status in statuses.items()]
    return "\n".join(
        [
            ">>>>> Applied Patch:",
            "+ : '>>>>> Start Test Output'",
            *lines,
            "============================== 1 passed in 0.01s ==============================",
            f"+ SWEBENCH_TEST_EXIT_CODE={exit_code}",
            "+ : '>>>>> End Test Output'",
            f">>>>> Test Exit Code: {exit_code}",
        ]
    )


def _grade(statuses: dict[str, str], exit_code: int = 1):
    spec = make_test_spec(SPACED, "unused")
    return grade_log(SPACED, spec, "diff", _log(statuses, exit_code))


def test_the_log_markers_integrity_reads_are_swebench_s() -> None:
    """integrity.py spells swebench's markers out (importing swebench costs seconds); a
    swebench release that renamed one must fail here, not silently pass every grade."""
    from swebench.harness import constants

    assert (integrity.START_MARKER, integrity.END_MARKER) == (
        constants.START_TEST_OUTPUT,
        constants.END_TEST_OUTPUT,
    )
    assert set(integrity.FAILURE_MARKERS) == {
        constants.APPLY_PATCH_FAIL,
        constants.RESET_FAILED,
        constants.TESTS_ERROR,
        constants.TESTS_TIMEOUT,
    }
    assert constants.APPLY_PATCH_PASS.startswith(integrity.HARNESS_PREFIX)


def test_all_passing_with_spaces_in_ids_is_resolved():
    tests = SPACED.data["FAIL_TO_PASS"] + SPACED.data["PASS_TO_PASS"]
    grade = _grade(dict.fromkeys(tests, "PASSED"), exit_code=0)
    assert grade.resolved and grade.score == 1.0


def test_partial_fail_to_pass_scores_the_fraction():
    f2p = SPACED.data["FAIL_TO_PASS"]
    statuses = dict.fromkeys(SPACED.data["PASS_TO_PASS"], "PASSED")
    statuses.update({test: ("PASSED" if i else "FAILED") for i, test in enumerate(f2p)})
    grade = _grade(statuses)
    assert not grade.resolved
    assert grade.score == pytest.approx((len(f2p) - 1) / len(f2p))


def test_a_broken_pass_to_pass_test_zeroes_the_score():
    statuses = dict.fromkeys(SPACED.data["FAIL_TO_PASS"], "PASSED")
    statuses.update(dict.fromkeys(SPACED.data["PASS_TO_PASS"], "PASSED"))
    statuses[SPACED.data["PASS_TO_PASS"][0]] = "FAILED"
    grade = _grade(statuses)
    assert not grade.resolved and grade.score == 0.0


def test_patch_that_did_not_apply_is_unresolved():
    spec = make_test_spec(SPACED, "unused")
    grade = grade_log(SPACED, spec, "diff", ">>>>> Patch Apply Failed:\nerror")
    assert not grade.resolved and grade.score == 0.0
    assert grade.report["patch_successfully_applied"] is False


@pytest.fixture(scope="module")
def images():
    from aem_envs.swe.env import SWEEnv

    env = SWEEnv()
    yield {i.instance_id: env.image_for(i) for i in INSTANCES}
    env.close()


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("instance_id", sorted(BY_ID))
def test_gold_resolves_and_empty_does_not(instance_id, images):
    instance = BY_ID[instance_id]
    with ThreadPoolExecutor(2) as pool:  # two fresh containers at once, as a grader would
        gold, empty = pool.map(
            lambda patch: evaluate(instance, patch, images[instance_id]),
            (instance.gold_patch, ""),
        )
    assert gold.resolved and gold.score == 1.0, gold.log[-3000:]
    assert not empty.resolved and empty.score == 0.0
    assert empty.report["tests_status"]["PASS_TO_PASS"]["failure"] == []
    assert len(empty.report["tests_status"]["FAIL_TO_PASS"]["failure"]) == len(
        instance.data["FAIL_TO_PASS"]
    )


@pytest.mark.docker
def test_garbage_patch_does_not_apply(images):
    instance = INSTANCES[0]
    grade = evaluate(
        instance,
        "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n",
        images[instance.instance_id],
    )
    assert not grade.resolved and grade.report["patch_successfully_applied"] is False


@pytest.mark.docker
def test_scripts_too_long_to_inline_are_uploaded(images, monkeypatch):
    from aem_envs.swe import grading

    monkeypatch.setattr(grading, "INLINE_SCRIPT_CHARS", 0)
    instance = INSTANCES[-1]
    assert evaluate(instance, instance.gold_patch, images[instance.instance_id]).resolved
