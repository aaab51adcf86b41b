"""Unit names and their length in seconds."""

from __future__ import annotations

from durparse.errors import DurationError

SECONDS = {
    "second": 1,
    "minute": 60,
    "hour": 3600,
    "day": 86400,
    "week": 604800,
}

ALIASES = {
    "s": "second",
    "sec": "second",
    "secs": "second",
    "m": "minute",
    "min": "minute",
    "mins": "minute",
    "h": "hour",
    "hr": "hour",
    "hrs": "hour",
    "d": "day",
    "w": "week",
    "wk": "week",
}

#: Number words accepted in place of digits.
NUMBER_WORDS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "ten": 10,
}


def unit_seconds(name: str) -> int:
    """Seconds in unit ``name`` (singular, plural or abbreviated)."""
    key = name.lower()
    key = ALIASES.get(key, key)
    if key not in SECONDS and key.endswith("s"):
        key = key[:-1]
    if key not in SECONDS:
        raise DurationError(f"unknown unit {name!r}")
    return SECONDS[key]


def parse_number(word: str) -> float:
    """A count written as digits (``3``, ``1.5``) or as a word (``three``)."""
    lowered = word.lower()
    if lowered in NUMBER_WORDS:
        return NUMBER_WORDS[lowered]
    try:
        return float(lowered)
    except ValueError:
        raise DurationError(f"not a number: {word!r}") from None
