from datetime import timedelta

import pytest
from durparse import DurationError, parse_duration, parse_iso_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90 minutes", 5400),
        ("1h30m", 5400),
        ("2 days 4 hours", 187200),
        ("1.5 hours", 5400),
        ("three weeks", 1814400),
        ("10 secs", 10),
        ("1 hour, 5 minutes and 3 seconds", 3903),
    ],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "soon", "5 parsecs", "hours 5", "5 hours later"])
def test_parse_duration_rejects(text):
    with pytest.raises(DurationError):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PT5M", timedelta(minutes=5)),
        ("P1DT2H", timedelta(days=1, hours=2)),
        ("PT1H30M", timedelta(hours=1, minutes=30)),
        ("PT0.5S", timedelta(seconds=0.5)),
    ],
)
def test_parse_iso(text, expected):
    assert parse_iso_duration(text) == expected


@pytest.mark.parametrize("text", ["P", "PT", "P1M", "P1Y", "1 hour", "P1DT"])
def test_parse_iso_rejects(text):
    with pytest.raises(DurationError):
        parse_iso_duration(text)


# aem-task: 201
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("P2W", timedelta(weeks=2)),
        ("P1W3D", timedelta(days=10)),
        ("P1WT12H", timedelta(days=7, hours=12)),
    ],
)
def test_parse_iso_weeks(text, expected):
    assert parse_iso_duration(text) == expected


# aem-task-end
