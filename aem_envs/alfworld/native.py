"""The fast path: ALFWorld's text semantics in plain Python, no planner, no grammar engine.

The upstream engine grounds each game with Fast Downward at reset (hundreds of ms) and
derives every admissible command and observation through textworld's grammar engine at each
step (tens of ms). Here the ``alfred`` domain's operators and the ``alfred.twl2`` texts are
written out directly over a small state, so a reset is a parse and a step is a few set
look-ups. :mod:`aem_envs.alfworld.upstream` stays the oracle: the differential test replays
the same actions through both and requires identical text, admissible sets and ``won``.

Quirks of the upstream engine reproduced on purpose (they show in the text):

- ``go to X`` is not admissible where the agent already stands (Fast Downward drops the
  no-op operator), even for another receptacle that shares the location;
- ``examine <object>`` is admissible only for the object in hand;
- a taken object leaves a ``not_inreceptacle`` fact behind, which ``look`` lists as "next
  to" a receptacle sharing the object's new location.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from aem_envs.alfworld.grading import goal_satisfied
from aem_envs.alfworld.pddl import Goal
from aem_envs.alfworld.state import Layout, State, parse_problem

NOTHING_HAPPENS = "Nothing happens."
HELP_TEXT = (
    "Available commands:\n"
    "  look:                             look around your current location\n"
    "  inventory:                        check your current inventory\n"
    "  go to (receptacle):               move to a receptacle\n"
    "  open (receptacle):                open a receptacle\n"
    "  close (receptacle):               close a receptacle\n"
    "  take (object) from (receptacle):  take an object from a receptacle\n"
    "  move (object) to (receptacle):  place an object in or on a receptacle\n"
    "  examine (something):              examine a receptacle or an object\n"
    "  use (object):                     use an object\n"
    "  heat (object) with (receptacle):  heat an object using a receptacle\n"
    "  clean (object) with (receptacle): clean an object using a receptacle\n"
    "  cool (object) with (receptacle):  cool an object using a receptacle\n"
    "  slice (object) with (object):     slice an object using a sharp object\n"
)
_KNIVES = frozenset({"knifetype", "butterknifetype"})


# ---------------------------------------------------------------------------------- text
def display_list(items: list[str]) -> str:
    """textworld's list rendering: ``a``, ``a, and b``, ``a, b, and c``; empty → nothing."""
    if not items:
        return "nothing"
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + ", and " + items[-1]


@dataclass(frozen=True)
class Command:
    """One admissible command: its text and the operator it runs."""

    text: str
    op: str
    args: tuple[str, ...]


class NativeGame:
    """One ALFWorld game played natively; mirrors :class:`~.upstream.UpstreamGame`."""

    def __init__(self, problem: str | tuple[Layout, State], goal: Goal, instruction: str):
        layout, state = parse_problem(problem) if isinstance(problem, str) else problem
        self.layout = layout
        self._initial = state
        self.goal = goal
        self.instruction = instruction
        self.state = state.copy()
        self._commands: dict[str, Command] = {}

    # ------------------------------------------------------------------ game API
    def reset(self) -> str:
        self.state = self._initial.copy()
        self._refresh()
        return (
            "-= Welcome to TextWorld, ALFRED! =-\n\n"
            + self._look(intro=True)
            + f"\n\nYour task is to: {self.instruction}."
        )

    def step(self, command: str) -> tuple[str, bool]:
        """Run ``command``; returns (feedback, ok) where ok says it was admissible."""
        found = self._commands.get(command.strip())
        if found is None:
            return NOTHING_HAPPENS, False
        feedback = getattr(self, "_do_" + found.op)(*found.args)
        self._refresh()
        return feedback, True

    def initial_state(self) -> State:
        """A copy of the state the game starts from (what ``reset`` restores)."""
        return self._initial.copy()

    def admissible(self) -> list[str]:
        return sorted(self._commands)

    def won(self) -> bool:
        return goal_satisfied(self.layout, self.state, self.goal)

    # ------------------------------------------------------------------ operators
    def _refresh(self) -> None:
        self._commands = {c.text: c for c in reversed(list(self._applicable()))}

    def _applicable(self) -> Iterator[Command]:
        lay, st, name = self.layout, self.state, self.layout.names
        here = lay.at_location.get(st.agent_loc, ())
        yield Command("look", "look", ())
        yield Command("inventory", "inventory", ())
        yield Command("help", "help", ())
        for recep in lay.receptacles:
            if lay.recep_loc[recep] != st.agent_loc:
                yield Command(f"go to {name[recep]}", "goto", (recep,))
        held = st.held
        if held is not None:
            yield Command(f"examine {name[held]}", "examine_object", (held,))
        for recep in here:
            yield Command(f"examine {name[recep]}", "examine_receptacle", (recep,))
            is_open = recep not in lay.openable or recep in st.opened
            if recep in lay.openable:
                if recep in st.opened:
                    yield Command(f"close {name[recep]}", "close", (recep,))
                else:
                    yield Command(f"open {name[recep]}", "open", (recep,))
            if held is None and is_open:
                for obj, where in sorted(st.in_recep):
                    if where == recep and obj in lay.pickupable:
                        yield Command(f"take {name[obj]} from {name[recep]}", "take", (obj, recep))
            for obj, where in sorted(st.in_recep):
                if where == recep and obj in lay.toggleable:
                    yield Command(f"use {name[obj]}", "use", (obj,))
            if held is None:
                continue
            if is_open and (lay.rtype.get(recep), lay.otype.get(held)) in lay.can_contain:
                yield Command(f"move {name[held]} to {name[recep]}", "put", (held, recep))
            rtype = lay.rtype.get(recep)
            for verb, rt, able in (
                ("clean", "sinkbasintype", lay.cleanable),
                ("heat", "microwavetype", lay.heatable),
                ("cool", "fridgetype", lay.coolable),
            ):
                if rtype == rt and held in able:
                    yield Command(f"{verb} {name[held]} with {name[recep]}", verb, (held, recep))
        if held is not None and lay.otype.get(held) in _KNIVES:
            for obj, loc in sorted(st.obj_loc):
                if loc == st.agent_loc and obj in lay.sliceable:
                    yield Command(f"slice {name[obj]} with {name[held]}", "slice", (obj, held))

    def _do_look(self) -> str:
        return self._look(intro=False)

    def _do_inventory(self) -> str:
        if self.state.held is None:
            return "You are not carrying anything."
        return f"You are carrying: a {self.layout.names[self.state.held]}."

    def _do_help(self) -> str:
        return HELP_TEXT

    def _do_goto(self, recep: str) -> str:
        self.state.agent_loc = self.layout.recep_loc[recep]
        return f"You arrive at {self.layout.names[recep]}. " + self._examine_receptacle(recep)

    def _do_examine_receptacle(self, recep: str) -> str:
        return self._examine_receptacle(recep)

    def _do_examine_object(self, obj: str) -> str:
        return self._examine_object(obj)

    def _do_open(self, recep: str) -> str:
        self.state.opened.add(recep)
        return f"You open the {self.layout.names[recep]}. " + self._examine_receptacle(recep)

    def _do_close(self, recep: str) -> str:
        self.state.opened.discard(recep)
        return f"You close the {self.layout.names[recep]}."

    def _do_take(self, obj: str, recep: str) -> str:
        st = self.state
        st.in_recep.discard((obj, recep))
        st.not_in_recep.add((obj, recep))
        st.obj_loc.discard((obj, st.agent_loc))
        st.held = obj
        names = self.layout.names
        return f"You pick up the {names[obj]} from the {names[recep]}."

    def _do_put(self, obj: str, recep: str) -> str:
        st = self.state
        st.in_recep.add((obj, recep))
        st.not_in_recep.discard((obj, recep))
        st.obj_loc.add((obj, st.agent_loc))
        st.held = None
        names = self.layout.names
        return f"You move the {names[obj]} to the {names[recep]}."

    def _do_clean(self, obj: str, recep: str) -> str:
        self.state.clean.add(obj)
        return f"You clean the {self.layout.names[obj]} using the {self.layout.names[recep]}."

    def _do_heat(self, obj: str, recep: str) -> str:
        self.state.hot.add(obj)
        self.state.cool.discard(obj)
        return f"You heat the {self.layout.names[obj]} using the {self.layout.names[recep]}."

    def _do_cool(self, obj: str, recep: str) -> str:
        self.state.cool.add(obj)
        self.state.hot.discard(obj)
        return f"You cool the {self.layout.names[obj]} using the {self.layout.names[recep]}."

    def _do_use(self, obj: str) -> str:
        st = self.state
        if obj in st.on:
            st.on.discard(obj)
        else:
            st.on.add(obj)
        st.toggled.add(obj)
        return f"You turn on the {self.layout.names[obj]}."

    def _do_slice(self, obj: str, knife: str) -> str:
        self.state.sliced.add(obj)
        names = self.layout.names
        return f"You sliced the {names[obj]} with the {names[knife]}."

    # ------------------------------------------------------------------ descriptions
    def _contents(self, recep: str) -> str:
        names = self.layout.names
        return display_list([f"a {names[o]}" for o, r in sorted(self.state.in_recep) if r == recep])

    def _examine_receptacle(self, recep: str) -> str:
        name = self.layout.names[recep]
        if recep in self.layout.openable:
            if recep in self.state.opened:
                return f"The {name} is open. In it, you see {self._contents(recep)}."
            return f"The {name} is closed."
        return f"On the {name}, you see {self._contents(recep)}."

    def _examine_object(self, obj: str) -> str:
        lay, st = self.layout, self.state
        name = lay.names[obj]
        if obj in lay.receptacle_objects:
            inner = [f"a {lay.names[o]}" for o, outer in sorted(st.in_recep_object) if outer == obj]
            return f"This is a normal {name}. In it, you see {display_list(inner)}."
        clean, hot, cool, sliced = (obj in s for s in (st.clean, st.hot, st.cool, st.sliced))
        for cond, text in (
            (clean and hot and sliced, f"This is a hot and clean sliced {name}."),
            (clean and cool and sliced, f"This is a cool and clean sliced {name}."),
            (clean and sliced, f"This is a clean sliced {name}."),
            (hot and sliced, f"This is a hot sliced {name}."),
            (cool and sliced, f"This is a cool sliced {name}."),
            (clean and hot, f"This is a hot and clean {name}."),
            (clean and cool, f"This is a cool and clean {name}."),
            (hot, f"This is a hot {name}."),
            (clean, f"This is a clean {name}."),
            (cool, f"This is a cold {name}."),
            (obj in lay.toggleable and obj in st.toggled, f"This {name} is on."),
            (obj in lay.sliceable and sliced, f"This is a sliced {name}."),
        ):
            if cond:
                return text
        return f"There's nothing special about {name}."

    def _look(self, *, intro: bool) -> str:
        """The ``look`` text. In the intro the grammar's query is unbound, so the middle of
        the room lists every receptacle; as an action it is bound to the agent's location,
        where no receptacle stands, so it lists nothing."""
        lay, st = self.layout, self.state
        here = lay.at_location.get(st.agent_loc, ())
        if not here:
            listed = [f"a {lay.names[r]}" for r in lay.receptacles] if intro else []
            return (
                "You are in the middle of a room. Looking quickly around you, you see "
                f"{display_list(listed)}."
            )
        facing = display_list([lay.names[r] for r in here])
        beside = [
            f"a {lay.names[obj]}"
            for obj, loc in sorted(st.obj_loc)
            if loc == st.agent_loc
            for recep in here
            if (obj, recep) in st.not_in_recep
        ]
        return f"You are facing the {facing}. Next to it, you see {display_list(beside)}."
