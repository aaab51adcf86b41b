"""AEM as a credit estimator: each turn's advantage times its entropy weight α.

The algorithm and its properties are :mod:`aem_agent.credit.modulation` (``docs/aem.md``); this
adapter only reads a :class:`~aem_agent.credit.base.TurnBatch` and calls those functions, so the
trainer and the bare-tensor tests exercise the same code. Chained after another estimator it
rescales that estimator's advantage (``gigpo+aem``: GiGPO's episode + step advantage, then α).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from aem_agent.credit.base import Credit, TurnBatch, group_index
from aem_agent.credit.modulation import (
    POSITIVE_TOLERANCE,
    Scope,
    Unit,
    Units,
    alpha_stats,
    group_alpha,
)


class AEMSettings(Protocol):
    """The settings AEM reads (``AEMConfig`` has them)."""

    aem_lambda: float
    aem_eps: float
    aem_min_range: float
    aem_unit: Unit
    aem_scope: Scope
    aem_shuffle: bool
    seed: int


@dataclass(frozen=True)
class AEM:
    """α = exp(−λ·H̃)/mean exp(−λ·H̃) per GRPO group; ``A' = α·A``.

    ``apply=False`` computes and logs α without changing the advantage: the trainer adds such
    an observer to chains without AEM whenever entropies are at hand, so a GRPO run logs the
    same entropy and α curves as an AEM run and the two can be compared.

    ``scope`` is what α is normalised over (the paper's GRPO group; an episode, or the whole
    batch, as ablations) and ``shuffle`` permutes α within each scope (the shuffled-α
    ablation), drawn from ``seed`` and the batch's entropies so that every process, holding
    the same gathered batch, draws the same permutation. Each turn's H̄, α and the advantage
    it was applied to are returned in :attr:`Credit.units` (``aem/*``; α there is the weight
    applied, 1 for an observer or at λ = 0) for measuring the
    mechanism (``benchmarks/learning/drift.py``).
    """

    lam: float = 1.0
    eps: float = 1e-6
    min_range: float = 0.1
    unit: Unit = "turn"
    scope: Scope = "group"
    shuffle: bool = False
    seed: int = 0
    apply: bool = True
    name: str = "aem"
    needs: frozenset[str] = frozenset({"entropy"})

    @classmethod
    def from_config(cls, config: AEMSettings, *, apply: bool = True) -> AEM:
        return cls(
            lam=config.aem_lambda,
            eps=config.aem_eps,
            min_range=config.aem_min_range,
            unit=config.aem_unit,
            scope=config.aem_scope,
            shuffle=config.aem_shuffle,
            seed=config.seed,
            apply=apply,
        )

    def __call__(self, batch: TurnBatch) -> Credit:
        batch.require(self.name, "entropy")
        assert batch.entropy is not None  # required just above
        hbar, groups, valid, owner = self._units(batch, batch.entropy.to(torch.float64))
        alpha, gated = group_alpha(
            hbar,
            self._scope_keys(batch, groups),
            valid,
            lam=self.lam,
            eps=self.eps,
            min_range=self.min_range,
            shuffle=self._shuffle_generator(hbar) if self.shuffle else None,
        )
        metrics = {f"aem/{k}": v for k, v in alpha_stats(alpha, hbar, valid, gated).items()}
        advantage = batch.advantage.to(torch.float64)
        positive = (advantage > POSITIVE_TOLERANCE)[valid[owner]]
        metrics["aem/positive_advantage_share"] = (
            float(positive.double().mean()) if len(positive) else 0.0
        )
        applied = self.apply and self.lam != 0
        # The unit record holds the weight the advantage was multiplied by (1 where AEM only
        # observes): the drift law predicts from what the update used, not from the logged α.
        units = {
            "aem/entropy": hbar[owner],
            "aem/alpha": alpha[owner] if applied else torch.ones_like(advantage),
            "aem/advantage": advantage,
            "aem/valid": valid[owner],
        }
        if not applied:
            return Credit(batch.advantage, metrics, units)
        return Credit(alpha[owner] * advantage, metrics, units)

    def _scope_keys(self, batch: TurnBatch, groups: torch.Tensor) -> torch.Tensor:
        """The key of the units α is normalised over together (one per AEM unit)."""
        if self.scope == "group":
            return groups
        if self.scope == "batch":
            return torch.zeros_like(groups)
        # trajectory: a turn's episode; at unit="trajectory" each unit is an episode already
        return batch.episode if self.unit == "turn" else torch.arange(len(groups))

    def _shuffle_generator(self, hbar: torch.Tensor) -> torch.Generator:
        """A generator every process seeds alike: from ``seed`` and the gathered batch."""
        digest = zlib.crc32(hbar.numpy().tobytes())
        return torch.Generator().manual_seed(self.seed * 1_000_003 + digest)

    def _units(
        self, batch: TurnBatch, entropy: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(H̄, group, valid, owner)`` of AEM's units; ``owner`` maps each turn to its unit.

        At ``unit="trajectory"`` an episode's H̄ is the mean over all its reply tokens: the
        token-weighted mean of its turns' H̄.
        """
        if self.unit == "turn":
            valid = torch.ones(len(batch), dtype=torch.bool)
            return entropy, batch.group, valid, torch.arange(len(batch))
        owner = group_index(batch.episode)
        n = int(owner.max()) + 1 if len(batch) else 0
        weight = batch.tokens.to(torch.float64)
        total = torch.zeros(n, dtype=torch.float64).index_add_(0, owner, weight * entropy)
        count = torch.zeros(n, dtype=torch.float64).index_add_(0, owner, weight)
        group = torch.zeros(n, dtype=torch.long).index_copy_(0, owner, batch.group.to(torch.long))
        return total / count.clamp(min=1), group, count > 0, owner


@dataclass(frozen=True)
class AEMRecord:
    """What the last batch's AEM computed per unit (this process's units), kept so that the
    mechanism can be measured from outside (``benchmarks/learning/drift.py``): the units, their
    H̄, α, the base advantage A, the per-token surprisal S̄ of the sampled response (when the
    sampler's log-probs are known), the environment's reward for each unit's turn (when the
    rollout reports turns) and the batch that was trained on."""

    units: Units
    hbar: torch.Tensor
    valid: torch.Tensor
    alpha: torch.Tensor
    advantage: torch.Tensor
    surprisal: torch.Tensor | None
    reward: torch.Tensor | None
    batch: dict[str, Any]

    @classmethod
    def of(
        cls,
        values: dict[str, torch.Tensor],
        mine: slice,
        local: TurnBatch,
        units: Units,
        batch: dict[str, Any],
    ) -> AEMRecord:
        """This process's units (``mine``) of what :class:`AEM` reported in
        :attr:`Credit.units`, with S̄ per unit from the sampler's log-probs."""
        surprisal = None
        if local.logprob is not None:
            surprisal = -local.logprob.to(torch.float64) / local.tokens.clamp(min=1)
        return cls(
            units,
            values["aem/entropy"][mine],
            values["aem/valid"][mine],
            values["aem/alpha"][mine],
            values["aem/advantage"][mine],
            surprisal,
            local.reward,
            batch,
        )
