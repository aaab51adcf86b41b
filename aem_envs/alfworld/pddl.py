"""ALFRED-form PDDL: id mangling, problem text, name demangling and textworld game dicts.

ALFWorld's games are PDDL problems over the ``alfred`` domain whose object names are
AI2-THOR ids (``Mug|+00.12|+00.90|-01.50``) mangled into PDDL symbols
(``Mug_bar__plus_00_dot_12_bar__plus_00_dot_90_bar__minus_01_dot_50``); the text engine shows
them demangled (``mug 2``). Both engines here (upstream and native) read the same problem
text, so this module is the single place that knows the form.
"""

from __future__ import annotations

import importlib.resources
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from types import ModuleType

from aem_envs.core.errors import require

#: ALFWorld's six task types, in ALFWorld's numbering order (1..6).
TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)

_MANGLE = {"-": "_minus_", "#": "-", "|": "_bar_", "+": "_plus_", ".": "_dot_", ",": "_comma_"}
_MANGLE_RE = re.compile("|".join(re.escape(k) for k in _MANGLE))


def mangle(thor_id: str) -> str:
    """An AI2-THOR id as a PDDL symbol, exactly as ALFRED's problem writer spells it."""
    return _MANGLE_RE.sub(lambda m: _MANGLE[m.group(0)], thor_id)


def demangled_names(symbols: Iterable[str]) -> dict[str, str]:
    """Display names (``"cabinet 3"``) for lowercase PDDL symbols, as ALFWorld numbers them.

    Why reimplemented: the native engine must name things exactly like alfworld's
    ``Demangler`` (numbers assigned in sorted-id order, counting down from the last) without
    importing alfworld. Symbols without ``_bar_`` (types, ``agent1``) keep their text.
    """
    ids = sorted(set(symbols))
    counts: Counter[str] = Counter()
    for symbol in ids:
        base = _base_name(symbol)
        if base is not None:
            counts[base] += 1
    remaining = {base: list(range(1, n + 1)) for base, n in counts.items()}
    names = {}
    for symbol in ids:
        base = _base_name(symbol)
        names[symbol] = symbol + " " if base is None else f"{base} {remaining[base].pop()}"
    return names


def _base_name(symbol: str) -> str | None:
    head, sep, _ = symbol.partition("_bar_")
    if not sep:
        return None
    return head + "basin" if "basin" in symbol else head


@dataclass(frozen=True)
class Receptacle:
    """A fixed receptacle: AI2-THOR id, type (``Cabinet``) and the location it is reached at."""

    thor_id: str
    rtype: str
    location: str


@dataclass(frozen=True)
class Item:
    """A movable object: AI2-THOR id, type (``Mug``) and the receptacle it starts in."""

    thor_id: str
    otype: str
    receptacle: str


@dataclass(frozen=True)
class Goal:
    """What a game asks: task type and its ALFRED parameters (types, CamelCase)."""

    task_type: str
    obj: str
    recep: str = ""
    toggle: str = ""


@dataclass(frozen=True)
class Vocabulary:
    """The wheel's ALFRED vocabulary: types, affordances and what fits where.

    Why a value object: the problem writer and the generator both need it, and only the
    generator may import alfworld (bundled games must load without the engine installed).
    """

    object_types: frozenset[str]
    receptacle_types: frozenset[str]
    movable_receptacles: frozenset[str]
    openable: frozenset[str]
    can_contain: dict[str, frozenset[str]]
    affordances: dict[str, frozenset[str]]

    @classmethod
    def from_wheel(cls) -> Vocabulary:
        constants = wheel_module("alfworld.gen.constants")
        movable = frozenset(constants.MOVABLE_RECEPTACLES)
        receptacle_types = frozenset(constants.RECEPTACLES - movable)
        return cls(
            object_types=frozenset(constants.OBJECTS_SET - receptacle_types),
            receptacle_types=receptacle_types,
            movable_receptacles=movable,
            openable=frozenset(constants.OPENABLE_CLASS_SET),
            can_contain={k: frozenset(v) for k, v in constants.VAL_RECEPTACLE_OBJECTS.items()},
            affordances={k: frozenset(v) for k, v in constants.VAL_ACTION_OBJECTS.items()},
        )


#: Affordance facts written for objects. ``sliceable`` is left out as in ALFWorld's text games,
#: which exclude sliced tasks; grounding SliceObject would multiply Fast Downward's work.
_AFFORDANCE_FACTS = (
    ("cleanable", "Cleanable"),
    ("heatable", "Heatable"),
    ("coolable", "Coolable"),
    ("toggleable", "Toggleable"),
)
#: Objects present in rooms that the agent cannot pick up (lamps are switched, not carried).
NOT_PICKUPABLE = frozenset({"DeskLamp", "FloorLamp"})


def problem_text(
    name: str,
    vocab: Vocabulary,
    receptacles: Sequence[Receptacle],
    items: Sequence[Item],
    agent_location: str,
    goal_pddl: str,
) -> str:
    """The PDDL problem for a room, in the form ALFRED's ``state_to_pddl`` writes.

    ``goal_pddl`` is the wheel's goal-library text already formatted for the goal (its
    trailing parenthesis closes the ``define``, as in ALFRED).
    """
    recep_of = {r.thor_id: r for r in receptacles}
    locations = sorted({r.location for r in receptacles} | {agent_location})
    present_rtypes = sorted({r.rtype for r in receptacles})
    present_otypes = sorted({i.otype for i in items})
    lines = [f"(define (problem {name})", "(:domain alfred)", "(:objects", "agent1 - agent"]
    lines += [f"{t}Type - otype" for t in sorted(vocab.object_types)]
    lines += [f"{t}Type - rtype" for t in sorted(vocab.receptacle_types)]
    lines += [f"{mangle(i.thor_id)} - object" for i in items]
    lines += [f"{mangle(r.thor_id)} - receptacle" for r in receptacles]
    lines += [f"{mangle(loc)} - location" for loc in locations]
    lines += [")", "(:init"]
    lines += [f"(receptacleType {mangle(r.thor_id)} {r.rtype}Type)" for r in receptacles]
    lines += [f"(objectType {mangle(i.thor_id)} {i.otype}Type)" for i in items]
    lines += [
        f"(canContain {rt}Type {ot}Type)"
        for rt in present_rtypes
        for ot in present_otypes
        if ot in vocab.can_contain.get(rt, ())
    ]
    for item in items:
        sym = mangle(item.thor_id)
        if item.otype not in NOT_PICKUPABLE:
            lines.append(f"(pickupable {sym})")
        if item.otype in vocab.movable_receptacles:
            lines.append(f"(isReceptacleObject {sym})")
        for fact, affordance in _AFFORDANCE_FACTS:
            if item.otype in vocab.affordances[affordance]:
                lines.append(f"({fact} {sym})")
    lines += [f"(openable {mangle(r.thor_id)})" for r in receptacles if r.rtype in vocab.openable]
    lines.append(f"(atLocation agent1 {mangle(agent_location)})")
    for item in items:
        home = recep_of[item.receptacle]
        lines.append(f"(inReceptacle {mangle(item.thor_id)} {mangle(home.thor_id)})")
        lines.append(f"(objectAtLocation {mangle(item.thor_id)} {mangle(home.location)})")
    lines += [
        f"(receptacleAtLocation {mangle(r.thor_id)} {mangle(r.location)})" for r in receptacles
    ]
    lines.append(")")
    return "\n".join(lines) + "\n" + goal_pddl.strip() + "\n"


@cache
def domain_text() -> str:
    """The wheel's ``alfred.pddl`` (the domain every ALFWorld game uses)."""
    return _wheel_data("alfred.pddl")


@cache
def grammar_text() -> str:
    """The wheel's ``alfred.twl2`` (textworld's grammar of ALFWorld's text)."""
    return _wheel_data("alfred.twl2")


def wheel_module(module: str) -> ModuleType:
    """A module of the ``alfworld`` wheel, or one line saying which extra installs it."""
    return require("alfworld", module, feature="building ALFWorld games from the wheel")


def _wheel_data(name: str) -> str:
    wheel_module("alfworld")
    return (importlib.resources.files("alfworld") / "data" / name).read_text()


def game_dict(problem: str, instruction: str) -> dict[str, object]:
    """A ``.tw-pddl`` game as textworld's ``PddlEnv.load`` takes it (in memory, no file).

    The instruction goes into the grammar where ALFWorld's ``add_task_to_grammar`` puts it,
    so the first observation ends ``Your task is to: <instruction>.``.
    """
    return {
        "pddl_domain": domain_text(),
        "grammar": grammar_text().replace("UNKNOWN GOAL", instruction),
        "pddl_problem": problem,
        "solvable": True,
    }
