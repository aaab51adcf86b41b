"""The credit interface: a batch of turn-units in, one advantage per unit out.

Why an interface at all: in multi-turn RL the unit of credit is one assistant turn (what the
environment reacts to), and methods differ only in how they turn a batch of such units into
advantages — AEM rescales each turn's advantage by an entropy weight, GiGPO adds a step-level
advantage over turns that start from the same environment state. With both written against
one small protocol they compose (GiGPO's advantage, then AEM's α), and a user's own estimator
runs through the same trainer path without touching TRL (``docs/credit.md``).

The trainer builds a :class:`TurnBatch` the same way in both rollout layouts and on TRL's
``environment_factory`` path, over every process's units (so group statistics are global),
calls the estimator once, and writes each unit's advantage back onto that unit's tokens.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

import torch

from aem_envs.core.errors import AEMError

#: What an estimator may ask the trainer to fill in (:attr:`CreditEstimator.needs`).
Need = Literal["entropy", "logprob", "reward", "anchor"]


@dataclass(frozen=True)
class TurnBatch:
    """Every turn-unit of one training batch, over all processes, as 1-D tensors of length U.

    A unit is one assistant turn with at least one reply token: its reply tokens are its own,
    prompt and observation tokens belong to no unit. Episodes that failed for an
    infrastructure reason (the env reported ``info["infra_error"]``) have no units at all:
    they are out of every baseline and of the loss before an estimator runs.

    Attributes:
        episode: global episode index of each unit.
        group: GRPO group of each unit (the G episodes that share a task and seed).
        turn: the unit's turn index inside its episode, from 0.
        advantage: the advantage so far: TRL's episode-level GRPO advantage for the first
            estimator of a chain, the previous estimator's output after that.
        tokens: the number of reply tokens of each unit.
        entropy: mean per-token entropy of the sampling policy over the unit's reply tokens
            (H̄), when asked for (``"entropy"`` in :attr:`CreditEstimator.needs`).
        logprob: summed log-probability of the unit's reply tokens under the sampling policy
            (−surprisal), when known.
        reward: the environment's reward for the turn, when the rollout reports turns
            (aem's rollout, or a :class:`~aem_agent.grpo.tool_env.ToolEnv` on TRL's tool loop: the
            reward of the reply's tool calls).
        anchor: the observation text the turn acted on (the environment state it started
            from), when the rollout reports it.
    """

    episode: torch.Tensor
    group: torch.Tensor
    turn: torch.Tensor
    advantage: torch.Tensor
    tokens: torch.Tensor
    entropy: torch.Tensor | None = None
    logprob: torch.Tensor | None = None
    reward: torch.Tensor | None = None
    anchor: Sequence[str] | None = None

    def __len__(self) -> int:
        return len(self.episode)

    def require(self, estimator: str, *names: Need) -> None:
        """Fail with one line when a field the estimator reads was not filled in."""
        for name in names:
            if getattr(self, name) is None:
                raise CreditError(
                    f"credit estimator {estimator!r} needs the turns' {name}, which this batch "
                    f"does not carry; list {name!r} in its `needs`, and train with aem's "
                    "rollout (MultiTurnRollout) or TRL's tool loop on aem_agent.grpo.tool_env's "
                    "environments, which report per-turn rewards and states"
                )


@dataclass(frozen=True)
class Credit:
    """What an estimator returns: one advantage per unit, and what to log about it."""

    advantage: torch.Tensor
    metrics: dict[str, float] = field(default_factory=dict)
    #: Per-unit values an estimator reports besides the advantage (e.g. AEM's α and H̄), one
    #: per unit like ``advantage``: what an outside measurement of the estimator reads.
    units: dict[str, torch.Tensor] = field(default_factory=dict)


@runtime_checkable
class CreditEstimator(Protocol):
    """Turns a :class:`TurnBatch` into per-unit advantages.

    ``name`` is what the estimator is registered under; ``needs`` lists the optional
    :class:`TurnBatch` fields it reads, so that the trainer computes entropies (possibly an
    extra forward) only when someone reads them. An estimator must be a pure function of the
    batch: it runs on every process with the same gathered batch, and each process keeps the
    advantages of its own units.
    """

    @property
    def name(self) -> str: ...

    @property
    def needs(self) -> frozenset[str]: ...

    def __call__(self, batch: TurnBatch) -> Credit: ...


class CreditError(AEMError, ValueError):
    """A credit chain cannot run: an unknown name, or a field the estimator needs is missing."""


@dataclass(frozen=True)
class Chain:
    """Estimators applied in order, each starting from the advantage the previous one gave.

    ``Chain((GiGPO(), AEM()))`` is GiGPO's episode + step advantage, then AEM's α on it.
    """

    estimators: tuple[CreditEstimator, ...]

    @property
    def name(self) -> str:
        return "+".join(e.name for e in self.estimators)

    @property
    def needs(self) -> frozenset[str]:
        return frozenset().union(*(e.needs for e in self.estimators))

    def __call__(self, batch: TurnBatch) -> Credit:
        metrics: dict[str, float] = {}
        units: dict[str, torch.Tensor] = {}
        for estimator in self.estimators:
            credit = estimator(batch)
            if credit.advantage.shape != batch.advantage.shape:
                raise CreditError(
                    f"credit estimator {estimator.name!r} returned advantages of shape "
                    f"{tuple(credit.advantage.shape)} for {len(batch)} units; return one per unit"
                )
            metrics.update(credit.metrics)
            units.update(credit.units)
            batch = dataclasses.replace(batch, advantage=credit.advantage.to(torch.float64))
        return Credit(batch.advantage, metrics, units)


@dataclass(frozen=True)
class GRPO:
    """The episode-level GRPO advantage TRL computed, unchanged: the start of every chain."""

    name: str = "grpo"
    needs: frozenset[str] = frozenset()

    def __call__(self, batch: TurnBatch) -> Credit:
        return Credit(batch.advantage)


def group_index(*keys: torch.Tensor) -> torch.Tensor:
    """Dense ids ``0..n-1`` of the distinct tuples of ``keys`` (equal length, integer)."""
    stacked = torch.stack([k.to(torch.long) for k in keys], dim=1)
    return torch.unique(stacked, dim=0, return_inverse=True)[1]


def normalise_in_groups(
    values: torch.Tensor, group: torch.Tensor, *, scale: bool, eps: float = 1e-6
) -> torch.Tensor:
    """``values`` centred on their group's mean and, with ``scale``, divided by the group's
    unbiased std + ``eps`` (a group of one has std 1, as in verl-agent); ``group`` holds dense
    ids ``0..n-1`` (:func:`group_index`). GRPO's and GiGPO's normalisation, in one place."""
    values = values.to(torch.float64)
    if len(values) == 0:
        return values
    n = int(group.max()) + 1
    count = torch.zeros(n, dtype=torch.float64).index_add_(0, group, torch.ones_like(values))
    total = torch.zeros(n, dtype=torch.float64).index_add_(0, group, values)
    centred = values - (total / count)[group]
    if not scale:
        return centred
    squares = torch.zeros(n, dtype=torch.float64).index_add_(0, group, centred**2)
    std = torch.where(count > 1, (squares / (count - 1).clamp(min=1)).sqrt(), 1.0)
    return centred / (std[group] + eps)
