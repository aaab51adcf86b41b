"""Exceptions raised by tinytpl."""


class TemplateError(Exception):
    """Base class of every tinytpl error."""


class TemplateSyntaxError(TemplateError):
    """The template text is malformed (unclosed tag, unknown block, bad filter)."""


class UndefinedError(TemplateError, KeyError):
    """A variable is not defined in the context (in strict mode)."""
