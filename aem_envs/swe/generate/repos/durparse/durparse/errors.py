"""Exceptions raised by durparse."""


class DurationError(ValueError):
    """The text is not a duration or date durparse understands."""
