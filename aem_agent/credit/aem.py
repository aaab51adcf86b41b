"""AEM as a credit estimator: each turn's advantage times its entropy weight α.

The algorithm and its properties are :mod:`aem_agent.aem` (``docs/aem.md``); this adapter only
reads a :class:`~aem_agent.credit.base.TurnBatch` and calls those functions, so the trainer and
the bare-tensor tests exercise the same code. Chained after another estimator it rescales that
estimator's advantage (``gigpo+aem``: GiGPO's episode + step advantage, then α).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from aem_agent.aem import Unit, alpha_stats, group_alpha
from aem_agent.credit.base import Credit, TurnBatch, group_index


class AEMSettings(Protocol):
    """The settings AEM reads (``AEMConfig`` has them)."""

    aem_lambda: float
    aem_eps: float
    aem_min_range: float
    aem_unit: Unit


@dataclass(frozen=True)
class AEM:
    """α = exp(−λ·H̃)/mean exp(−λ·H̃) per GRPO group; ``A' = α·A``.

    ``apply=False`` computes and logs α without changing the advantage: the trainer adds such
    an observer to chains without AEM whenever entropies are at hand, so a GRPO run logs the
    same entropy and α curves as an AEM run and the two can be compared.
    """

    lam: float = 1.0
    eps: float = 1e-6
    min_range: float = 0.1
    unit: Unit = "turn"
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
            apply=apply,
        )

    def __call__(self, batch: TurnBatch) -> Credit:
        batch.require(self.name, "entropy")
        assert batch.entropy is not None  # required just above
        hbar, groups, valid, owner = self._units(batch, batch.entropy.to(torch.float64))
        alpha, gated = group_alpha(
            hbar, groups, valid, lam=self.lam, eps=self.eps, min_range=self.min_range
        )
        metrics = {f"aem/{k}": v for k, v in alpha_stats(alpha, hbar, valid, gated).items()}
        if not self.apply or self.lam == 0:
            return Credit(batch.advantage, metrics)
        return Credit(alpha[owner] * batch.advantage.to(torch.float64), metrics)

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
