"""Turn-level credit assignment: the interface, AEM and GiGPO, selectable by name.

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

__all__ = [
    "AEM",
    "GRPO",
    "Chain",
    "Credit",
    "CreditError",
    "CreditEstimator",
    "GiGPO",
    "TurnBatch",
    "build",
    "names",
    "parse",
    "register",
    "unregister",
]
