"""Split an amount by ratios without losing or creating a single minor unit."""

from __future__ import annotations

from decimal import ROUND_DOWN, Decimal

from moneta.money import Money, Number, to_decimal


def allocate(total: Money, ratios: list[Number]) -> list[Money]:
    """Shares of ``total`` proportional to ``ratios`` that sum exactly to ``total``.

    Each share is first rounded down to the minor unit; the minor units left over go
    one each to the first shares, so the result is deterministic.
    """
    weights = [to_decimal(r) for r in ratios]
    if not weights or any(w < 0 for w in weights) or sum(weights) == 0:
        raise ValueError("ratios must be non-negative and not all zero")
    quantum = total.currency.quantum
    amount = total.rounded().amount
    whole = sum(weights)
    shares = [(amount * w / whole).quantize(quantum, rounding=ROUND_DOWN) for w in weights]
    leftover = int((amount - sum(shares, Decimal(0))) / quantum)
    for index in range(leftover):
        shares[index % len(shares)] += quantum
    return [Money(share, total.currency) for share in shares]


def split_evenly(total: Money, parts: int) -> list[Money]:
    if parts < 1:
        raise ValueError("parts must be at least 1")
    return allocate(total, [1] * parts)
