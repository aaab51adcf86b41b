"""Non-LLM reference policies every env supports: the env's expert and random-admissible.

They act on the environment itself (the expert reads the task's plan, the random policy
the admissible set), which is why they live beside the envs rather than in the agent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import gymnasium as gym
import numpy as np

from aem_envs.core.base import TextEnv
from aem_envs.vector.ray_env import RayEnv

#: Commands the random policy tries where the action space is open (a shell).
OPEN_SPACE_ACTIONS: tuple[str, ...] = ("ls", "pwd", "git status", "git diff", "cat README.md")


def _text_env(env: gym.Env) -> TextEnv:
    inner = env.unwrapped
    if isinstance(inner, RayEnv):  # an aem env in a Ray actor: its attributes are forwarded
        return cast("TextEnv", inner)
    if not isinstance(inner, TextEnv):
        raise TypeError(f"expected an aem environment, got {type(inner).__name__}")
    return inner


class ExpertPolicy:
    """Asks the env for its expert's next action (the bundled tasks' known solutions)."""

    name = "expert"

    def act(self, env: gym.Env) -> str:
        return _text_env(env).expert_action()


class RandomPolicy:
    """Picks uniformly among the admissible actions (or a few harmless shell commands)."""

    name = "random"

    def __init__(self, seed: int | None = None, fallback: Sequence[str] = OPEN_SPACE_ACTIONS):
        self.rng = np.random.default_rng(seed)
        self.fallback = tuple(fallback)

    def act(self, env: gym.Env) -> str:
        choices = _text_env(env).admissible_actions or self.fallback
        return choices[int(self.rng.integers(len(choices)))]


POLICIES = {"expert": ExpertPolicy, "random": RandomPolicy}
