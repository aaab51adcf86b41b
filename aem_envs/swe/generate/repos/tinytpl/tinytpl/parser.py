"""Build the node tree from tokens."""

from __future__ import annotations

from tinytpl.errors import TemplateSyntaxError
from tinytpl.lexer import Token, tokenize
from tinytpl.nodes import Expression, For, If, Node, Text, Var


def parse(source: str) -> list[Node]:
    tokens = tokenize(source)
    nodes, end = _parse_until(tokens, 0, ())
    if end != len(tokens):
        raise TemplateSyntaxError(f"line {tokens[end].lineno}: unexpected {tokens[end].value!r}")
    return nodes


def _parse_until(tokens: list[Token], pos: int, stops: tuple[str, ...]) -> tuple[list[Node], int]:
    nodes: list[Node] = []
    while pos < len(tokens):
        token = tokens[pos]
        if token.kind == "text":
            nodes.append(Text(token.value))
        elif token.kind == "var":
            nodes.append(Var(Expression.parse(token.value)))
        else:
            word = token.value.split()[0] if token.value else ""
            if word in stops:
                return nodes, pos
            if word == "if":
                node, pos = _parse_if(tokens, pos)
            elif word == "for":
                node, pos = _parse_for(tokens, pos)
            else:
                raise TemplateSyntaxError(f"line {token.lineno}: unknown block {token.value!r}")
            nodes.append(node)
        pos += 1
    if stops:
        raise TemplateSyntaxError(f"missing {{% {stops[-1]} %}}")
    return nodes, pos


def _parse_if(tokens: list[Token], pos: int) -> tuple[If, int]:
    words = tokens[pos].value.split(None, 1)
    if len(words) < 2:
        raise TemplateSyntaxError(f"line {tokens[pos].lineno}: if without a condition")
    condition = words[1]
    negate = condition.startswith("not ")
    node = If(Expression.parse(condition[4:] if negate else condition), negate)
    node.body, pos = _parse_until(tokens, pos + 1, ("else", "endif"))
    if tokens[pos].value == "else":
        node.orelse, pos = _parse_until(tokens, pos + 1, ("endif",))
    return node, pos


def _parse_for(tokens: list[Token], pos: int) -> tuple[For, int]:
    words = tokens[pos].value.split()
    if len(words) != 4 or words[2] != "in":
        raise TemplateSyntaxError(f"line {tokens[pos].lineno}: expected 'for x in items'")
    node = For(words[1], Expression.parse(words[3]))
    node.body, pos = _parse_until(tokens, pos + 1, ("else", "endfor"))
    if tokens[pos].value == "else":
        node.orelse, pos = _parse_until(tokens, pos + 1, ("endfor",))
    return node, pos
