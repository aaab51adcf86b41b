"""``turn-mean``: each group's advantages re-centred on their mean over turns.

Why: TRL's GRPO baseline is a group's mean reward over its *episodes*. When every turn of an
episode then trains with the episode's advantage (the step layout, one row per turn), a
group's rows sum to Σ T_e·A_e over its episodes (T_e turns each), and that sum is not zero
when episode lengths differ with the outcome. In ALFWorld they do: a win ends the episode, a
loss plays to the turn limit, so the losers' rows outnumber the winners' and the batch pushes
down, on net, every reply it sampled, which raises the policy's entropy and the share of
invalid actions the more it is trained (``docs/small-agent.md`` measured both).

verl-agent, the AEM paper's framework, computes a group's mean over all of its step rows
(``compute_mean_std_cross_all_data``, on by default, in its GRPO and GiGPO episode
advantages): every turn weighs the same in the baseline, so the group's rows sum to zero.
This estimator does the same to the advantage it receives: A_u − mean of A over the units of
u's group. On TRL's advantage (R − mean over episodes) / s that gives (R − mean over turns) / s;
the scale s stays the one TRL's ``scale_rewards`` chose. Put it first in a chain
(``turn-mean+aem``, ``turn-mean+gigpo``) so that what follows starts from the re-centred
advantage. With equal-length episodes it changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from aem_agent.credit.base import Credit, TurnBatch, group_index, normalise_in_groups


@dataclass(frozen=True)
class TurnMean:
    """Every group's units re-centred so that they sum to zero (each turn weighs the same)."""

    name: str = "turn-mean"
    needs: frozenset[str] = frozenset()

    def __call__(self, batch: TurnBatch) -> Credit:
        advantage = batch.advantage.to(torch.float64)
        if len(advantage) == 0:
            return Credit(advantage)
        centred = normalise_in_groups(advantage, group_index(batch.group), scale=False)
        # The mean advantage per turn before re-centring: how far the episode baseline leant.
        return Credit(centred, {"turn_mean/shift": float((advantage - centred).mean())})
