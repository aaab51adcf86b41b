"""Split INI text into classified lines.

Each line becomes a :class:`Line` of one kind: ``section``, ``option``, ``continuation``
or ``blank`` (comments count as blank). The parser works on these, never on raw text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from inikit.errors import ParseError

SECTION_RE = re.compile(r"^\[(?P<name>[^\]]+)\]\s*$")
OPTION_RE = re.compile(r"^(?P<key>[^=:\s][^=:]*?)\s*[=:]\s*(?P<value>.*)$")
COMMENT_PREFIXES = ("#", ";")


@dataclass(frozen=True)
class Line:
    lineno: int
    kind: str
    key: str = ""
    value: str = ""


def strip_inline_comment(value: str) -> str:
    """Drop a trailing comment: a ``#`` or ``;`` preceded by whitespace starts one."""
    for index, char in enumerate(value):
        if char in COMMENT_PREFIXES and index > 0 and value[index - 1].isspace():
            return value[:index].rstrip()
    return value.rstrip()


def tokenize(text: str) -> list[Line]:
    lines: list[Line] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith(COMMENT_PREFIXES):
            lines.append(Line(lineno, "blank"))
            continue
        if raw[0] in " \t":
            lines.append(Line(lineno, "continuation", value=strip_inline_comment(stripped)))
            continue
        section = SECTION_RE.match(stripped)
        if section:
            lines.append(Line(lineno, "section", key=section.group("name").strip()))
            continue
        option = OPTION_RE.match(stripped)
        if option:
            value = strip_inline_comment(option.group("value"))
            lines.append(Line(lineno, "option", key=option.group("key"), value=value))
            continue
        raise ParseError(lineno, f"cannot parse {stripped!r}")
    return lines
