"""durparse: parse and format human durations and relative dates."""

from durparse.duration import parse_duration, parse_iso_duration
from durparse.errors import DurationError
from durparse.humanize import format_duration
from durparse.relative import parse_relative

__all__ = [
    "DurationError",
    "format_duration",
    "parse_duration",
    "parse_iso_duration",
    "parse_relative",
]
__version__ = "0.4.1"
