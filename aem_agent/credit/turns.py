"""From training rows to a :class:`~aem_agent.credit.base.TurnBatch` and back.

Why apart from the trainer: the same two steps serve both rollout layouts — rows that are one
turn each (the step layout) and rows that hold a whole episode with turn ids per token (the
trajectory layout, and TRL's tool loop, whose turns are the runs of the model's own tokens) —
and they are plain tensor code, testable without TRL. Units are numbered by
:func:`aem_agent.credit.modulation.unit_index` at ``unit="turn"``, the numbering AEM has always
used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from aem_agent.credit.base import TurnBatch
from aem_agent.credit.modulation import Units, unit_index

#: The numeric :class:`TurnBatch` fields gathered across processes.
GATHERED = ("episode", "group", "turn", "advantage", "tokens", "entropy", "logprob", "reward")


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
        episode = self.episode.clamp(min=0)
        return unit_index(
            self.mask, self.group, unit="turn", turn_ids=self.token_turn, episode_ids=episode
        )


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


def gather_turns(accelerator: Any, local: TurnBatch, *, with_anchor: bool) -> tuple[TurnBatch, int]:
    """Every process's turns as one batch (in process order), and where this process's turns
    start in it. Only per-turn scalars travel, and the anchor texts when ``with_anchor``."""
    from accelerate.utils import gather_object

    device = accelerator.device
    counts = accelerator.gather(torch.tensor([len(local)], device=device)).tolist()
    start = sum(counts[: accelerator.process_index])
    present = {k: getattr(local, k) for k in GATHERED if getattr(local, k) is not None}
    stacked = torch.stack([v.to(torch.float64) for v in present.values()], dim=1)
    padded = accelerator.pad_across_processes(stacked.to(device), dim=0, pad_index=0)
    gathered = accelerator.gather(padded).cpu()
    width = padded.shape[0]
    keep = torch.cat([torch.arange(i * width, i * width + n) for i, n in enumerate(counts)])
    values = dict(zip(present, gathered[keep].unbind(dim=1), strict=True))
    for name in ("episode", "group", "turn"):
        values[name] = values[name].long()
    anchor = None
    if with_anchor and local.anchor is not None:
        anchor = [text for part in gather_object([list(local.anchor)]) for text in part]
    return TurnBatch(**values, anchor=anchor), start
