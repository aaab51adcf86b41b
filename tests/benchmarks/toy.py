"""A test-only env and test policies for the harness.

The env is registered under ``aemtest/Counter-v0`` when this module is imported, so suites
name it ``tests.benchmarks.toy:aemtest/Counter-v0`` and worker processes (spawned, with a
fresh registry) register it through ``gym.make``'s module prefix.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import ClassVar

import gymnasium as gym

from aem_agent.policies import Policy, PolicyInput, PolicyOutput
from aem_agent.policies.scripted import ScriptedPolicy
from aem_envs import DataError, Outcome, Task, TextEnv
from aem_envs.policies import ExpertPolicy
from aem_envs.reply import REPLY_FORMAT

COUNTER_ID = "aemtest/Counter-v0"
ENV = f"{__name__}:{COUNTER_ID}"
TARGETS = (3, -2, 4, -3, 2, -4)


class CounterEnv(TextEnv):
    """Move a counter from 0 to a target with ``inc``/``dec``; task types ``up`` and ``down``.

    ``delay`` sleeps in every step so a test can kill a run while episodes are in flight;
    ``crash_task`` makes that task's reset raise, to test per-episode errors.
    """

    splits: ClassVar[tuple[str, ...]] = ("eval", "train")
    default_max_steps: ClassVar[int] = 12

    def __init__(self, delay: float = 0.0, crash_task: str | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.delay = delay
        self.crash_task = crash_task
        self._value = 0
        self._target = 0

    def task_ids(self, split: str) -> Sequence[str]:
        return [f"{split}-{i}" for i in range(len(TARGETS))]

    def _start(self, task_id: str, split: str) -> tuple[Task, str]:
        if task_id == self.crash_task:
            raise DataError("the engine crashed")
        self._target = TARGETS[int(task_id.rsplit("-", 1)[1])]
        self._value = 0
        kind = "up" if self._target > 0 else "down"
        task = Task(task_id, kind, f"bring the counter to {self._target}")
        return task, f"{task.instruction}. The counter shows 0."

    def _admissible(self) -> list[str]:
        return ["inc", "dec"]

    def _act(self, action: str) -> Outcome:
        time.sleep(self.delay)
        if action not in ("inc", "dec"):
            return Outcome("Nothing happens.", valid=False)
        self._value += 1 if action == "inc" else -1
        won = self._value == self._target
        return Outcome(f"The counter shows {self._value}.", done=won, won=won, score=float(won))

    def expert_action(self) -> str:
        return "inc" if self._value < self._target else "dec"


if COUNTER_ID not in gym.registry:
    gym.register(COUNTER_ID, entry_point=CounterEnv)


class BatchingExpert(Policy):
    """A stand-in for a model policy: answers like the expert, counts tokens, logs batches.

    Every other reply of the first turn holds no action tag, so invalid actions are counted.
    """

    name = "batching"

    def __init__(self) -> None:
        self.expert = ScriptedPolicy(ExpertPolicy())
        self.batch_sizes: list[int] = []
        self.closed = False

    def act(self, inputs: Sequence[PolicyInput]) -> list[PolicyOutput]:
        self.batch_sizes.append(len(inputs))
        outputs = []
        for inp, out in zip(inputs, self.expert.act(inputs), strict=True):
            reply = (
                "I am not sure."
                if not inp.history and inp.observation.startswith("bring the counter to -")
                else out.reply
            )
            outputs.append(PolicyOutput(reply, prompt_tokens=10, completion_tokens=3))
        return outputs

    def close(self) -> None:
        self.closed = True


def always_inc() -> Policy:
    """A picklable factory of a policy that only ever increments (fails ``down`` tasks)."""
    return _Constant("inc")


class _Constant(Policy):
    name = "constant"

    def __init__(self, action: str) -> None:
        self.action = action

    def act(self, inputs: Sequence[PolicyInput]) -> list[PolicyOutput]:
        return [PolicyOutput(REPLY_FORMAT.format(self.action, "always")) for _ in inputs]
