import pytest
from moneta import Money, format_money


@pytest.mark.parametrize(
    ("money", "text"),
    [
        (Money("1234.5", "USD"), "$1,234.50"),
        (Money("-3.1", "EUR"), "-€3.10"),
        (Money("0", "GBP"), "£0.00"),
        (Money("1000000", "USD"), "$1,000,000.00"),
    ],
)
def test_format_money(money, text):
    assert format_money(money) == text


def test_format_without_symbol():
    assert format_money(Money("12", "EUR"), symbol=False) == "12.00 EUR"


# aem-task: 303
@pytest.mark.parametrize(
    ("money", "text"),
    [
        (Money("1234.5", "JPY"), "¥1,234"),
        (Money("1234.5678", "KWD"), "KD 1,234.568"),
        (Money("-7", "JPY"), "-¥7"),
    ],
)
def test_format_uses_currency_minor_units(money, text):
    assert format_money(money) == text


def test_format_zero_decimal_without_symbol():
    assert format_money(Money("500", "JPY"), symbol=False) == "500 JPY"


# aem-task-end
