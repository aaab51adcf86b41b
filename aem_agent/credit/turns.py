"""From training rows to a :class:`~aem_agent.credit.base.TurnBatch` and back.

Why apart from the trainer: the same two steps serve both rollout layouts — rows that are one
turn each (the step layout) and rows that hold a whole episode with turn ids per token (the
trajectory layout, and TRL's tool loop, whose turns are the runs of the model's own tokens) —
and they are plain tensor code, testable without TRL. Units are numbered by
:func:`aem_agent.aem.unit_index` at ``unit="turn"``, the numbering AEM has always used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from aem_agent.aem import Units, unit_index
from aem_agent.credit.base import TurnBatch


@dataclass(frozen=True)
class RowTurns:
    """What is known about a process's training rows, for numbering their turn-units.

    Attributes:
        mask: ``(B, T)``, 1 on the policy's own reply tokens.
        group: ``(B,)`` global GRPO group of each row.
        episode: ``(B,)`` local episode index of each row (−1 for padding rows).
        first_episode: global index of this process's first episode.
        advantage: ``(B,)`` TRL's advantage of each row.
        row_turn: ``(B,)`` turn index of each row, for rows that are one turn each.
        token_turn: ``(B, T)`` turn index of each token (−1 off the reply tokens), for rows
            that hold several turns.
        rewards: per local episode, the reward of each turn, when the rollout reports them.
        anchors: per local episode, the observation text of each turn, likewise.
    """

    mask: torch.Tensor
    group: torch.Tensor
    episode: torch.Tensor
    first_episode: int
    advantage: torch.Tensor
    row_turn: torch.Tensor | None = None
    token_turn: torch.Tensor | None = None
    rewards: Sequence[Sequence[float]] | None = None
    anchors: Sequence[Sequence[str]] | None = None

    def units(self) -> Units:
        return unit_index(self.mask, self.group, unit="turn", turn_ids=self.token_turn)


def _per_unit(units: Units, values: torch.Tensor, reduce: str) -> torch.Tensor:
    """Reduce a ``(B, T)`` tensor over each unit's tokens (``"sum"`` or ``"amin"``)."""
    keep = units.token_unit >= 0
    index, data = units.token_unit[keep], values[keep].to(torch.float64)
    start = torch.full((units.count,), float("inf") if reduce == "amin" else 0.0)
    return start.to(torch.float64).scatter_reduce(0, index, data, reduce=reduce)


def local_turns(
    rows: RowTurns,
    units: Units,
    *,
    entropies: torch.Tensor | None = None,
    logprobs: torch.Tensor | None = None,
) -> TurnBatch:
    """This process's units as a :class:`TurnBatch` (``episode`` already global).

    ``entropies`` and ``logprobs`` are ``(B, T)`` per-token values of the sampling policy; a
    unit's entropy is their mean over its tokens, its log-probability their sum.
    """
    rows_of = torch.arange(rows.mask.shape[0]).unsqueeze(1).expand_as(rows.mask)
    owner = _per_unit(units, rows_of, "amin").long()
    if rows.token_turn is not None:
        turn = _per_unit(units, rows.token_turn, "amin").long()
    elif rows.row_turn is not None:
        turn = rows.row_turn[owner].long()
    else:
        turn = torch.zeros(units.count, dtype=torch.long)
    episode = rows.episode[owner].long()
    tokens = _per_unit(units, torch.ones_like(rows.mask, dtype=torch.float64), "sum")
    pairs = list(zip(episode.tolist(), turn.tolist(), strict=True))
    return TurnBatch(
        episode=episode + rows.first_episode,
        group=units.group.long(),
        turn=turn,
        advantage=rows.advantage.detach().cpu().to(torch.float64)[owner],
        tokens=tokens,
        entropy=_per_unit(units, entropies, "sum") / tokens if entropies is not None else None,
        logprob=_per_unit(units, logprobs, "sum") if logprobs is not None else None,
        reward=torch.tensor([float(rows.rewards[e][t]) for e, t in pairs], dtype=torch.float64)
        if rows.rewards is not None
        else None,
        anchor=[rows.anchors[e][t] for e, t in pairs] if rows.anchors is not None else None,
    )


def token_advantages(base: torch.Tensor, advantage: torch.Tensor, units: Units) -> torch.Tensor:
    """Each unit's advantage on its rows (or tokens): ``(B,)`` when every row's units agree,
    ``(B, T)`` when a row holds turns with different advantages.

    Rows without units keep ``base`` (they carry no loss).
    """
    value = advantage.to(base.dtype)
    unit = units.token_unit.to(base.device)
    per_token = torch.where(
        unit >= 0,
        value.to(base.device)[unit.clamp(min=0)] if len(value) else base.unsqueeze(1),
        base.unsqueeze(1),
    )
    has_unit = unit >= 0
    first = has_unit.long().argmax(dim=1, keepdim=True)
    row_value = torch.where(has_unit.any(1), per_token.gather(1, first).squeeze(1), base)
    agree = torch.where(has_unit, per_token == row_value.unsqueeze(1), True).all()
    return row_value if bool(agree) else per_token
