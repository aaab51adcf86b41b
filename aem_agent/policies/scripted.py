"""The env's expert and the random-admissible agent behind the batch :class:`Policy` interface.

They wrap :mod:`aem_envs.policies` (which act on the live env) and answer in the same
``<think>…</think><action>…</action>`` form a model does, so a harness or a rollout drives
every policy through one reply parser and the parsing path is exercised by the baselines too.
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym

from aem_agent.policies.base import Policy, PolicyInput, PolicyOutput
from aem_agent.prompts import format_reply
from aem_envs import policies as env_policies
from aem_envs.core.errors import AEMError

__all__ = ["ExpertPolicy", "RandomPolicy", "format_reply"]


def _env_of(inp: PolicyInput, policy: str) -> gym.Env:
    if inp.env is None:
        raise AEMError(
            f"the {policy} policy reads the environment itself; pass the live env in "
            f"PolicyInput.env (env id {inp.env_id!r})"
        )
    return inp.env


class ExpertPolicy(Policy):
    """Replies with the env expert's next action (the bundled tasks' known solutions)."""

    name = "expert"

    def __init__(self) -> None:
        self._expert = env_policies.ExpertPolicy()

    def act(self, inputs: Sequence[PolicyInput]) -> list[PolicyOutput]:
        return [
            PolicyOutput(
                format_reply(self._expert.act(_env_of(inp, self.name)), "The expert's next step.")
            )
            for inp in inputs
        ]


class RandomPolicy(Policy):
    """Replies with a uniformly drawn admissible action (a harmless command in open spaces)."""

    name = "random"

    def __init__(self, seed: int | None = None) -> None:
        self._random = env_policies.RandomPolicy(seed=seed)

    def act(self, inputs: Sequence[PolicyInput]) -> list[PolicyOutput]:
        return [
            PolicyOutput(
                format_reply(self._random.act(_env_of(inp, self.name)), "A random admissible step.")
            )
            for inp in inputs
        ]
