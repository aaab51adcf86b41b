"""The public entry point: compile once, render many times."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tinytpl.nodes import RenderState, render_nodes
from tinytpl.parser import parse


class Template:
    """A compiled template; ``autoescape`` HTML-escapes every ``{{ }}`` output."""

    def __init__(self, source: str, *, autoescape: bool = True, strict: bool = False) -> None:
        self.nodes = parse(source)
        self.autoescape = autoescape
        self.strict = strict

    def render(self, context: Mapping[str, Any] | None = None, **values: Any) -> str:
        scope = {**(context or {}), **values}
        return render_nodes(self.nodes, RenderState([scope], self.autoescape, self.strict))


def render(source: str, context: Mapping[str, Any] | None = None, **values: Any) -> str:
    return Template(source).render(context, **values)
