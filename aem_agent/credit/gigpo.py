"""GiGPO: the episode-level GRPO advantage plus a step-level advantage over anchor states.

Feng et al., "Group-in-Group Policy Optimization for LLM Agent Training" (arXiv 2505.10978),
as verl-agent implements it (``gigpo/core_gigpo.py``: ``compute_step_discounted_returns``,
``build_step_group``, ``step_norm_reward``, ``compute_gigpo_outcome_advantage``). In our words:

1. Episode level (the paper's Eq. 3): the G episodes of a task and seed are a group and each
   episode's return is normalised inside it — that is TRL's GRPO advantage, which arrives here
   as ``TurnBatch.advantage``. verl-agent takes the group's mean over step rows rather than
   episodes; ``turn-mean+gigpo`` (:mod:`aem_agent.credit.turn_mean`) does the same.
2. Discounted step returns (Eq. 5): each turn's return is its own reward plus γ times the
   return of the episode's next turn, R_t = r_t + γ·R_{t+1}, γ = 0.95.
3. Anchor-state groups (Eq. 6): inside one episode group, the turns that acted on the *same*
   environment state — identical observation text — form a step group, across episodes and
   turn indices (a state revisited later in an episode joins the same group).
4. Step advantage (Eq. 7): within each step group, A^S = (R − mean R) / (std R + ε), or
   R − mean R with ``scale="none"`` (verl-agent's ``mean_norm`` mode). A step group of one turn
   has mean R = R, so its A^S is 0: with no repeated states GiGPO is episode-level GRPO.
5. Together (Eq. 8): A = A^E + ω·A^S, ω = 1.

As in verl-agent, std is the unbiased (n − 1) one and a group of one has std 1, states match
by exact text (verl-agent's optional fuzzy matching is left out), and a turn's anchor is the
observation it acted on, not the prompt around it (history windows differ between episodes
that reach the same state by different paths).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, get_args

import torch

from aem_agent.credit.base import Credit, TurnBatch, normalise_in_groups

#: How step returns are scaled inside an anchor group: by their std (the paper's F_norm = std,
#: like TRL's default ``scale_rewards="group"``), or not at all (verl-agent's ``mean_norm``).
Scale = Literal["std", "none"]
SCALES: tuple[str, ...] = get_args(Scale)


class GiGPOSettings(Protocol):
    """The settings GiGPO reads (``AEMConfig`` has them)."""

    gigpo_gamma: float
    gigpo_omega: float
    gigpo_scale: Scale


def discounted_returns(
    reward: torch.Tensor, episode: torch.Tensor, turn: torch.Tensor, gamma: float
) -> torch.Tensor:
    """R_t = r_t + γ·R_{t+1} along each episode's turns (by ``turn`` index), per unit.

    Vectorised over episodes: one pass over the turn index, from the last turn back.
    """
    if len(reward) == 0:
        return reward.to(torch.float64)
    _, row = torch.unique(episode, return_inverse=True)
    table = torch.zeros(int(row.max()) + 1, int(turn.max()) + 2, dtype=torch.float64)
    table[row, turn] = reward.to(torch.float64)
    for t in range(table.shape[1] - 2, -1, -1):
        table[:, t] += gamma * table[:, t + 1]
    return table[row, turn]


def anchor_groups(anchor: Sequence[str], group: torch.Tensor) -> torch.Tensor:
    """Step-group id of each unit: one id per (episode group, identical state text)."""
    ids: dict[tuple[int, str], int] = {}
    keys = [(int(g), text) for g, text in zip(group.tolist(), anchor, strict=True)]
    return torch.tensor([ids.setdefault(k, len(ids)) for k in keys], dtype=torch.long)


def step_advantages(
    returns: torch.Tensor, step_group: torch.Tensor, *, scale: Scale = "std", eps: float = 1e-6
) -> torch.Tensor:
    """A^S per unit: returns centred (and scaled) inside their step group (0 in groups of one).

    The std is the unbiased one; a group of one has std 1, as in verl-agent (its A^S is 0).
    """
    return normalise_in_groups(returns, step_group, scale=scale == "std", eps=eps)


@dataclass(frozen=True)
class GiGPO:
    """``A = A^E + ω·A^S``: the incoming (episode-level) advantage plus the step advantage."""

    gamma: float = 0.95
    omega: float = 1.0
    scale: Scale = "std"
    eps: float = 1e-6
    name: str = "gigpo"
    needs: frozenset[str] = frozenset({"reward", "anchor"})

    @classmethod
    def from_config(cls, config: GiGPOSettings) -> GiGPO:
        return cls(gamma=config.gigpo_gamma, omega=config.gigpo_omega, scale=config.gigpo_scale)

    def __call__(self, batch: TurnBatch) -> Credit:
        batch.require(self.name, "reward", "anchor")
        assert batch.reward is not None and batch.anchor is not None  # required just above
        returns = discounted_returns(batch.reward, batch.episode, batch.turn, self.gamma)
        groups = anchor_groups(batch.anchor, batch.group)
        step = step_advantages(returns, groups, scale=self.scale, eps=self.eps)
        sizes = torch.bincount(groups, minlength=1)
        metrics = {
            "gigpo/step_groups": float(len(groups.unique())),
            "gigpo/repeated_state_share": float((sizes[groups] > 1).double().mean().nan_to_num()),
            "gigpo/step_advantage_abs": float(step.abs().mean().nan_to_num()),
        }
        return Credit(batch.advantage.to(torch.float64) + self.omega * step, metrics)
