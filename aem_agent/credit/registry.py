"""Credit estimators by name: ``grpo``, ``turn-mean``, ``turn-penalty``, ``gigpo``, ``aem``, and
chains such as ``gigpo+aem`` or ``turn-penalty+aem``.

Why names: ``AEMConfig.credit`` and ``aem train --credit`` choose the chain as text, so a YAML
file or a command line can select it, and a user's estimator registered with
:func:`register` is selected the same way as the built-in ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aem_agent.credit.aem import AEM
from aem_agent.credit.base import GRPO, Chain, CreditError, CreditEstimator
from aem_agent.credit.gigpo import GiGPO
from aem_agent.credit.turn_mean import TurnMean
from aem_agent.credit.turn_penalty import TurnPenalty

#: Builds an estimator from the training settings (the ``AEMConfig``; typed loosely here
#: because the config names its credit chain and so imports this module).
Factory = Callable[[Any], CreditEstimator]

_REGISTRY: dict[str, Factory] = {
    "grpo": lambda _: GRPO(),
    "turn-mean": lambda _: TurnMean(),
    "turn-penalty": TurnPenalty.from_config,
    "gigpo": GiGPO.from_config,
    "aem": AEM.from_config,
}


def register(name: str, factory: Factory) -> None:
    """Make ``name`` selectable in ``credit`` (alone or in a ``+`` chain)."""
    if not name or "+" in name or name != name.strip():
        raise CreditError(f"credit estimator name {name!r} must be non-empty, without '+'")
    _REGISTRY[name] = factory


def unregister(name: str) -> None:
    """Forget a registered estimator (tests that register one remove it again)."""
    _REGISTRY.pop(name, None)


def names() -> list[str]:
    return sorted(_REGISTRY)


def parse(spec: str) -> list[str]:
    """The estimator names of a chain such as ``"gigpo+aem"``, checked against the registry."""
    parts = [part.strip() for part in spec.split("+")]
    unknown = [p for p in parts if p not in _REGISTRY]
    if unknown or not parts:
        raise CreditError(
            f"credit={spec!r}: unknown estimator {unknown[0] if unknown else ''!r}; "
            f"choose from {names()} joined by '+', e.g. 'gigpo+aem'"
        )
    if len(set(parts)) != len(parts):
        raise CreditError(f"credit={spec!r} names an estimator twice")
    return parts


def build(spec: str, config: Any) -> Chain:
    """The chain ``spec`` names, built from ``config``."""
    return Chain(tuple(_REGISTRY[name](config) for name in parse(spec)))
