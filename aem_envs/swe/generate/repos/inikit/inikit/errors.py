"""Exceptions raised by inikit."""


class InikitError(Exception):
    """Base class of every inikit error."""


class ParseError(InikitError):
    """The text is not valid INI; carries the 1-based line number."""

    def __init__(self, lineno: int, message: str) -> None:
        super().__init__(f"line {lineno}: {message}")
        self.lineno = lineno


class MissingOptionError(InikitError, KeyError):
    """An option or section that was asked for does not exist."""


class InterpolationError(InikitError):
    """A ``${...}`` reference cannot be expanded."""
