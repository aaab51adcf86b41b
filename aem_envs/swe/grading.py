"""Grading a patch as swebench's harness does, in about a second, and harder to game.

The steps mirror ``swebench.harness.run_evaluation.run_instance``: a fresh container from the
pristine instance image, the model patch applied with swebench's own chain of ``git apply``
attempts falling back to ``patch``, the instance's eval script (which applies the test patch
and runs the tests) from ``make_test_spec``, then ``get_eval_report`` with the instance's log
parser. What differs is the plumbing: the in-container steps run as one script in one
``exec`` instead of one engine round trip each, the container is removed with a kill instead
of swebench's ``docker stop`` with a 15 s grace period, and nothing is written under
``logs/``. What differs in substance is reward integrity (:mod:`aem_envs.swe.integrity`):
the test infrastructure a patch changed is restored before the tests run, patches naming
paths outside the repository or in ``.git`` are refused, and the log parser reads only the
harness's part of the log.

swebench is imported lazily: importing ``swebench.harness`` takes seconds and pulls in
``datasets``; constructing an environment must not pay for it.
"""

from __future__ import annotations

import base64
import dataclasses
import shlex
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from aem_envs.core.errors import require
from aem_envs.swe.integrity import (
    PROTECTED_PATHS,
    RESTORE_SCRIPT,
    harness_log,
    refused_paths,
    spec_test_paths,
)
from aem_envs.swe.tamper import (
    GUARD_MODULE,
    GUARD_SOURCE,
    NONCE_LINE,
    Sentinels,
    findings,
    guard_environment,
    guardable,
    with_sentinels,
)
from aem_envs.swe.tasks import SWEInstance
from sandboxes.errors import InfraError

#: Where the grading files go inside the evaluation container: a fresh directory made there
#: (``mktemp``), not under /tmp, which the Docker backend mounts as a tmpfs that
#: ``put_archive`` cannot write into, and not a fixed name a patch could aim at.
WORK_TEMPLATE = "/var/tmp/aem-grade.XXXXXXXX"
RUNNER_PATH = "/var/tmp/aem-evaluate.sh"
#: Scripts up to this size travel inside the exec call itself (one argument of ``bash -c``,
#: well under Linux's 128 KiB per-argument limit), saving the upload's round trips.
INLINE_SCRIPT_CHARS = 96 * 1024
#: Characters of evaluation log kept; the test summary must never be clipped away.
LOG_CHARS = 8_000_000
DEFAULT_EVAL_TIMEOUT = 600.0


@dataclass(frozen=True)
class Grade:
    """What grading a patch found.

    ``score`` is the fraction of FAIL_TO_PASS tests that pass, and 0 when any PASS_TO_PASS
    test broke (or the patch did not apply, or the tests did not run): partial credit only
    for progress that did not cost a regression. ``resolved`` is swebench's verdict, unless
    ``tampered`` lists evidence of forged results (:mod:`aem_envs.swe.tamper`): then the
    grade is not resolved and scores 0.
    """

    resolved: bool
    score: float
    report: dict[str, Any]
    log: str = field(repr=False)
    seconds: float = 0.0
    tampered: tuple[str, ...] = ()


def swebench_modules() -> tuple[ModuleType, ModuleType, ModuleType, ModuleType]:
    """swebench's utils, grading, constants and run_evaluation modules (imported lazily)."""
    feature = "grading SWE-bench tasks"
    return (
        require("swe", "swebench.harness.utils", feature=feature),
        require("swe", "swebench.harness.grading", feature=feature),
        require("swe", "swebench.harness.constants", feature=feature),
        require("swe", "swebench.harness.run_evaluation", feature=feature),
    )


def make_test_spec(instance: SWEInstance, image: str) -> Any:
    utils, _, _, _ = swebench_modules()
    return utils.make_test_spec(instance.spec_fields(image))


def uses_pytest(test_spec: Any) -> bool:
    """Whether the instance's log parser reads pytest's output (then the guard applies)."""
    return str(test_spec.log_parser).startswith("parse_log_pytest")


def grade_log(
    instance: SWEInstance,
    test_spec: Any,
    patch: str | None,
    log: str,
    sentinels: Sentinels | None = None,
) -> Grade:
    """Grade an evaluation log with swebench's ``get_eval_report``.

    swebench reads only :func:`~aem_envs.swe.integrity.harness_log`'s part of ``log``: the
    marked test region (cut after pytest's summary for pytest parsers) and the harness's own
    marker lines; ``Grade.log`` keeps the whole log for reading. With ``sentinels`` the run
    had them and the guard plugin: any tamper evidence (:func:`~aem_envs.swe.tamper.findings`)
    makes the grade not resolved.
    """
    _, grading, constants, _ = swebench_modules()
    prediction = {
        "instance_id": instance.instance_id,
        "model_name_or_path": "aem",
        "model_patch": patch,
    }
    with tempfile.TemporaryDirectory(prefix="aem-swe-log-") as tmp:
        log_path = Path(tmp) / "test_output.txt"
        log_path.write_text(
            harness_log(log, pytest_output=uses_pytest(test_spec)), encoding="utf-8"
        )
        report = grading.get_eval_report(
            test_spec=test_spec,
            prediction=prediction,
            test_log_path=str(log_path),
            include_tests_status=True,
        )[instance.instance_id]
        tampered: list[str] = []
        if sentinels is not None:
            status, ran = grading.get_logs_eval(test_spec, str(log_path))
            tampered = findings(log, status, sentinels, tests_ran=ran)
    if tampered:
        report = {**report, "resolved": False, "tampered": tampered}
        return Grade(False, 0.0, report, log, tampered=tuple(tampered))
    return Grade(bool(report["resolved"]), score_of(report, constants), report, log)


def score_of(report: dict[str, Any], constants: ModuleType) -> float:
    """Fraction of FAIL_TO_PASS passing, 0 unless every PASS_TO_PASS test held."""
    if report.get("resolved"):
        return 1.0
    status = report.get("tests_status")
    if not status:
        return 0.0
    f2p, p2p = status[constants.FAIL_TO_PASS], status[constants.PASS_TO_PASS]
    if p2p["failure"]:
        return 0.0
    total = len(f2p["success"]) + len(f2p["failure"])
    return len(f2p["success"]) / total if total else 0.0


def _upload(path: str, content: str | bytes, *, append: bool = False) -> list[str]:
    """Bash lines writing ``content`` to ``path`` (base64, so no content can end a heredoc)."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    encoded = base64.b64encode(data).decode("ascii")
    redirect = ">>" if append else ">"
    return [f"base64 -d {redirect} {path} <<'EOF_AEM_BASE64'", encoded, "EOF_AEM_BASE64"]


def evaluation_script(
    instance: SWEInstance, test_spec: Any, patch: str, sentinels: Sentinels | None = None
) -> str:
    """One bash script doing all of ``run_instance``'s work inside the container, and more.

    It lists the pristine image's untracked files, writes the model patch, tries swebench's
    ``GIT_APPLY_CMDS`` in order — restoring a pristine tree between attempts, as
    ``run_instance`` does — then checks whether the patch is already applied. It prints the
    markers ``run_instance`` writes into its logs (``>>>>> Applied Patch``,
    ``>>>>> Patch Apply Failed``), so ``get_logs_eval`` draws the same conclusions. Then,
    unlike swebench, it runs ``restore.sh``: the changed paths that belong to the test
    infrastructure go back to the base commit (see :mod:`aem_envs.swe.integrity`). Only then
    is the eval script written (so the patch never saw it) and run. Why one script: every
    round trip to the engine costs a ``docker exec``; one upload and one exec keep an
    evaluation near a second. An empty patch is not applied (``git apply`` rejects empty
    input); the tests then run on the pristine tree.

    With ``sentinels`` (see :mod:`aem_envs.swe.tamper`) the script first prints a fresh
    nonce, leaves it for the guard plugin in a file, makes pytest load the guard, and
    appends the sentinel tests to their file just before the tests start.
    """
    _, _, constants, run_eval = swebench_modules()
    base = shlex.quote(str(instance.data["base_commit"]))
    spec = "\0".join(spec_test_paths(str(instance.data["test_patch"]), instance.test_ids))
    lines = ["#!/bin/bash"]
    eval_script = test_spec.eval_script
    if sentinels is not None:
        lines.append(
            f"nonce=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \\n'); echo \"{NONCE_LINE}$nonce\""
        )
    lines += [
        f"work=$(mktemp -d {WORK_TEMPLATE}) || exit 1",
        'git ls-files --others -z > "$work/pristine"',
        *_upload('"$work/restore.sh"', RESTORE_SCRIPT.read_text()),
        *_upload('"$work/spec"', spec),
    ]
    if patch.strip():
        lines += _upload('"$work/patch.diff"', patch if patch.endswith("\n") else patch + "\n")
        lines.append("applied=0")
        for attempt, command in enumerate(run_eval.GIT_APPLY_CMDS):
            reset = "git checkout -- . ; git clean -fdq; " if attempt else ""
            lines.append(
                f'if [ $applied = 0 ]; then {reset}if {command} "$work/patch.diff"; then '
                f'applied=1; echo "{constants.APPLY_PATCH_PASS}"; fi; fi'
            )
        lines += [
            'if [ $applied = 0 ] && git apply --check --reverse "$work/patch.diff"; then '
            f'applied=1; echo "{constants.APPLY_PATCH_PASS}: verified already applied"; fi',
            f'if [ $applied = 0 ]; then echo "{constants.APPLY_PATCH_FAIL}"; exit 1; fi',
        ]
    lines += [
        f'bash "$work/restore.sh" {base} "$work/pristine" "$work/spec" '
        f"{shlex.quote(PROTECTED_PATHS)} || "
        f'{{ echo "{constants.RESET_FAILED}: the test files could not be restored"; exit 1; }}',
    ]
    if sentinels is not None:
        appended = _upload(shlex.quote(sentinels.path), sentinels.source, append=True)
        eval_script = with_sentinels(eval_script, appended)
        lines += [
            'printf \'%s\\n\' "$nonce" > "$work/nonce"; unset nonce; mkdir "$work/guard"',
            *_upload(f'"$work/guard/{GUARD_MODULE}.py"', GUARD_SOURCE.read_text()),
            guard_environment("$work"),
        ]
    lines += [
        *_upload('"$work/eval.sh"', eval_script),
        'exec /bin/bash "$work/eval.sh"',
    ]
    return "\n".join(lines) + "\n"


def run_evaluation(
    sandbox: Any,
    instance: SWEInstance,
    test_spec: Any,
    patch: str,
    timeout: float,
    sentinels: Sentinels | None = None,
) -> str:
    """Apply ``patch`` and run the eval script in ``sandbox``; return the log swebench reads.

    Grading that runs out of time is an :class:`~sandboxes.errors.InfraError` (``timeout``),
    reported apart from the agent's failures.
    """
    script = evaluation_script(instance, test_spec, patch, sentinels)
    if len(script) <= INLINE_SCRIPT_CHARS:
        result = sandbox.exec(script, timeout)
    else:
        sandbox.write_file(RUNNER_PATH, script)
        result = sandbox.exec(f"/bin/bash {RUNNER_PATH}", timeout)
    if result.timed_out:
        raise InfraError("timeout", f"grading ran past its {timeout:g} s limit")
    return result.output


def evaluate(
    instance: SWEInstance,
    patch: str,
    image: str,
    *,
    backend: str = "auto",
    timeout: float = DEFAULT_EVAL_TIMEOUT,
    limits: Any = None,
    tamper_guard: bool = True,
) -> Grade:
    """Grade ``patch`` on ``instance`` in a fresh sandbox from ``image``; the sandbox is removed.

    ``limits`` (a :class:`sandboxes.Limits`) bounds the grading sandbox the way it bounded
    the episode's (memory, CPUs, processes, file size); its command timeout becomes
    ``timeout`` and its output cap the full log, because the test summary must be read whole.
    ``tamper_guard``: add the sentinel tests and the guard plugin to a pytest run
    (:mod:`aem_envs.swe.tamper`); off, grading is blind to results forged in-process.
    """
    from sandboxes import Limits, open_sandbox

    _, _, constants, _ = swebench_modules()
    start = time.perf_counter()
    test_spec = make_test_spec(instance, image)
    guard = tamper_guard and uses_pytest(test_spec) and guardable(test_spec.eval_script)
    sentinels = Sentinels.draw(instance.test_ids) if guard else None
    refused = refused_paths(patch)
    if refused:
        log = (
            f"{constants.APPLY_PATCH_FAIL}: the patch names paths outside the repository or "
            f"inside .git: {', '.join(refused)}\n"
        )
    else:
        grading = dataclasses.replace(
            limits or Limits(), output_chars=LOG_CHARS, command_timeout=timeout
        )
        with open_sandbox(image, backend=backend, limits=grading) as sandbox:
            log = run_evaluation(sandbox, instance, test_spec, patch, timeout, sentinels)
    grade = grade_log(instance, test_spec, patch, log, sentinels)
    return dataclasses.replace(grade, seconds=time.perf_counter() - start)
