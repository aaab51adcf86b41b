"""The template tree and how each node renders."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tinytpl.context import resolve
from tinytpl.errors import TemplateSyntaxError
from tinytpl.filters import FILTERS, escape


@dataclass
class RenderState:
    scopes: list[Mapping[str, Any]]
    autoescape: bool
    strict: bool


class Node:
    def render(self, state: RenderState) -> str:
        raise NotImplementedError


@dataclass
class Text(Node):
    text: str

    def render(self, state: RenderState) -> str:
        return self.text


@dataclass
class Expression:
    """A dotted name or quoted literal followed by ``|filter`` / ``|filter:"arg"`` steps."""

    name: str
    filters: list[tuple[str, str | None]]

    @classmethod
    def parse(cls, source: str) -> Expression:
        head, *steps = [part.strip() for part in source.split("|")]
        if not head:
            raise TemplateSyntaxError(f"empty expression in {source!r}")
        filters: list[tuple[str, str | None]] = []
        for step in steps:
            name, _, arg = step.partition(":")
            if name not in FILTERS:
                raise TemplateSyntaxError(f"unknown filter {name!r}")
            filters.append((name, arg.strip().strip("\"'") if arg else None))
        return cls(head, filters)

    def evaluate(self, state: RenderState) -> Any:
        if self.name[0] in "\"'":
            value: Any = self.name.strip("\"'")
        else:
            value = resolve(self.name, state.scopes, strict=state.strict)
        for name, arg in self.filters:
            value = FILTERS[name](value) if arg is None else FILTERS[name](value, arg)
        return value


@dataclass
class Var(Node):
    expression: Expression

    def render(self, state: RenderState) -> str:
        value = self.expression.evaluate(state)
        return str(escape(value)) if state.autoescape else str(value)


@dataclass
class If(Node):
    condition: Expression
    negate: bool
    body: list[Node] = field(default_factory=list)
    orelse: list[Node] = field(default_factory=list)

    def render(self, state: RenderState) -> str:
        truth = bool(self.condition.evaluate(state)) != self.negate
        return render_nodes(self.body if truth else self.orelse, state)


@dataclass
class For(Node):
    target: str
    iterable: Expression
    body: list[Node] = field(default_factory=list)
    orelse: list[Node] = field(default_factory=list)

    def render(self, state: RenderState) -> str:
        items = list(self.iterable.evaluate(state))
        if not items:
            return render_nodes(self.orelse, state)
        out = []
        for i, item in enumerate(items):
            loop = {
                "index": i + 1,
                "index0": i,
                "first": i == 0,
                "last": i == len(items) - 1,
                "length": len(items),
            }
            state.scopes.append({self.target: item, "loop": loop})
            try:
                out.append(render_nodes(self.body, state))
            finally:
                state.scopes.pop()
        return "".join(out)


def render_nodes(nodes: list[Node], state: RenderState) -> str:
    return "".join(node.render(state) for node in nodes)
