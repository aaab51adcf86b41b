"""tinytpl: a tiny template engine with variables, filters, if and for blocks."""

from tinytpl.errors import TemplateSyntaxError, UndefinedError
from tinytpl.template import Template, render

__all__ = ["Template", "TemplateSyntaxError", "UndefinedError", "render"]
__version__ = "0.9.0"
