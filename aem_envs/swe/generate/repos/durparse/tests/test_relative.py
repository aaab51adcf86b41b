from datetime import datetime, timedelta

import pytest
from durparse import DurationError, parse_relative

NOW = datetime(2024, 6, 1, 12, 0, 0)


@pytest.mark.parametrize(
    ("text", "delta"),
    [
        ("in 3 hours", timedelta(hours=3)),
        ("2 days ago", timedelta(days=-2)),
        ("in 90 minutes", timedelta(minutes=90)),
        ("1 week ago", timedelta(weeks=-1)),
        ("IN 2 HOURS", timedelta(hours=2)),
        ("tomorrow", timedelta(days=1)),
        ("yesterday", timedelta(days=-1)),
        ("now", timedelta(0)),
    ],
)
def test_parse_relative(text, delta):
    assert parse_relative(text, NOW) == NOW + delta


@pytest.mark.parametrize("text", ["someday", "in a while", "3 hours from now", "ago"])
def test_parse_relative_rejects(text):
    with pytest.raises(DurationError):
        parse_relative(text, NOW)


# aem-task: 202
@pytest.mark.parametrize(
    ("text", "delta"),
    [
        ("in an hour", timedelta(hours=1)),
        ("a day ago", timedelta(days=-1)),
        ("in a week", timedelta(weeks=1)),
        ("An hour ago", timedelta(hours=-1)),
    ],
)
def test_parse_relative_article(text, delta):
    assert parse_relative(text, NOW) == NOW + delta


# aem-task-end
