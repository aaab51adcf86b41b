"""Format durations for people: ``timedelta(seconds=5400)`` → ``"1 hour 30 minutes"``."""

from __future__ import annotations

from datetime import timedelta

from durparse.units import SECONDS

ORDER = ("week", "day", "hour", "minute", "second")


def _plural(count: int, unit: str) -> str:
    return f"{count} {unit}" if count == 1 else f"{count} {unit}s"


def format_duration(value: timedelta, *, parts: int = 2) -> str:
    """The largest ``parts`` non-zero units of ``value``; ``"0 seconds"`` for zero."""
    remaining = int(abs(value.total_seconds()))
    pieces: list[str] = []
    for unit in ORDER:
        size = SECONDS[unit]
        if remaining >= size:
            count, remaining = divmod(remaining, size)
            pieces.append(_plural(count, unit))
        if len(pieces) == parts:
            break
    text = " ".join(pieces) or "0 seconds"
    return f"-{text}" if value.total_seconds() < 0 else text
