"""Parse durations: ``"1h30m"``, ``"90 minutes"``, ``"2 days 4 hours"`` and ISO 8601."""

from __future__ import annotations

import re
from datetime import timedelta

from durparse.errors import DurationError
from durparse.units import parse_number, unit_seconds

PART_RE = re.compile(r"(?P<count>\d+(?:\.\d+)?|[a-z]+)\s*(?P<unit>[a-z]+)", re.IGNORECASE)
ISO_RE = re.compile(
    r"^P(?:(?P<weeks>\d+)W)?(?:(?P<days>\d+)D)?"
    r"(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)


def parse_duration(text: str) -> timedelta:
    """A duration made of ``<count> <unit>`` parts, with or without spaces and commas."""
    cleaned = text.strip().replace(",", " ").replace(" and ", " ")
    if not cleaned:
        raise DurationError("empty duration")
    total = 0.0
    position = 0
    for match in PART_RE.finditer(cleaned):
        if cleaned[position : match.start()].strip():
            raise DurationError(f"cannot parse {text!r}")
        total += parse_number(match.group("count")) * unit_seconds(match.group("unit"))
        position = match.end()
    if position == 0 or cleaned[position:].strip():
        raise DurationError(f"cannot parse {text!r}")
    return timedelta(seconds=total)


def parse_iso_duration(text: str) -> timedelta:
    """An ISO 8601 duration such as ``P1DT2H`` (years and months have no fixed length)."""
    match = ISO_RE.match(text.strip().upper())
    if not match or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise DurationError(f"not an ISO 8601 duration (years/months unsupported): {text!r}")
    parts = {name: float(value) for name, value in match.groupdict().items() if value}
    return timedelta(**parts)
