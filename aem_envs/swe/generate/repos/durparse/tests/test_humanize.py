from datetime import timedelta

import pytest
from durparse import format_duration


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(timedelta(seconds=0), "0 seconds", id="zero"),
        pytest.param(timedelta(seconds=45), "45 seconds", id="under a minute"),
        pytest.param(timedelta(seconds=5400), "1 hour 30 minutes", id="hour and a half"),
        pytest.param(timedelta(days=3, hours=5), "3 days 5 hours", id="days and hours"),
        pytest.param(timedelta(seconds=-90), "-1 minute 30 seconds", id="negative"),
    ],
)
def test_format_duration(value, text):
    assert format_duration(value) == text


def test_format_duration_parts():
    assert format_duration(timedelta(days=1, hours=2, minutes=3), parts=3) == (
        "1 day 2 hours 3 minutes"
    )


# aem-task: 203
@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(timedelta(hours=1), "1 hour", id="exactly one hour"),
        pytest.param(timedelta(minutes=1), "1 minute", id="exactly one minute"),
        pytest.param(timedelta(weeks=2), "2 weeks", id="exactly two weeks"),
        pytest.param(timedelta(days=1, seconds=1), "1 day 1 second", id="day and a second"),
    ],
)
def test_format_duration_exact_units(value, text):
    assert format_duration(value, parts=2) == text


# aem-task-end
