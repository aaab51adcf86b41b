"""ISO 4217 currencies moneta knows: code, minor units and symbol."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from moneta.errors import UnknownCurrencyError


@dataclass(frozen=True)
class Currency:
    code: str
    minor_units: int
    symbol: str

    @property
    def quantum(self) -> Decimal:
        """The smallest amount, e.g. ``Decimal("0.01")`` for USD, ``Decimal("1")`` for JPY."""
        return Decimal(1).scaleb(-self.minor_units)


_REGISTRY = {
    currency.code: currency
    for currency in (
        Currency("USD", 2, "$"),
        Currency("EUR", 2, "€"),
        Currency("GBP", 2, "£"),
        Currency("JPY", 0, "¥"),
        Currency("KWD", 3, "KD "),
    )
}


def get_currency(code: str | Currency) -> Currency:
    if isinstance(code, Currency):
        return code
    try:
        return _REGISTRY[code.upper()]
    except KeyError:
        raise UnknownCurrencyError(f"unknown currency {code!r}") from None
