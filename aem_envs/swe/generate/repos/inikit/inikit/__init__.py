"""inikit: a small INI configuration reader with typed getters and interpolation."""

from inikit.config import Config, Section
from inikit.errors import InikitError, InterpolationError, MissingOptionError, ParseError
from inikit.parser import parse, parse_file

__all__ = [
    "Config",
    "InikitError",
    "InterpolationError",
    "MissingOptionError",
    "ParseError",
    "Section",
    "parse",
    "parse_file",
]
__version__ = "1.2.0"
