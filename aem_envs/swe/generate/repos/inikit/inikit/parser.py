"""Build a :class:`~inikit.config.Config` from INI text."""

from __future__ import annotations

from pathlib import Path

from inikit.config import Config, Section
from inikit.errors import ParseError
from inikit.lexer import tokenize

DEFAULT_SECTION = "DEFAULT"


def parse(text: str) -> Config:
    """Parse ``text``; options before the first header go to ``[DEFAULT]``."""
    config = Config()
    section: Section | None = None
    last_key: str | None = None
    for line in tokenize(text):
        if line.kind == "blank":
            continue
        if line.kind == "section":
            section = config.add_section(line.key)
            last_key = None
        elif line.kind == "option":
            if section is None:
                section = config.add_section(DEFAULT_SECTION)
            section.set_raw(line.key, line.value)
            last_key = line.key
        elif line.kind == "continuation":
            if section is None or last_key is None:
                raise ParseError(line.lineno, "continuation line without an option")
            previous = section.raw(last_key)
            section.set_raw(last_key, f"{previous}\n{line.value}" if previous else line.value)
    return config


def parse_file(path: str | Path) -> Config:
    return parse(Path(path).read_text(encoding="utf-8"))
