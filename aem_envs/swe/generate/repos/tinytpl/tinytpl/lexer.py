"""Split template text into text, ``{{ variable }}`` and ``{% block %}`` tokens."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tinytpl.errors import TemplateSyntaxError

TAG_RE = re.compile(r"({{.*?}}|{%.*?%})", re.DOTALL)


@dataclass(frozen=True)
class Token:
    kind: str  # "text", "var" or "block"
    value: str
    lineno: int


def tokenize(source: str) -> list[Token]:
    tokens: list[Token] = []
    lineno = 1
    for piece in TAG_RE.split(source):
        if piece.startswith("{{"):
            tokens.append(Token("var", piece[2:-2].strip(), lineno))
        elif piece.startswith("{%"):
            tokens.append(Token("block", piece[2:-2].strip(), lineno))
        elif piece:
            if "{{" in piece or "{%" in piece:
                raise TemplateSyntaxError(f"line {lineno}: unclosed tag")
            tokens.append(Token("text", piece, lineno))
        lineno += piece.count("\n")
    return tokens
