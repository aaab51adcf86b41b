"""Built-in filters, applied as ``{{ value|name }}`` or ``{{ value|name:"arg" }}``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tinytpl.context import Undefined

#: Replacements for HTML escaping; ``&`` must come first or it re-escapes the others.
HTML_ESCAPES = (
    ("&", "&amp;"),
    ("<", "&lt;"),
    (">", "&gt;"),
    ('"', "&quot;"),
    ("'", "&#x27;"),
)


class Markup(str):
    """Text that is already safe HTML; autoescaping leaves it alone."""


def escape(value: Any) -> Markup:
    if isinstance(value, Markup):
        return value
    text = str(value)
    for char, entity in HTML_ESCAPES:
        text = text.replace(char, entity)
    return Markup(text)


def default(value: Any, fallback: str = "") -> Any:
    return fallback if isinstance(value, Undefined) or value is None or value == "" else value


def join(value: Any, separator: str = ", ") -> str:
    return separator.join(str(item) for item in value)


FILTERS: dict[str, Callable[..., Any]] = {
    "upper": lambda value: str(value).upper(),
    "lower": lambda value: str(value).lower(),
    "title": lambda value: str(value).title(),
    "length": len,
    "default": default,
    "join": join,
    "escape": escape,
    "safe": Markup,
}
