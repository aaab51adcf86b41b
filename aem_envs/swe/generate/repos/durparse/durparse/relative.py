"""Parse dates relative to now: ``"in 3 hours"``, ``"2 days ago"``, ``"tomorrow"``."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from durparse.duration import parse_duration
from durparse.errors import DurationError

FUTURE_RE = re.compile(r"^in\s+(?P<amount>.+)$", re.IGNORECASE)
PAST_RE = re.compile(r"^(?P<amount>.+?)\s+ago$", re.IGNORECASE)
NAMED = {
    "now": timedelta(0),
    "today": timedelta(0),
    "tomorrow": timedelta(days=1),
    "yesterday": timedelta(days=-1),
}
ARTICLE_RE = re.compile(r"^(?:a|an)\s+", re.IGNORECASE)


def _amount(text: str) -> timedelta:
    """A duration where a leading article counts as one (``an hour``)."""
    return parse_duration(ARTICLE_RE.sub("1 ", text.strip()))


def parse_relative(text: str, now: datetime) -> datetime:
    """The moment ``text`` names, counted from ``now``."""
    phrase = " ".join(text.split()).lower()
    if phrase in NAMED:
        return now + NAMED[phrase]
    future = FUTURE_RE.match(phrase)
    if future:
        return now + _amount(future.group("amount"))
    past = PAST_RE.match(phrase)
    if past:
        return now - _amount(past.group("amount"))
    raise DurationError(f"not a relative date: {text!r}")
