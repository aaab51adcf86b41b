"""Two experts for the six ALFWorld task types, both computed from the native engine's state.

The *planning* expert (:func:`next_action`) reads the whole state, hidden objects included,
and walks straight to the target. The *searching* expert (:func:`search_action`) knows only
what the agent has seen so far in the episode: it opens and visits receptacles in the order
of where objects of the target's type usually start (:func:`search_prior`, counted over a
train split) until the target is in sight, then acts like the planning expert.

Why two: the planning expert is the shortest solution (the generator unrolls it into each
bundled game's plan and keeps the game only if that plan also wins on the upstream engine),
but a policy that imitates it cannot know where it is going, because nothing in its context
says where the target is; imitating it teaches "go to the first receptacle, take whatever is
there". The searching expert's every action follows from what the observations showed, so it
is a demonstrator a model can learn from (``aem sft --env-kwargs '{"expert": "search"}'``).

Why from the state rather than a stored list: an expert is asked for "the next action" at
any point of an episode (DAgger-style relabelling, demonstrations after random prefixes),
so it must recover from wherever the agent has left things.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from aem_envs.alfworld.native import NativeGame
from aem_envs.alfworld.state import Layout, State

#: Object type → how often objects of that type start in each receptacle type.
SearchPrior = Mapping[str, Counter[str]]

_TRANSFORM = {
    "pick_clean_then_place_in_recep": ("clean", "sinkbasintype", "clean"),
    "pick_heat_then_place_in_recep": ("heat", "microwavetype", "hot"),
    "pick_cool_then_place_in_recep": ("cool", "fridgetype", "cool"),
}


def next_action(game: NativeGame) -> str:
    """The expert's next command in ``game``'s current state (``look`` if already won)."""
    lay, st, goal = game.layout, game.state, game.goal
    if game.won():
        return "look"
    targets = sorted(o for o, t in lay.otype.items() if t == goal.obj.lower() + "type")
    if goal.task_type == "look_at_obj_in_light":
        if st.held in targets:
            wanted = goal.toggle.lower() + "type"
            for obj, recep in sorted(st.in_recep):
                if lay.otype.get(obj) == wanted and obj in lay.toggleable:
                    return _at(lay, st, recep) or f"use {lay.names[obj]}"
        return _fetch(lay, st, targets, exclude=set())
    dests = sorted(r for r in lay.receptacles if lay.rtype.get(r) == goal.recep.lower() + "type")
    placed = {r: {o for o, where in st.in_recep if where == r and o in targets} for r in dests}
    dest = max(dests, key=lambda r: (len(placed[r]), -dests.index(r)))
    if st.held is None:
        return _fetch(lay, st, targets, exclude=placed[dest])
    return _carry(lay, st, goal.task_type, targets, dest)


def _carry(lay: Layout, st: State, task_type: str, targets: list[str], dest: str) -> str:
    """With something in hand: put a wrong object away, transform the target, place it."""
    held = st.held
    assert held is not None
    if held not in targets:
        return _put_away(lay, st, held)
    transform = _TRANSFORM.get(task_type)
    if transform is not None and held not in getattr(st, transform[2]):
        verb, rtype, _ = transform
        appliance = next(r for r in lay.receptacles if lay.rtype.get(r) == rtype)
        return _at(lay, st, appliance) or (f"{verb} {lay.names[held]} with {lay.names[appliance]}")
    return _reach(lay, st, dest) or f"move {lay.names[held]} to {lay.names[dest]}"


def _at(lay: Layout, st: State, recep: str) -> str | None:
    """``go to`` ``recep`` unless already standing at its location."""
    return None if lay.recep_loc[recep] == st.agent_loc else f"go to {lay.names[recep]}"


def _reach(lay: Layout, st: State, recep: str) -> str | None:
    """Go to ``recep`` and open it if it is closed; None once its inside is reachable."""
    move = _at(lay, st, recep)
    if move is not None:
        return move
    if recep in lay.openable and recep not in st.opened:
        return f"open {lay.names[recep]}"
    return None


def _fetch(lay: Layout, st: State, targets: list[str], exclude: set[str]) -> str:
    for obj, recep in sorted(st.in_recep):
        if obj in targets and obj not in exclude and obj in lay.pickupable:
            return _reach(lay, st, recep) or f"take {lay.names[obj]} from {lay.names[recep]}"
    raise LookupError("no reachable target object is left for the expert")


def _put_away(lay: Layout, st: State, held: str) -> str:
    kind = lay.otype.get(held)
    fits = [r for r in lay.receptacles if (lay.rtype.get(r), kind) in lay.can_contain]
    here = [r for r in fits if lay.recep_loc[r] == st.agent_loc]
    recep = (here or fits)[0]
    return _reach(lay, st, recep) or f"move {lay.names[held]} to {lay.names[recep]}"


def plan(game: NativeGame, limit: int = 60) -> list[str]:
    """Unroll the expert from ``game``'s current state until it wins (on a copy)."""
    sim = NativeGame((game.layout, game.state.copy()), game.goal, game.instruction)
    sim.reset()
    steps: list[str] = []
    while not sim.won():
        if len(steps) >= limit:
            raise LookupError(f"the expert did not win within {limit} steps")
        action = next_action(sim)
        _, ok = sim.step(action)
        if not ok:
            raise LookupError(f"the expert chose an inadmissible action {action!r}")
        steps.append(action)
    return steps


def search_prior(games: Iterable[tuple[Layout, State]]) -> dict[str, Counter[str]]:
    """Where objects of each type start, by receptacle type, over ``games``' initial states.

    Counted over a train split only: the search order is knowledge a policy could have
    learnt from training games, never a peek at the game being played.
    """
    prior: dict[str, Counter[str]] = {}
    for layout, state in games:
        for obj, recep in state.in_recep:
            kind = layout.otype.get(obj, "")
            prior.setdefault(kind, Counter())[layout.rtype.get(recep, "")] += 1
    return prior


def search_action(game: NativeGame, history: Sequence[str], prior: SearchPrior) -> str:
    """The searching expert's next command after ``history`` (the episode's actions so far).

    It acts on an object only once the object's receptacle has been seen open (or was never
    closed) in this episode; until then it opens or visits the most likely unseen receptacle.
    Receptacle types, appliances and destinations are known from the room description.
    """
    lay, st, goal = game.layout, game.state, game.goal
    if game.won():
        return "look"
    seen = seen_receptacles(game, history)
    targets = sorted(o for o, t in lay.otype.items() if t == goal.obj.lower() + "type")
    if goal.task_type == "look_at_obj_in_light":
        if st.held is None:
            return _search(lay, st, seen, prior, targets, set())
        if st.held not in targets:
            return _put_away(lay, st, st.held)
        wanted = goal.toggle.lower() + "type"
        lamps = sorted(o for o, t in lay.otype.items() if t == wanted and o in lay.toggleable)
        return _search(lay, st, seen, prior, lamps, set(), use=True)
    dests = sorted(r for r in lay.receptacles if lay.rtype.get(r) == goal.recep.lower() + "type")
    placed = {r: {o for o, where in st.in_recep if where == r and o in targets} for r in dests}
    # the destination a student can name from its own context: first by name (drawer 1)
    dest = min(dests, key=lambda r: (-len(placed[r]), _natural(lay.names[r])))
    if st.held is None:
        return _search(lay, st, seen, prior, targets, placed[dest])
    return _carry(lay, st, goal.task_type, targets, dest)


def seen_receptacles(game: NativeGame, history: Sequence[str]) -> set[str]:
    """Receptacles whose inside the agent has seen: replays ``history`` from the start."""
    sim = NativeGame((game.layout, game.initial_state()), game.goal, game.instruction)
    sim.reset()
    seen = _in_view(sim)
    for action in history:
        sim.step(action)
        seen |= _in_view(sim)
    return seen


def _in_view(game: NativeGame) -> set[str]:
    lay, st = game.layout, game.state
    here = lay.at_location.get(st.agent_loc, ())
    return {r for r in here if r not in lay.openable or r in st.opened}


def _search(
    lay: Layout,
    st: State,
    seen: set[str],
    prior: SearchPrior,
    wanted: list[str],
    exclude: set[str],
    use: bool = False,
) -> str:
    """Act on the first ``wanted`` object in sight, else look where one most likely is."""
    for obj, recep in sorted(st.in_recep):
        if obj in wanted and obj not in exclude and recep in seen:
            if use:
                return _at(lay, st, recep) or f"use {lay.names[obj]}"
            if obj in lay.pickupable:
                return _reach(lay, st, recep) or f"take {lay.names[obj]} from {lay.names[recep]}"
    closed_here = [r for r in lay.at_location.get(st.agent_loc, ()) if r not in seen]
    if closed_here:
        return f"open {lay.names[closed_here[0]]}"
    likely = prior.get(lay.otype[wanted[0]], Counter()) if wanted else Counter()
    unseen = [r for r in lay.receptacles if r not in seen]
    if not unseen:
        raise LookupError("every receptacle has been searched and no target is left")
    best = min(unseen, key=lambda r: (-likely[lay.rtype.get(r, "")], _natural(lay.names[r])))
    return f"go to {lay.names[best]}"


def _natural(name: str) -> list[int | str]:
    """Sort key that puts ``drawer 2`` before ``drawer 10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
