"""Adaptive Entropy Modulation (AEM): rescale advantages by a weight that falls with entropy.

Why a pure function: AEM is a plug-in after any advantage estimator (GRPO, DAPO, GiGPO). Keeping
it free of trainer state makes its properties (group mean of α is 1, λ = 0 is the identity,
masked tokens never count) testable on bare tensors, and lets the trainer call it once on
advantages gathered from every process.

Per group G of responses sharing a task (see ``design/AEM.md``):

1. H̄_i  = mean per-token entropy over the response's own tokens (mask = 1 only);
2. H̃_i  = (H̄_i − min_G H̄) / (max_G H̄ − min_G H̄ + ε);
3. α_i  = exp(−λ·H̃_i) / mean_{j∈G} exp(−λ·H̃_j);
4. A'_i = α_i · A_i.

At ``level="turn"`` the unit is one assistant turn instead of one response: every turn of every
trajectory in the group gets its own H̄ and α, and the result is a per-token advantage.
"""

from __future__ import annotations

from typing import Literal

import torch

Level = Literal["response", "turn"]
LEVELS: tuple[str, ...] = ("response", "turn")


def aem_modulate(
    advantages: torch.Tensor,
    entropies: torch.Tensor,
    mask: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    lam: float = 1.0,
    eps: float = 1e-6,
    level: Level = "response",
    turn_ids: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Return ``(modulated_advantages, stats)``.

    Args:
        advantages: ``(B,)`` advantages of the base estimator, one per response.
        entropies: ``(B, T)`` per-token entropies of the sampling policy.
        mask: ``(B, T)``; 1 on the response's own tokens, 0 on prompt, observation and padding
            tokens (those never enter H̄).
        group_ids: ``(B,)`` integer id of each response's group (the GRPO group).
        lam: λ ≥ 0; 0 returns ``advantages`` unchanged, bit for bit.
        eps: ε of the min-max normalisation.
        level: ``"response"`` → ``(B,)`` result; ``"turn"`` → ``(B, T)`` per-token result.
        turn_ids: ``(B, T)`` turn index of each token, needed at ``level="turn"``.

    ``stats`` holds ``entropy_mean`` (mean H̄ over units with tokens), ``alpha_min``,
    ``alpha_max``, ``alpha_std`` and ``positive_advantage_share``. A unit with no unmasked
    token has no H̄: it takes α = 1 and stays out of its group's statistics. Groups whose H̄
    are all equal, and groups of one, get α = 1 for every member.
    """
    if level not in LEVELS:
        raise ValueError(f"aem level must be one of {LEVELS}, got {level!r}")
    if lam < 0:
        raise ValueError(f"aem lambda must be >= 0, got {lam}")
    if advantages.dim() != 1:
        raise ValueError(f"advantages must be 1-D (one per response), got shape {advantages.shape}")
    if entropies.shape != mask.shape or entropies.shape[0] != advantages.shape[0]:
        raise ValueError(
            f"entropies {tuple(entropies.shape)} and mask {tuple(mask.shape)} must both be "
            f"(B, T) with B = {advantages.shape[0]}"
        )
    mask = mask.to(torch.bool)
    entropies = entropies.detach().to(torch.float64)
    group_ids = group_ids.to(torch.long)

    if level == "response":
        unit_of_token = torch.where(mask, torch.arange(len(advantages)).unsqueeze(1), -1)
        unit_group = group_ids
        n_units = len(advantages)
    else:
        if turn_ids is None or turn_ids.shape != mask.shape:
            raise ValueError("level='turn' needs turn_ids with the same (B, T) shape as mask")
        unit_of_token, unit_group, n_units = _turn_units(turn_ids.to(torch.long), mask, group_ids)

    hbar, has_tokens = _unit_mean(entropies, unit_of_token, n_units)
    if lam == 0:
        alpha = torch.ones(n_units, dtype=torch.float64)
    else:
        alpha = group_alpha(hbar, unit_group, has_tokens, lam=lam, eps=eps)

    if level == "response":
        modulated = advantages.clone() if lam == 0 else alpha.to(advantages.dtype) * advantages
    else:
        expanded = advantages.unsqueeze(1).expand(-1, mask.shape[1])
        token_alpha = torch.where(
            unit_of_token >= 0, alpha[unit_of_token.clamp(min=0)], torch.ones((), dtype=alpha.dtype)
        )
        modulated = expanded.clone() if lam == 0 else token_alpha.to(advantages.dtype) * expanded
    counted = alpha[has_tokens] if has_tokens.any() else torch.ones(1, dtype=torch.float64)
    stats = {
        "entropy_mean": float(hbar[has_tokens].mean()) if has_tokens.any() else 0.0,
        "alpha_min": float(counted.min()),
        "alpha_max": float(counted.max()),
        "alpha_std": float(counted.std(unbiased=False)),
        "positive_advantage_share": float((advantages > 0).to(torch.float64).mean())
        if len(advantages)
        else 0.0,
    }
    return modulated, stats


def group_alpha(
    hbar: torch.Tensor,
    groups: torch.Tensor,
    valid: torch.Tensor,
    *,
    lam: float,
    eps: float,
) -> torch.Tensor:
    """α for each unit: exp(−λ·H̃) normalised to mean 1 over the valid units of its group.

    Units with ``valid == False`` (no tokens) get α = 1 and do not enter min, max or mean.
    """
    hbar = hbar.to(torch.float64)
    _, group_index = torch.unique(groups, return_inverse=True)
    n_groups = int(group_index.max()) + 1 if len(group_index) else 0
    inf = torch.tensor(float("inf"), dtype=torch.float64)
    lo = torch.full((n_groups,), float("inf"), dtype=torch.float64).scatter_reduce(
        0, group_index, torch.where(valid, hbar, inf), reduce="amin"
    )
    hi = torch.full((n_groups,), float("-inf"), dtype=torch.float64).scatter_reduce(
        0, group_index, torch.where(valid, hbar, -inf), reduce="amax"
    )
    spread = hi[group_index] - lo[group_index]
    normalised = torch.where(valid, (hbar - lo[group_index]) / (spread + eps), 0.0)
    weight = torch.where(valid, torch.exp(-lam * normalised), 0.0)
    count = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, group_index, valid.double())
    total = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, group_index, weight)
    mean = total / count.clamp(min=1)
    alpha = weight / mean[group_index].clamp(min=torch.finfo(torch.float64).tiny)
    # Constant groups (spread 0, which includes groups of one) keep exactly α = 1.
    flat = spread <= 0
    return torch.where(valid & ~flat, alpha, torch.ones_like(alpha))


def _unit_mean(
    values: torch.Tensor, unit_of_token: torch.Tensor, n_units: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean of ``values`` over the tokens of each unit (tokens with unit −1 are ignored)."""
    keep = unit_of_token >= 0
    index = unit_of_token[keep]
    total = torch.zeros(n_units, dtype=torch.float64).index_add_(0, index, values[keep])
    count = torch.zeros(n_units, dtype=torch.float64).index_add_(
        0, index, torch.ones_like(values[keep])
    )
    return total / count.clamp(min=1), count > 0


def _turn_units(
    turn_ids: torch.Tensor, mask: torch.Tensor, group_ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Number (row, turn) pairs as units; every turn of a row inherits the row's group."""
    rows = torch.arange(turn_ids.shape[0]).unsqueeze(1).expand_as(turn_ids)
    width = int(turn_ids[mask].max()) + 1 if mask.any() else 1
    key = torch.where(mask, rows * width + turn_ids.clamp(min=0), -1)
    present, inverse = torch.unique(key[mask], return_inverse=True)
    unit_of_token = torch.full_like(key, -1)
    unit_of_token[mask] = inverse
    unit_group = group_ids[present // width]
    return unit_of_token, unit_group, len(present)
