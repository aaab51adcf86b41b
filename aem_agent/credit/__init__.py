"""Turn-level credit assignment: the interface, AEM, GiGPO and the turn-level baselines
(turn-mean, turn-penalty), selectable by name.

See ``docs/credit.md``: :class:`TurnBatch` in, :class:`Credit` out; estimators chain
(:class:`Chain`); :func:`register` makes a new one selectable as ``AEMConfig.credit``.
"""

from aem_agent.credit.aem import AEM
from aem_agent.credit.base import (
    GRPO,
    Chain,
    Credit,
    CreditError,
    CreditEstimator,
    TurnBatch,
)
from aem_agent.credit.gigpo import GiGPO
from aem_agent.credit.registry import build, names, parse, register, unregister
from aem_agent.credit.turn_mean import TurnMean
from aem_agent.credit.turn_penalty import TurnPenalty

__all__ = [
    "AEM",
    "GRPO",
    "Chain",
    "Credit",
    "CreditError",
    "CreditEstimator",
    "GiGPO",
    "TurnBatch",
    "TurnMean",
    "TurnPenalty",
    "build",
    "names",
    "parse",
    "register",
    "unregister",
]
