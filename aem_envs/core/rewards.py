"""Reward schemes: how an episode's outcome becomes the scalar reward an RL learner sees.

The benchmark's own measure (WebShop's reward, SWE-bench's resolved fraction, ALFWorld's
``won``) always stays in ``info["score"]``; the scheme only shapes the training signal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RewardScheme:
    """Sparse terminal reward plus a per-step penalty for invalid actions.

    The default is the agentic-RL papers' scheme (GiGPO, AEM): +10 on success, 0 on failure,
    −0.1 for every action the environment could not execute. With ``native=True`` the
    terminal reward is the benchmark score itself (partial credit in [0, 1]).
    """

    success: float = 10.0
    failure: float = 0.0
    invalid_action: float = -0.1
    native: bool = False

    def reward(self, *, valid: bool, done: bool, won: bool, score: float) -> float:
        """Reward for one step; ``done`` means the outcome is final (terminated or graded)."""
        reward = 0.0 if valid else self.invalid_action
        if done:
            if self.native:
                reward += score
            else:
                reward += self.success if won else self.failure
        return reward

    @classmethod
    def coerce(cls, value: RewardScheme | dict[str, Any] | str | None) -> RewardScheme:
        """Accept a scheme, a dict of its fields, ``"paper"``/``None`` or ``"native"``."""
        if value is None or value == "paper":
            return cls()
        if value == "native":
            return cls(success=1.0, failure=0.0, invalid_action=0.0, native=True)
        if isinstance(value, RewardScheme):
            return value
        if isinstance(value, dict):
            unknown = set(value) - {"success", "failure", "invalid_action", "native"}
            if unknown:
                raise ValueError(
                    f"unknown reward_scheme keys {sorted(unknown)}; "
                    "use success, failure, invalid_action, native"
                )
            return cls(**value)
        raise ValueError(
            f"reward_scheme={value!r} is not understood; pass 'paper', 'native', a dict "
            "with success/failure/invalid_action, or a RewardScheme"
        )
