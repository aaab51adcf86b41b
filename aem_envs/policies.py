"""Non-LLM reference policies every env supports: the env's expert and random-admissible.

They act on the environment itself (the expert reads the task's plan, the random policy
the admissible set), which is why they live beside the envs rather than in the agent;
:class:`aem_agent.policies.ScriptedPolicy` lets a harness or a rollout drive them like a
model. The env is read through ``get_wrapper_attr``, so they play a bare env, a wrapped one
and an env in a Ray actor (:class:`~aem_envs.vector.ray_env.RayEnv` forwards the lookup)
alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

import gymnasium as gym
import numpy as np

#: Commands the random policy tries where the action space is open (a shell).
OPEN_SPACE_ACTIONS: tuple[str, ...] = ("ls", "pwd", "git status", "git diff", "cat README.md")


class EnvPolicy(Protocol):
    """What the policies here share: a name, the reasoning a reply of theirs shows
    (:class:`aem_agent.policies.ScriptedPolicy` writes it in the think block), and ``act``."""

    name: ClassVar[str]
    think: ClassVar[str]

    def act(self, env: gym.Env) -> str: ...


def _env_attr(env: gym.Env, name: str) -> Any:
    try:
        return env.get_wrapper_attr(name)
    except AttributeError:
        raise TypeError(
            f"expected an aem environment (with {name!r}), got {type(env.unwrapped).__name__}"
        ) from None


class ExpertPolicy:
    """Asks the env for its expert's next action (the bundled tasks' known solutions)."""

    name: ClassVar[str] = "expert"
    think: ClassVar[str] = "The expert's next step."

    def act(self, env: gym.Env) -> str:
        action: str = _env_attr(env, "expert_action")()
        return action


class RandomPolicy:
    """Picks uniformly among the admissible actions (or a few harmless shell commands)."""

    name: ClassVar[str] = "random"
    think: ClassVar[str] = "A random admissible step."

    def __init__(self, seed: int | None = None, fallback: Sequence[str] = OPEN_SPACE_ACTIONS):
        self.rng = np.random.default_rng(seed)
        self.fallback = tuple(fallback)

    def act(self, env: gym.Env) -> str:
        choices = _env_attr(env, "admissible_actions") or self.fallback
        return choices[int(self.rng.integers(len(choices)))]


POLICIES: dict[str, type[EnvPolicy]] = {"expert": ExpertPolicy, "random": RandomPolicy}
