"""Expansion of ``${option}`` and ``${section:option}`` references in values."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from inikit.errors import InterpolationError, MissingOptionError

if TYPE_CHECKING:
    from inikit.config import Config

REFERENCE_RE = re.compile(r"\$\{(?:(?P<section>[^:}]+):)?(?P<key>[^}]+)\}")


def expand(config: Config, section: str, key: str) -> str:
    """The value of ``section.key`` with every reference replaced, recursively."""
    return _expand(config, section, key, ())


def _expand(config: Config, section: str, key: str, chain: tuple[tuple[str, str], ...]) -> str:
    here = (section, key.lower())
    if here in chain:
        cycle = " -> ".join(f"{s}:{k}" for s, k in (*chain, here))
        raise InterpolationError(f"reference cycle: {cycle}")
    raw = config[section].raw(key)

    def replace(match: re.Match[str]) -> str:
        target = match.group("section") or section
        name = match.group("key").strip()
        try:
            return _expand(config, target, name, (*chain, here))
        except MissingOptionError as exc:
            raise InterpolationError(f"[{section}] {key}: unknown reference {match[0]}") from exc

    return REFERENCE_RE.sub(replace, raw)
