"""Adaptive Entropy Modulation (AEM): rescale advantages by a weight that falls with entropy.

The algorithm is described in ``docs/aem.md``. In short, per GRPO group G (the G episodes that
share a task and seed), over every *unit* of the group:

1. H̄_u  = mean per-token entropy over the unit's own tokens (mask = 1 only);
2. gate: if max_G H̄ − min_G H̄ < ``min_range`` (0.1 nats), every α of the group is 1;
3. H̃_u  = (H̄_u − min_G H̄) / (max_G H̄ − min_G H̄ + ε);
4. α_u  = exp(−λ·H̃_u) / mean_{v∈G} exp(−λ·H̃_v)        (group mean of α is exactly 1);
5. A'   = α_u · A on every token of the unit.

The unit (:data:`Unit`) is one turn's response — what the environment reacts to — in the
paper's method (``"turn"``), or a whole trajectory (``"trajectory"``), kept as an ablation.

The paper's ablations are settings of the same functions: λ < 0 is the *reversed* α (the
mirror image: α at −λ of H̄ equals α at λ of −H̄, so surprising responses weigh more);
``shuffle`` permutes α among the units of each group (the group's multiset of α, and so its
mean and spread, is kept; only the link to entropy is cut); :data:`Scope` says over which units
steps 2–4 run: the GRPO group (the paper), the units of one trajectory, or the whole batch.

Why pure functions on tensors: AEM plugs in after any advantage estimator, so keeping it free
of trainer state makes its properties (group mean 1, λ = 0 is the identity, the gate, masked
tokens never count, the same α for the same turns in either rollout layout) testable on bare
tensors. The pieces are separate because the trainer computes H̄ per unit on each process and
gathers only those scalars (not per-token tensors) before :func:`group_alpha`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import torch

Unit = Literal["turn", "trajectory"]
UNITS: tuple[str, ...] = get_args(Unit)
#: The units α is normalised over: ``"group"`` (the paper), ``"trajectory"``, ``"batch"``.
Scope = Literal["group", "trajectory", "batch"]
SCOPES: tuple[str, ...] = get_args(Scope)


@dataclass(frozen=True)
class Units:
    """Which unit every token belongs to, and which group every unit belongs to.

    ``token_unit`` is ``(B, T)`` with −1 on tokens outside every unit (prompt, observation,
    padding); ``group`` is ``(U,)``; ``per_token`` says whether one row holds several units
    (turns inside a trajectory row), so that the modulated advantage must be per token;
    ``episode`` is ``(U,)``, the episode each unit belongs to (for the ``"trajectory"``
    :data:`Scope`), and ``owner`` ``(U,)`` the first row holding each unit's tokens.
    """

    token_unit: torch.Tensor
    group: torch.Tensor
    per_token: bool
    episode: torch.Tensor | None = None
    owner: torch.Tensor | None = None

    @property
    def count(self) -> int:
        return len(self.group)


def unit_index(
    mask: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    unit: Unit = "turn",
    turn_ids: torch.Tensor | None = None,
    episode_ids: torch.Tensor | None = None,
) -> Units:
    """Number the units of a batch of rows.

    Args:
        mask: ``(B, T)``; 1 on the policy's own tokens.
        group_ids: ``(B,)`` GRPO group of each row.
        unit: ``"turn"`` or ``"trajectory"``.
        turn_ids: ``(B, T)`` turn index of each token, for rows that hold a whole trajectory
            (the trajectory layout). Without it every row is one turn (the step layout).
        episode_ids: ``(B,)`` episode of each row, for rows that hold one step each (the step
            layout) with ``unit="trajectory"``. Without it every row is one episode.
    """
    if unit not in UNITS:
        raise ValueError(f"aem unit must be one of {UNITS}, got {unit!r}")
    mask = mask.to(torch.bool)
    group_ids = group_ids.to(torch.long)
    rows = torch.arange(mask.shape[0]).unsqueeze(1).expand_as(mask)
    if unit == "turn" and turn_ids is not None:
        if turn_ids.shape != mask.shape:
            raise ValueError(
                f"turn_ids {tuple(turn_ids.shape)} must have the shape of mask {tuple(mask.shape)}"
            )
        width = int(turn_ids[mask].max()) + 1 if mask.any() else 1
        key = rows * width + turn_ids.to(torch.long).clamp(min=0)
    elif unit == "trajectory" and episode_ids is not None:
        key = episode_ids.to(torch.long).unsqueeze(1).expand_as(mask)
    else:  # one unit per row
        key = rows
    present, inverse = torch.unique(key[mask], return_inverse=True)
    token_unit = torch.full(mask.shape, -1, dtype=torch.long)
    token_unit[mask] = inverse
    # A unit's group is the group of (any) row holding its tokens: the first such row.
    owner = torch.full((len(present),), mask.shape[0], dtype=torch.long).scatter_reduce(
        0, inverse, rows[mask], reduce="amin"
    )
    group = group_ids[owner]
    # A row is one episode unless episode_ids says which episode each (step) row plays.
    episode = episode_ids.to(torch.long)[owner] if episode_ids is not None else owner
    per_token = unit == "turn" and turn_ids is not None
    return Units(token_unit, group, per_token=per_token, episode=episode, owner=owner)


def scope_keys(units: Units, scope: Scope = "group") -> torch.Tensor:
    """``(U,)`` the key of the units α is normalised over together, for :func:`group_alpha`."""
    if scope not in SCOPES:
        raise ValueError(f"aem scope must be one of {SCOPES}, got {scope!r}")
    if scope == "group":
        return units.group
    if scope == "batch":
        return torch.zeros_like(units.group)
    if units.episode is None:
        raise ValueError("the trajectory scope needs Units.episode (build them with unit_index)")
    return units.episode


def unit_surprisal(logprobs: torch.Tensor, units: Units) -> torch.Tensor:
    """``(U,)`` S̄ per unit: the mean over its tokens of −log π(token), the sampled response's
    per-token surprisal (the drift law's S, per token like H̄)."""
    surprisal, _ = unit_mean_entropy(-logprobs.detach().to(torch.float64), units)
    return surprisal


def unit_mean_entropy(entropies: torch.Tensor, units: Units) -> tuple[torch.Tensor, torch.Tensor]:
    """``(H̄, has_tokens)`` per unit: the mean entropy over each unit's own tokens."""
    keep = units.token_unit >= 0
    index = units.token_unit[keep]
    values = entropies.detach().to(torch.float64)[keep]
    total = torch.zeros(units.count, dtype=torch.float64).index_add_(0, index, values)
    count = torch.zeros(units.count, dtype=torch.float64).index_add_(
        0, index, torch.ones_like(values)
    )
    return total / count.clamp(min=1), count > 0


def group_alpha(
    hbar: torch.Tensor,
    groups: torch.Tensor,
    valid: torch.Tensor,
    *,
    lam: float,
    eps: float = 1e-6,
    min_range: float = 0.1,
    shuffle: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(α, gated)`` per unit: exp(−λ·H̃) normalised to mean 1 over the valid units of its group.

    ``gated`` marks the units of groups whose H̄ range is under ``min_range`` (α = 1 there),
    which includes groups of one. Units with ``valid == False`` (no tokens) get α = 1 and
    enter neither the min, the max nor the mean of their group. λ < 0 is the reversed-α
    ablation. With ``shuffle`` (a generator, so every process draws the same permutation) the
    α of each group's valid units are permuted among them: the shuffled-α ablation.
    ``groups`` is whatever the units are normalised over (:func:`scope_keys`).
    """
    if min_range < 0 or eps < 0:
        raise ValueError(f"aem min_range ({min_range}) and eps ({eps}) must be >= 0")
    hbar = hbar.to(torch.float64)
    valid = valid.to(torch.bool)
    ones = torch.ones_like(hbar)
    if len(hbar) == 0:
        return ones, valid.clone()
    _, group_index = torch.unique(groups, return_inverse=True)
    n_groups = int(group_index.max()) + 1
    inf = torch.tensor(float("inf"), dtype=torch.float64)
    lo = torch.full((n_groups,), float("inf"), dtype=torch.float64).scatter_reduce(
        0, group_index, torch.where(valid, hbar, inf), reduce="amin"
    )
    hi = torch.full((n_groups,), float("-inf"), dtype=torch.float64).scatter_reduce(
        0, group_index, torch.where(valid, hbar, -inf), reduce="amax"
    )
    spread = (hi - lo)[group_index]
    gated = ~(spread >= min_range) | ~(spread > 0)  # also catches groups with no valid unit
    normalised = torch.where(valid & ~gated, (hbar - lo[group_index]) / (spread + eps), 0.0)
    weight = torch.where(valid, torch.exp(-lam * normalised), 0.0)
    count = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, group_index, valid.double())
    total = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, group_index, weight)
    mean = (total / count.clamp(min=1))[group_index]
    alpha = weight / mean.clamp(min=torch.finfo(torch.float64).tiny)
    alpha = torch.where(valid & ~gated, alpha, ones)
    if shuffle is not None:
        alpha = _shuffle_within(alpha, group_index, valid & ~gated, shuffle)
    return alpha, gated


def _shuffle_within(
    alpha: torch.Tensor,
    group_index: torch.Tensor,
    movable: torch.Tensor,
    generator: torch.Generator,
) -> torch.Tensor:
    """``alpha`` with the values of each group's ``movable`` units permuted among them."""
    # One random key per unit; sorting by (group, key) lists each group's units in random order.
    keys = torch.rand(len(alpha), generator=generator, dtype=torch.float64)
    movable_at = movable.nonzero().squeeze(1)
    if len(movable_at) < 2:
        return alpha
    groups = group_index[movable_at]
    by_group = torch.argsort(groups, stable=True)
    shuffled = torch.argsort(groups.double() * 2 + keys[movable_at], stable=True)
    out = alpha.clone()
    out[movable_at[by_group]] = alpha[movable_at[shuffled]]
    return out


def apply_alpha(advantages: torch.Tensor, alpha: torch.Tensor, units: Units) -> torch.Tensor:
    """``A' = α · A``: ``(B, T)`` per token when rows hold several units, else ``(B,)``.

    Tokens outside every unit keep α = 1 (they carry no loss anyway).
    """
    alpha = alpha.to(advantages.dtype)
    token_alpha = torch.where(
        units.token_unit >= 0,
        alpha[units.token_unit.clamp(min=0)] if len(alpha) else torch.ones(()),
        torch.ones((), dtype=alpha.dtype),
    )
    if units.per_token:
        return token_alpha * advantages.unsqueeze(1)
    # One unit per row (or per episode): every token of the row has the same α.
    first = (units.token_unit >= 0).to(torch.long).argmax(dim=1, keepdim=True)
    row_alpha = token_alpha.gather(1, first).squeeze(1) if token_alpha.numel() else token_alpha
    return row_alpha * advantages


def alpha_stats(
    alpha: torch.Tensor, hbar: torch.Tensor, valid: torch.Tensor, gated: torch.Tensor
) -> dict[str, float]:
    """What a training step logs about AEM: entropy, the α spread and the share gated."""
    counted = alpha[valid] if valid.any() else torch.ones(1, dtype=torch.float64)
    return {
        "entropy_mean": float(hbar[valid].mean()) if valid.any() else 0.0,
        "alpha_min": float(counted.min()),
        "alpha_max": float(counted.max()),
        "alpha_std": float(counted.std(unbiased=False)),
        "gated_share": float(gated[valid].double().mean()) if valid.any() else 1.0,
        "units": float(valid.sum()),
    }


def aem_modulate(
    advantages: torch.Tensor,
    entropies: torch.Tensor,
    mask: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    lam: float = 1.0,
    eps: float = 1e-6,
    min_range: float = 0.1,
    unit: Unit = "turn",
    turn_ids: torch.Tensor | None = None,
    episode_ids: torch.Tensor | None = None,
    scope: Scope = "group",
    shuffle: torch.Generator | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Return ``(modulated_advantages, stats)`` for one batch held in one process.

    Args:
        advantages: ``(B,)`` advantages of the base estimator, one per row.
        entropies: ``(B, T)`` per-token entropies of the sampling policy.
        mask: ``(B, T)``; 1 on the policy's own tokens, 0 on prompt, observation and padding
            tokens (those never enter H̄).
        group_ids: ``(B,)`` integer id of each row's GRPO group.
        lam: λ; 0 returns ``advantages`` unchanged, bit for bit; < 0 is the reversed-α
            ablation.
        eps: ε of the min-max division.
        min_range: the gate, in nats: a group whose H̄ range is below it keeps α = 1.
        unit: ``"turn"`` (the paper) or ``"trajectory"`` (one α per episode, an ablation).
        turn_ids: ``(B, T)`` turn index per token when a row is a whole trajectory; the result
            is then ``(B, T)`` per token at ``unit="turn"``.
        episode_ids: ``(B,)`` episode of each row when a row is one step (for
            ``unit="trajectory"`` and ``scope="trajectory"``).
        scope: the units α is normalised over (:data:`Scope`; ``"group"`` is the paper).
        shuffle: a generator to permute α within each normalisation scope (the ablation).

    ``stats``: ``entropy_mean`` (mean H̄ over units with tokens), ``alpha_min``, ``alpha_max``,
    ``alpha_std``, ``gated_share`` (share of units in gated groups), ``units`` and
    ``positive_advantage_share`` (over units: AEM's balance is one of turn-responses).
    """
    if advantages.dim() != 1:
        raise ValueError(f"advantages must be 1-D (one per row), got shape {advantages.shape}")
    if entropies.shape != mask.shape or entropies.shape[0] != advantages.shape[0]:
        raise ValueError(
            f"entropies {tuple(entropies.shape)} and mask {tuple(mask.shape)} must both be "
            f"(B, T) with B = {advantages.shape[0]}"
        )
    units = unit_index(mask, group_ids, unit=unit, turn_ids=turn_ids, episode_ids=episode_ids)
    hbar, valid = unit_mean_entropy(entropies, units)
    alpha, gated = group_alpha(
        hbar,
        scope_keys(units, scope),
        valid,
        lam=lam,
        eps=eps,
        min_range=min_range,
        shuffle=shuffle,
    )
    if lam == 0:
        alpha = torch.ones_like(alpha)
        expanded = advantages.unsqueeze(1).expand(mask.shape) if units.per_token else advantages
        modulated = expanded.clone()
    else:
        modulated = apply_alpha(advantages, alpha, units)
    stats = alpha_stats(alpha, hbar, valid, gated)
    stats["positive_advantage_share"] = positive_share(advantages, units, valid)
    return modulated, stats


#: An advantage at most this is not counted positive: in a group whose rewards are all equal,
#: TRL's (r − mean) / (std + 1e-4) leaves rounding noise of about 1e-5, not a success.
POSITIVE_TOLERANCE = 1e-3


def positive_share(advantages: torch.Tensor, units: Units, valid: torch.Tensor) -> float:
    """Share of the units (with tokens) whose advantage is positive: the balance AEM acts on,
    counted over turn-responses, not episodes (a failed episode has more of them)."""
    if units.owner is None or not bool(valid.any()):
        return 0.0
    return float((advantages[units.owner][valid] > POSITIVE_TOLERANCE).double().mean())
