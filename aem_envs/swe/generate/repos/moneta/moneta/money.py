"""The :class:`Money` value type."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal
from functools import total_ordering

from moneta.currency import Currency, get_currency
from moneta.errors import CurrencyMismatchError

Number = Decimal | int | float | str


def to_decimal(value: Number) -> Decimal:
    """Exact conversion: floats go through ``str`` so 0.1 stays 0.1."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, float):
        return Decimal(str(value))
    return Decimal(value)


@total_ordering
class Money:
    """An amount in one currency; immutable and hashable."""

    __slots__ = ("amount", "currency")

    def __init__(self, amount: Number, currency: str | Currency) -> None:
        object.__setattr__(self, "amount", to_decimal(amount))
        object.__setattr__(self, "currency", get_currency(currency))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Money is immutable")

    def __repr__(self) -> str:
        return f"Money('{self.amount}', '{self.currency.code}')"

    def _check(self, other: object) -> Money:
        if not isinstance(other, Money):
            raise TypeError(f"expected Money, got {type(other).__name__}")
        if other.currency != self.currency:
            raise CurrencyMismatchError(f"{self.currency.code} vs {other.currency.code}")
        return other

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Money):
            return NotImplemented
        return self.currency == other.currency and self.amount == other.amount

    def __hash__(self) -> int:
        return hash((self.amount, self.currency.code))

    def __lt__(self, other: Money) -> bool:
        return self.amount < self._check(other).amount

    def __add__(self, other: Money) -> Money:
        return Money(self.amount + self._check(other).amount, self.currency)

    def __sub__(self, other: Money) -> Money:
        return Money(self.amount - self._check(other).amount, self.currency)

    def __mul__(self, factor: Number) -> Money:
        return Money(self.amount * to_decimal(factor), self.currency)

    __rmul__ = __mul__

    def __neg__(self) -> Money:
        return Money(-self.amount, self.currency)

    def rounded(self, rounding: str = ROUND_HALF_EVEN) -> Money:
        """This amount rounded to the currency's minor unit (banker's rounding by default)."""
        return Money(self.amount.quantize(self.currency.quantum, rounding=rounding), self.currency)

    @classmethod
    def zero(cls, currency: str | Currency) -> Money:
        return cls(0, currency)
