"""Exceptions raised by moneta."""


class MonetaError(Exception):
    """Base class of every moneta error."""


class UnknownCurrencyError(MonetaError, KeyError):
    """The ISO 4217 code is not in the registry."""


class CurrencyMismatchError(MonetaError, TypeError):
    """Arithmetic or comparison between amounts in different currencies."""
