from decimal import ROUND_HALF_UP, Decimal

import pytest
from moneta import CurrencyMismatchError, Money, UnknownCurrencyError


def test_addition():
    assert Money("1.10", "USD") + Money("2.20", "USD") == Money("3.30", "USD")


def test_subtraction_and_negation():
    assert Money("5", "EUR") - Money("7.5", "EUR") == -Money("2.5", "EUR")


def test_multiplication_by_decimal():
    assert Money("19.99", "USD") * 3 == Money("59.97", "USD")
    assert Decimal("0.5") * Money("3", "USD") == Money("1.5", "USD")


def test_currency_mismatch():
    with pytest.raises(CurrencyMismatchError):
        Money("1", "USD") + Money("1", "EUR")


def test_unknown_currency():
    with pytest.raises(UnknownCurrencyError):
        Money("1", "XYZ")


def test_ordering():
    assert Money("1", "USD") < Money("2", "USD")
    assert max(Money("3", "GBP"), Money("2", "GBP")) == Money("3", "GBP")


def test_immutable():
    with pytest.raises(AttributeError):
        Money("1", "USD").amount = Decimal(2)


def test_hashable():
    assert len({Money("1.0", "USD"), Money("1.00", "USD")}) == 1


@pytest.mark.parametrize(
    ("amount", "expected"), [("2.675", "2.68"), ("2.665", "2.66"), ("-0.005", "0.00")]
)
def test_bankers_rounding(amount, expected):
    assert Money(amount, "USD").rounded() == Money(expected, "USD")


def test_rounding_mode():
    assert Money("2.665", "USD").rounded(ROUND_HALF_UP) == Money("2.67", "USD")


def test_rounding_zero_decimal_currency():
    assert Money("1234.5", "JPY").rounded() == Money("1234", "JPY")


# aem-task: 301
def test_float_amount_is_exact():
    assert Money(0.1, "USD") + Money(0.2, "USD") == Money("0.3", "USD")


def test_float_amount_repr():
    assert repr(Money(19.99, "EUR")) == "Money('19.99', 'EUR')"


# aem-task-end
