"""An ALFWorld game's layout and state, parsed from its ALFRED-form PDDL problem.

The native engine plays over these two: :class:`Layout` is what a step never changes (what
exists, where receptacles stand, affordances, what fits where), :class:`State` the fluents a
step changes; :func:`parse_problem` reads both from the ``:init`` facts of a problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from aem_envs.alfworld.pddl import demangled_names
from aem_envs.core.errors import DataError

_TOKEN = re.compile(r"\(|\)|[^\s()]+")


class UnsupportedGame(DataError):
    """A problem uses PDDL the native engine does not model; the upstream engine must run it."""


def _sexpr(text: str) -> list:
    text = re.sub(r";[^\n]*", "", text)
    stack: list[list] = [[]]
    for token in _TOKEN.findall(text):
        if token == "(":
            stack.append([])
        elif token == ")":
            if len(stack) < 2:
                raise DataError("PDDL problem has an unbalanced ')'")
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(token.lower())
    if len(stack) != 1 or not stack[0]:
        raise DataError("PDDL problem has an unbalanced '(' or is empty")
    return stack[0][0]


def _section(define: list, key: str) -> list:
    for part in define:
        if isinstance(part, list) and part and part[0] == key:
            return part[1:]
    raise DataError(f"PDDL problem has no ({key} ...) section")


@dataclass(frozen=True)
class Layout:
    """The static part of a game: what exists, where receptacles are, what fits where."""

    receptacles: tuple[str, ...]
    recep_loc: dict[str, str]
    rtype: dict[str, str]
    otype: dict[str, str]
    names: dict[str, str]
    openable: frozenset[str]
    pickupable: frozenset[str]
    receptacle_objects: frozenset[str]
    can_contain: frozenset[tuple[str, str]]
    cleanable: frozenset[str]
    heatable: frozenset[str]
    coolable: frozenset[str]
    toggleable: frozenset[str]
    sliceable: frozenset[str]
    at_location: dict[str, tuple[str, ...]]


@dataclass
class State:
    """The fluent part: where the agent and objects are, what is open, held and changed."""

    agent_loc: str
    held: str | None
    in_recep: set[tuple[str, str]]
    not_in_recep: set[tuple[str, str]] = field(default_factory=set)
    obj_loc: set[tuple[str, str]] = field(default_factory=set)
    in_recep_object: set[tuple[str, str]] = field(default_factory=set)
    opened: set[str] = field(default_factory=set)
    clean: set[str] = field(default_factory=set)
    hot: set[str] = field(default_factory=set)
    cool: set[str] = field(default_factory=set)
    on: set[str] = field(default_factory=set)
    toggled: set[str] = field(default_factory=set)
    sliced: set[str] = field(default_factory=set)

    def copy(self) -> State:
        values: dict[str, Any] = {  # vars() gives Any
            k: (set(v) if isinstance(v, set) else v) for k, v in vars(self).items()
        }
        return State(**values)


_STATIC = {
    "openable",
    "pickupable",
    "isreceptacleobject",
    "cleanable",
    "heatable",
    "coolable",
    "toggleable",
    "sliceable",
}
_FLAGS = {
    "opened": "opened",
    "isclean": "clean",
    "ishot": "hot",
    "iscool": "cool",
    "ison": "on",
    "istoggled": "toggled",
    "issliced": "sliced",
}
_IGNORED = {"checked", "examined", "full", "isreceptacleobjectfull", "moveable", "wasinreceptacle"}


def parse_problem(text: str) -> tuple[Layout, State]:
    """Read an ALFRED-form problem into a layout and an initial state.

    Raises :class:`UnsupportedGame` for facts outside what this engine models (the caller
    then plays the game on the upstream engine instead).
    """
    define = _sexpr(text)
    if not (isinstance(define, list) and define and define[0] == "define"):
        raise DataError("PDDL problem does not start with (define ...)")
    static: dict[str, set] = {name: set() for name in _STATIC}
    flags: dict[str, set[str]] = {name: set() for name in _FLAGS.values()}
    pairs: dict[str, set[tuple[str, str]]] = {
        k: set()
        for k in (
            "receptacletype",
            "objecttype",
            "cancontain",
            "inreceptacle",
            "objectatlocation",
            "receptacleatlocation",
            "inreceptacleobject",
        )
    }
    agent_loc: str | None = None
    held: str | None = None
    symbols: set[str] = set()
    for atom in _section(define, ":init"):
        if not isinstance(atom, list) or not atom:
            raise DataError(f"PDDL problem has a malformed :init entry {atom!r}")
        head, args = atom[0], atom[1:]
        if head == "=":
            continue
        if not all(isinstance(a, str) for a in args):
            raise UnsupportedGame(f"unsupported :init entry {atom!r}")
        symbols.update(args)
        if head in static and len(args) == 1:
            static[head].add(args[0])
        elif head in _FLAGS and len(args) == 1:
            flags[_FLAGS[head]].add(args[0])
        elif head in pairs and len(args) == 2:
            pairs[head].add((args[0], args[1]))
        elif head == "atlocation" and len(args) == 2:
            agent_loc = args[1]
        elif head == "holds" and len(args) == 2:
            held = args[1]
        elif head in {"holdsany", "holdsanyreceptacleobject"} or head in _IGNORED:
            continue
        else:
            raise UnsupportedGame(f"the native engine does not model ({' '.join(atom)})")
    if agent_loc is None:
        raise DataError("PDDL problem has no (atLocation agent1 ...) fact")
    recep_loc: dict[str, str] = {}
    for recep, loc in pairs["receptacleatlocation"]:
        if recep_loc.setdefault(recep, loc) != loc:
            raise UnsupportedGame(f"receptacle {recep} stands at more than one location")
    at_location: dict[str, list[str]] = {}
    for recep in sorted(recep_loc):
        at_location.setdefault(recep_loc[recep], []).append(recep)
    layout = Layout(
        receptacles=tuple(sorted(recep_loc)),
        recep_loc=recep_loc,
        rtype=dict(pairs["receptacletype"]),
        otype=dict(pairs["objecttype"]),
        names=demangled_names(symbols),
        openable=frozenset(static["openable"]),
        pickupable=frozenset(static["pickupable"]),
        receptacle_objects=frozenset(static["isreceptacleobject"]),
        can_contain=frozenset(pairs["cancontain"]),
        cleanable=frozenset(static["cleanable"]),
        heatable=frozenset(static["heatable"]),
        coolable=frozenset(static["coolable"]),
        toggleable=frozenset(static["toggleable"]),
        sliceable=frozenset(static["sliceable"]),
        at_location={loc: tuple(rs) for loc, rs in at_location.items()},
    )
    state = State(
        agent_loc=agent_loc,
        held=held,
        in_recep=pairs["inreceptacle"],
        obj_loc=pairs["objectatlocation"],
        in_recep_object=pairs["inreceptacleobject"],
        opened=flags["opened"],
        clean=flags["clean"],
        hot=flags["hot"],
        cool=flags["cool"],
        on=flags["on"],
        toggled=flags["toggled"],
        sliced=flags["sliced"],
    )
    return layout, state
