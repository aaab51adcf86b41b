"""Format money for display: ``$1,234.50``, ``-€3.10``, ``¥1,235``."""

from __future__ import annotations

from moneta.money import Money


def format_money(money: Money, *, symbol: bool = True) -> str:
    """Grouped thousands, the currency's own number of decimals, sign before the symbol."""
    currency = money.currency
    amount = money.rounded().amount
    digits = f"{abs(amount):,.{currency.minor_units}f}"
    prefix = currency.symbol if symbol else ""
    suffix = "" if symbol else f" {currency.code}"
    sign = "-" if amount < 0 else ""
    return f"{sign}{prefix}{digits}{suffix}"
