"""``turn-penalty``: each turn is charged its own penalty; the outcome is the whole episode's.

Why: an episode-level advantage credits every turn of an episode with the episode's return,
so a −0.1 penalty for an invalid action lands on all of the episode's turns alike, and an
invalid action inside a won episode is reinforced with the win. verl-agent, the AEM paper's
framework, does otherwise (``apply_invalid_action_penalty`` in its ``ray_trainer.py``, on in
its ALFWorld and WebShop recipes with coefficient 0.1): each step row's score is the episode's
reward minus the penalty of *that* step only, and GRPO's baseline and scale are taken over the
group's step rows (``compute_mean_std_cross_all_data``). A penalised turn is then below its
group's other turns whatever the episode's outcome, which is the signal that teaches a policy
to stop emitting invalid actions.

This estimator builds that advantage from the turns' own rewards, replacing the one it
receives, so it goes first in a chain (``turn-penalty+aem``). Penalties are a turn's negative
rewards and the outcome is the sum of the episode's positive ones, which is exact for the
bundled reward schemes (ALFWorld: +10 on the winning turn, −0.1 per invalid command; WebShop:
the purchase's score at the end, −0.1 per invalid action):

    s_u = Σ_{t in u's episode} max(r_t, 0) + min(r_u, 0)
    A_u = (s_u − mean of s over u's group's turns) / scale

The scale follows TRL's ``scale_rewards``, taken over turns: the std of the group's turns
(``"group"``, verl-agent's ``mean_std_norm``), of the batch's turns (``"batch"``), or 1
(``"none"``). With no negative rewards it is ``turn-mean`` with its scale taken over turns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

import torch

from aem_agent.credit.base import (
    Credit,
    CreditError,
    TurnBatch,
    group_index,
    normalise_in_groups,
)

#: Over which turns the centred scores are scaled (TRL's ``scale_rewards`` values).
Scale = Literal["group", "batch", "none"]


def _scale_of(setting: Any) -> Scale:
    """TRL's ``scale_rewards`` as a :data:`Scale` (``GRPOConfig`` has already turned its old
    ``True``/``False`` spellings into ``"group"``/``"none"``), checked before training starts
    (TRL itself checks it at the first advantage)."""
    if setting not in get_args(Scale):
        raise CreditError(
            f"credit 'turn-penalty' scales as scale_rewards does, and scale_rewards={setting!r} "
            "is not one of 'group', 'batch', 'none'"
        )
    return cast(Scale, setting)


@dataclass(frozen=True)
class TurnPenalty:
    """verl-agent's row-level GRPO advantage: the outcome for every turn, a penalty for its own."""

    scale: Scale = "group"
    eps: float = 1e-6
    name: str = "turn-penalty"
    needs: frozenset[str] = frozenset({"reward"})

    @classmethod
    def from_config(cls, config: Any) -> TurnPenalty:
        return cls(scale=_scale_of(config.scale_rewards))

    def scores(self, batch: TurnBatch) -> torch.Tensor:
        """s_u: the episode's outcome (its positive rewards) plus the turn's own penalty."""
        batch.require(self.name, "reward")
        assert batch.reward is not None  # required just above
        reward = batch.reward.to(torch.float64)
        episode = group_index(batch.episode)
        outcome = torch.zeros(int(episode.max()) + 1, dtype=torch.float64)
        outcome.index_add_(0, episode, reward.clamp(min=0))
        return outcome[episode] + reward.clamp(max=0)

    def __call__(self, batch: TurnBatch) -> Credit:
        if len(batch) == 0:
            return Credit(batch.advantage.to(torch.float64))
        score = self.scores(batch)
        group = group_index(batch.group)
        # verl-agent's torch.std over the group's rows (unbiased), or the batch's, or none.
        advantage = normalise_in_groups(score, group, scale=self.scale == "group", eps=self.eps)
        if self.scale == "batch":
            std = score.std() if len(score) > 1 else score.new_tensor(1.0)
            advantage = advantage / (std + self.eps)
        assert batch.reward is not None  # scores() required it
        penalised = batch.reward < 0
        metrics = {
            "turn_penalty/penalised_share": float(penalised.double().mean()),
            "turn_penalty/penalised_advantage": float(advantage[penalised].mean().nan_to_num()),
        }
        return Credit(advantage, metrics)
