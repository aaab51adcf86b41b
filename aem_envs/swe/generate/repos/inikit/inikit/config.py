"""The parsed configuration: sections of options with typed getters."""

from __future__ import annotations

from collections.abc import Iterator

from inikit.errors import MissingOptionError
from inikit.interpolate import expand

BOOLEAN_STATES = {
    "1": True,
    "yes": True,
    "true": True,
    "on": True,
    "0": False,
    "no": False,
    "false": False,
    "off": False,
}

_MISSING = object()


class Section:
    """Options of one section; keys are case-insensitive, as in most INI dialects."""

    def __init__(self, config: Config, name: str) -> None:
        self._config = config
        self.name = name
        self._raw: dict[str, str] = {}

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._raw

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __getitem__(self, key: str) -> str:
        return self.get(key)

    def set_raw(self, key: str, value: str) -> None:
        self._raw[key.lower()] = value

    def raw(self, key: str) -> str:
        try:
            return self._raw[key.lower()]
        except KeyError:
            raise MissingOptionError(f"no option {key!r} in section [{self.name}]") from None

    def get(self, key: str, default: object = _MISSING) -> str:
        if key.lower() not in self._raw:
            if default is _MISSING:
                raise MissingOptionError(f"no option {key!r} in section [{self.name}]")
            return default  # type: ignore[return-value]
        return expand(self._config, self.name, key.lower())

    def getint(self, key: str) -> int:
        return int(self.get(key))

    def getfloat(self, key: str) -> float:
        return float(self.get(key))

    def getboolean(self, key: str) -> bool:
        value = self.get(key).strip().lower()
        if value not in BOOLEAN_STATES:
            raise ValueError(f"[{self.name}] {key} = {value!r} is not a boolean")
        return BOOLEAN_STATES[value]

    def getlist(self, key: str) -> list[str]:
        """Values split on newlines and commas, blanks dropped."""
        items = self.get(key).replace(",", "\n").splitlines()
        return [item.strip() for item in items if item.strip()]


class Config:
    """An ordered mapping of section name to :class:`Section`."""

    def __init__(self) -> None:
        self._sections: dict[str, Section] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._sections

    def __iter__(self) -> Iterator[str]:
        return iter(self._sections)

    def __getitem__(self, name: str) -> Section:
        try:
            return self._sections[name]
        except KeyError:
            raise MissingOptionError(f"no section [{name}]") from None

    def add_section(self, name: str) -> Section:
        return self._sections.setdefault(name, Section(self, name))

    def sections(self) -> list[str]:
        return list(self._sections)
