import pytest
from moneta import Money, allocate, split_evenly


def test_allocate_exact_ratios():
    assert allocate(Money("100", "USD"), [1, 3]) == [Money("25", "USD"), Money("75", "USD")]


def test_allocate_rejects_bad_ratios():
    with pytest.raises(ValueError):
        allocate(Money("1", "USD"), [0, 0])
    with pytest.raises(ValueError):
        allocate(Money("1", "USD"), [])


def test_split_evenly_even():
    assert split_evenly(Money("9", "EUR"), 3) == [Money("3", "EUR")] * 3


def test_split_evenly_rejects_zero_parts():
    with pytest.raises(ValueError):
        split_evenly(Money("9", "EUR"), 0)


# aem-task: 302
def test_split_evenly_keeps_every_cent():
    shares = split_evenly(Money("100", "USD"), 3)
    assert shares == [Money("33.34", "USD"), Money("33.33", "USD"), Money("33.33", "USD")]
    assert sum(shares, Money.zero("USD")) == Money("100", "USD")


@pytest.mark.parametrize("ratios", [[1, 1, 1, 1, 1, 1, 1], [3, 7], [0.2, 0.3, 0.5]])
def test_allocate_sums_to_total(ratios):
    total = Money("10.01", "USD")
    assert sum(allocate(total, ratios), Money.zero("USD")) == total


def test_allocate_zero_decimal_currency():
    assert allocate(Money("100", "JPY"), [1, 2]) == [Money("34", "JPY"), Money("66", "JPY")]


# aem-task-end
