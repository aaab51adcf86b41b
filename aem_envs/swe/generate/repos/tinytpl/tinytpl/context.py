"""Variable lookup: dotted names through mappings, attributes and sequence indexes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tinytpl.errors import UndefinedError


class Undefined:
    """What a missing variable renders as outside strict mode: nothing, and falsy."""

    def __str__(self) -> str:
        return ""

    def __bool__(self) -> bool:
        return False

    def __iter__(self):
        return iter(())


UNDEFINED = Undefined()


def _step(value: Any, part: str) -> Any:
    if isinstance(value, Mapping) and part in value:
        return value[part]
    if part.isdigit() and isinstance(value, Sequence) and not isinstance(value, str):
        index = int(part)
        return value[index] if index < len(value) else UNDEFINED
    return getattr(value, part, UNDEFINED)


def resolve(name: str, scopes: list[Mapping[str, Any]], *, strict: bool = False) -> Any:
    """The value of dotted ``name``, searching ``scopes`` innermost first."""
    head, *rest = name.split(".")
    for scope in reversed(scopes):
        if head in scope:
            value = scope[head]
            break
    else:
        if strict:
            raise UndefinedError(f"{name!r} is undefined")
        return UNDEFINED
    for part in rest:
        value = _step(value, part)
        if value is UNDEFINED:
            if strict:
                raise UndefinedError(f"{name!r} is undefined")
            break
    return value
