"""The env's own agents (:mod:`aem_envs.policies`) behind the batch :class:`Policy` interface.

A scripted policy answers in the reply format a model writes (with the env policy's
``think`` as its think block), so a harness or a rollout drives every policy through one
reply parser and the parsing path is exercised by the baselines too.
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym

from aem_agent.policies.base import Policy, PolicyInput, PolicyOutput
from aem_envs.core.errors import AEMError
from aem_envs.policies import EnvPolicy
from aem_envs.reply import REPLY_FORMAT


class ScriptedPolicy(Policy):
    """Replies with what an :mod:`aem_envs.policies` policy plays on each input's live env."""

    def __init__(self, policy: EnvPolicy) -> None:
        self.policy = policy
        self.name = policy.name

    def act(self, inputs: Sequence[PolicyInput]) -> list[PolicyOutput]:
        return [
            PolicyOutput(REPLY_FORMAT.format(self.policy.act(self._env(inp)), self.policy.think))
            for inp in inputs
        ]

    def _env(self, inp: PolicyInput) -> gym.Env:
        if inp.env is None:
            raise AEMError(
                f"the {self.name} policy reads the environment itself; pass the live env in "
                f"PolicyInput.env (env id {inp.env_id!r})"
            )
        return inp.env
