"""``aem/SWE-v0``: resolve a repository issue with shell commands and a file editor.

The sandbox (:mod:`sandboxes`) is created on ``reset`` (constructing the env starts nothing),
replaced on the next ``reset``, and removed when the episode ends and on ``close``; grading
(:mod:`~aem_envs.swe.grading`) runs in a fresh sandbox from the pristine image.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from aem_envs.core.base import TextEnv
from aem_envs.core.errors import AEMError, ArgumentError
from aem_envs.core.outcome import Outcome, Task
from aem_envs.core.rewards import RewardScheme
from aem_envs.swe.editor import Editor, EditorRefusal, parse_edit
from aem_envs.swe.expert import expert_plan
from aem_envs.swe.grading import DEFAULT_EVAL_TIMEOUT, Grade, evaluate
from aem_envs.swe.tasks import (
    SWEInstance,
    ensure_image,
    load_instances,
    read_bundled_rows,
    summary,
)
from sandboxes.backends import BACKENDS
from sandboxes.base import Limits
from sandboxes.errors import InfraError, SandboxError, exception_line

WORKDIR = "/testbed"

INSTRUCTIONS = """\
You are in the repository {repo} at {workdir}. Resolve the issue below; then submit.

Actions (one per turn):
  bash: <command>      run a bash command in {workdir} (plain text without a prefix works too)
  edit {{"command": "view", "path": "FILE", "view_range": [1, 50]}}
  edit {{"command": "create", "path": "FILE", "file_text": "..."}}
  edit {{"command": "str_replace", "path": "FILE", "old_str": "...", "new_str": "..."}}
  edit {{"command": "insert", "path": "FILE", "insert_line": 10, "new_str": "..."}}
  submit               grade your changes (the diff of the working tree) and end the episode

Issue:
{problem}"""


class SWEEnv(TextEnv):
    """SWE-bench-style issue resolution in a sandboxed repository.

    ## Description

    An episode is one SWE-bench instance: a repository checked out at ``/testbed`` at its
    base commit and an issue to resolve (the first observation states it and the actions).
    Instances come from the bundled tasks (split ``test``, :mod:`~aem_envs.swe.tasks`) or
    ``dataset``: a json / jsonl / parquet file in swebench's instance format;
    ``bundles_dir``: a folder of ``<owner>__<name>.bundle`` git bundles to build instance
    images from (default for the bundled tasks: the shipped bundles). ``backend``: sandbox
    backend (``auto``, ``docker``, ``bwrap``); ``command_timeout`` and ``output_chars`` bound
    each command; ``eval_timeout`` bounds grading; ``memory`` (Docker syntax, swap included),
    ``cpus`` and ``pids`` bound the episode's sandbox and the grading sandbox alike, so a
    test suite that needs more than the episode allowed fails the same way in both. The
    defaults are :class:`sandboxes.Limits`'s. ``tamper_guard`` (default on) adds sentinel
    tests and a guard plugin to the graded pytest run (:mod:`aem_envs.swe.tamper`). Plus the
    common ``reward_scheme``, ``max_steps`` and ``render_mode``.

    ## Action space

    Text, one action per step (leading/trailing whitespace is ignored):

    - ``submit`` — end the episode; the working tree's diff against the base commit (new
      files included) is graded.
    - ``edit {json}`` — the file editor (:mod:`aem_envs.swe.editor`), e.g.
      ``edit {"command": "view", "path": "pkg/mod.py", "view_range": [1, 40]}``; commands
      ``view``, ``create``, ``str_replace``, ``insert``; paths stay inside ``/testbed``.
    - ``bash: <command>`` or any other text — one bash command run in ``/testbed``
      (multi-line scripts and heredocs work), killed at ``command_timeout`` seconds.

    The space is open: ``info["admissible_actions"]`` is ``None``.

    ## Observation

    Text: at reset the instructions and the issue; after a command or an edit ``exit code:
    N`` and the output, clipped head + tail; after grading the verdict and how many
    FAIL_TO_PASS tests pass.

    ## Rewards

    By the ``reward_scheme`` with ``won`` = swebench's ``resolved`` and ``score`` = the
    fraction of FAIL_TO_PASS tests passing (0 if any PASS_TO_PASS test broke): by default +10
    when resolved, 0 otherwise, and -0.1 per invalid action; ``"native"`` gives the score.
    ``info["report"]`` is swebench's report, ``info["patch"]`` the graded diff,
    ``info["tampered"]`` the evidence of forged test results (a run with any is not
    resolved).

    ## Termination

    ``terminated`` on ``submit``. At ``max_steps`` actions (default 50) the diff is graded
    too: ``terminated`` and ``truncated`` are then both true and the reward is final.

    ## Registered ids

    - ``aem/SWE-v0``
    """

    splits: ClassVar[tuple[str, ...]] = ("test",)
    default_max_steps: ClassVar[int] = 50
    max_action_length: ClassVar[int] = 1 << 16
    max_observation_length: ClassVar[int] = 1 << 15
    action_vocabulary: ClassVar[Sequence[str] | None] = (
        "bash:",
        "ls",
        "cat",
        "grep -rn",
        "python3 -m pytest -q",
        "git diff",
        "edit",
        "submit",
    )

    def __init__(
        self,
        *,
        dataset: str | None = None,
        bundles_dir: str | None = None,
        backend: str = "auto",
        command_timeout: float = Limits.command_timeout,
        eval_timeout: float = DEFAULT_EVAL_TIMEOUT,
        output_chars: int = Limits.output_chars,
        memory: str = Limits.memory,
        cpus: float = Limits.cpus,
        pids: int = Limits.pids,
        tamper_guard: bool = True,
        reward_scheme: RewardScheme | dict[str, Any] | str | None = None,
        max_steps: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(reward_scheme=reward_scheme, max_steps=max_steps, render_mode=render_mode)
        if backend not in BACKENDS:
            raise ValueError(f"backend={backend!r} is unknown; choose one of {list(BACKENDS)}")
        if eval_timeout <= 0:
            raise ValueError(f"eval_timeout={eval_timeout} must be positive")
        try:  # Limits checks the other bounds
            self.limits = Limits(
                memory=memory,
                cpus=float(cpus),
                pids=int(pids),
                command_timeout=float(command_timeout),
                output_chars=int(output_chars),
            )
        except SandboxError as exc:
            raise ArgumentError(f"aem/SWE-v0 limits: {exc}") from None
        self.dataset = dataset
        self.bundles_dir = bundles_dir
        self.backend = backend
        self.eval_timeout = float(eval_timeout)
        self.tamper_guard = bool(tamper_guard)
        self._instances: dict[str, SWEInstance] | None = None
        self._images: dict[str, str] = {}
        self._instance: SWEInstance | None = None
        self._sandbox: Any = None
        self._editor: Editor | None = None
        self._expert_plan: list[str] = []
        self._expert_done = 0
        self._infra_error: dict[str, str] | None = None
        self.last_grade: Grade | None = None

    # ------------------------------------------------------------------ tasks
    @classmethod
    def task_set_summary(cls) -> dict[str, dict[str, int]]:
        return {"test": summary(read_bundled_rows())}

    def instances(self) -> dict[str, SWEInstance]:
        """The instances of this env's dataset, loaded once, by id."""
        if self._instances is None:
            loaded = load_instances(self.dataset, self.bundles_dir)
            self._instances = {item.instance_id: item for item in loaded}
        return self._instances

    def task_ids(self, split: str) -> Sequence[str]:
        return list(self.instances())

    def image_for(self, instance: SWEInstance) -> str:
        """The image of ``instance``: built from its bundle once, or an existing local image."""
        if instance.instance_id not in self._images:
            from sandboxes import ensure_instance_image, image_available
            from sandboxes.backends import resolve_backend

            backend = resolve_backend(self.backend)

            def build(bundle: Path, commit: str) -> str:
                return ensure_instance_image(bundle, commit, backend=backend)

            self._images[instance.instance_id] = ensure_image(
                instance,
                image_exists=lambda tag: image_available(tag, backend=backend),
                build=build,
            )
        return self._images[instance.instance_id]

    # ------------------------------------------------------------------ episode
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        observation, info = super().reset(seed=seed, options=options)
        if self._infra_error is not None:
            info["infra_error"] = self._infra_error
        return observation, info

    def _start(self, task_id: str, split: str) -> tuple[Task, str]:
        self._release()
        instance = self.instances()[task_id]
        self._instance = instance
        self._infra_error = None
        self.last_grade = None
        self._expert_plan = expert_plan(instance.gold_patch)
        self._expert_done = 0
        task = Task(instance.instance_id, instance.repo_name, instance.problem_statement)
        try:
            self._sandbox = self._open_sandbox(instance)
        except SandboxError as exc:
            self._infra_error = _infra_info(exc)
            return task, f"The sandbox could not start: {self._infra_error['message']}"
        self._editor = Editor(self._sandbox, WORKDIR)
        text = INSTRUCTIONS.format(
            repo=instance.repo, workdir=WORKDIR, problem=instance.problem_statement.strip()
        )
        return task, text

    def _open_sandbox(self, instance: SWEInstance) -> Any:
        """The episode's sandbox; an image that cannot be found or built is an infra error."""
        from sandboxes import open_sandbox

        try:
            image = self.image_for(instance)
        except (SandboxError, AEMError) as exc:
            raise InfraError("image", exception_line(exc)) from exc
        return open_sandbox(image, backend=self.backend, limits=self.limits, workdir=WORKDIR)

    def _act(self, action: str) -> Outcome:
        """One action; an infrastructure failure (now, or at reset) ends the episode as such."""
        if self._infra_error is None:
            try:
                return self._act_in_sandbox(action)
            except InfraError as exc:
                self._infra_error = _infra_info(exc)
        self._release()
        return Outcome(
            f"The episode ended on an infrastructure failure ({self._infra_error['kind']}): "
            f"{self._infra_error['message']}",
            infra_error=self._infra_error,
        )

    def _act_in_sandbox(self, action: str) -> Outcome:
        if self._sandbox is None:
            return Outcome("The sandbox is closed; call reset().", valid=False)
        plan, done = self._expert_plan, self._expert_done
        if done < len(plan) and action == plan[done]:
            self._expert_done += 1
        text = action.strip()
        if "\x00" in text or not _encodable(text):
            return Outcome(
                "Invalid action: NUL characters and lone surrogates cannot be sent.", valid=False
            )
        if not text:
            return Outcome(
                "Invalid action: empty. Send a bash command, edit {...} or submit.", valid=False
            )
        if text.lower() == "submit":
            return self._grade("Submitted.")
        if text.startswith("edit ") or text.startswith("edit{") or text == "edit":
            return self._edit(text[4:])
        command = text[5:].strip() if text.startswith("bash:") else text
        if not command:
            return Outcome("Invalid action: 'bash:' needs a command after it.", valid=False)
        try:
            result = self._sandbox.exec(command, self.limits.command_timeout)
        except InfraError:
            raise
        except (AEMError, SandboxError) as exc:
            return Outcome(f"Invalid action: the command could not run: {exc}", valid=False)
        note = f" (killed after {self.limits.command_timeout:g} s)" if result.timed_out else ""
        return Outcome(f"exit code: {result.exit_code}{note}\n{result.output}")

    def _edit(self, payload: str) -> Outcome:
        assert self._editor is not None
        try:
            result = self._editor.run(parse_edit(payload))
        except EditorRefusal as exc:
            return Outcome(f"Invalid action: {exc}", valid=False)
        except InfraError:
            raise
        except (AEMError, SandboxError) as exc:
            return Outcome(f"exit code: 1\n{exc}")
        return Outcome(f"exit code: {0 if result.ok else 1}\n{result.message}")

    def _grade(self, headline: str) -> Outcome:
        assert self._instance is not None and self._sandbox is not None
        instance = self._instance
        try:
            patch = self._sandbox.diff(str(instance.data["base_commit"]))
        finally:
            self._release()
        grade = evaluate(
            instance,
            patch,
            self.image_for(instance),
            backend=self.backend,
            timeout=self.eval_timeout,
            limits=self.limits,
            tamper_guard=self.tamper_guard,
        )
        self.last_grade = grade
        f2p = grade.report.get("tests_status", {}).get("FAIL_TO_PASS", {})
        passed = len(f2p.get("success", []))
        total = passed + len(f2p.get("failure", []))
        verdict = "RESOLVED" if grade.resolved else "NOT RESOLVED"
        if grade.tampered:
            verdict += " (the test results were tampered with)"
        observation = (
            f"{headline} {verdict}: {passed}/{total} FAIL_TO_PASS tests pass, "
            f"score {grade.score:.3f}."
        )
        info = {
            "report": grade.report,
            "patch": patch,
            "eval_seconds": grade.seconds,
            "tampered": list(grade.tampered),
        }
        return Outcome(observation, done=True, won=grade.resolved, score=grade.score, info=info)

    def _grade_at_limit(self) -> Outcome | None:
        if self._sandbox is None:
            return None
        try:
            return self._grade("Step limit reached; the working tree was graded.")
        except InfraError as exc:
            self._release()
            info = _infra_info(exc)
            return Outcome(f"Step limit reached; grading failed ({info['kind']})", infra_error=info)

    def expert_action(self) -> str:
        """Next step of the gold patch applied through the env's own actions, then submit."""
        if self._instance is None:
            raise AEMError("call reset() before asking for the expert action")
        return self._expert_plan[min(self._expert_done, len(self._expert_plan) - 1)]

    # ------------------------------------------------------------------ resources
    def _release(self) -> None:
        if self._sandbox is not None:
            sandbox, self._sandbox, self._editor = self._sandbox, None, None
            sandbox.close()

    def close(self) -> None:
        self._release()
        super().close()


def _infra_info(exc: SandboxError) -> dict[str, str]:
    """``info["infra_error"]``: the failure's kind and its one-line message."""
    kind = exc.kind if isinstance(exc, InfraError) else "sandbox"
    return {"kind": kind, "message": exception_line(exc)}


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
