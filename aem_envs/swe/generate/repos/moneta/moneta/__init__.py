"""moneta: exact money arithmetic on Decimal, allocation and formatting."""

from moneta.allocate import allocate, split_evenly
from moneta.currency import Currency, get_currency
from moneta.errors import CurrencyMismatchError, UnknownCurrencyError
from moneta.format import format_money
from moneta.money import Money

__all__ = [
    "Currency",
    "CurrencyMismatchError",
    "Money",
    "UnknownCurrencyError",
    "allocate",
    "format_money",
    "get_currency",
    "split_evenly",
]
__version__ = "2.0.3"
