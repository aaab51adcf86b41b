"""An expert for the six ALFWorld task types that plans from the native engine's state.

Why from the state rather than a stored list: an expert is asked for "the next action" at
any point of an episode (DAgger-style relabelling, demonstrations after random prefixes),
so it must recover from wherever the agent has left things. The generator builds each
bundled game's plan by unrolling this expert from the initial state, and keeps the game
only if that plan also wins on the upstream engine.
"""

from __future__ import annotations

from aem_envs.alfworld.native import NativeGame
from aem_envs.alfworld.state import Layout, State

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
    held = st.held
    if held not in targets:
        return _put_away(lay, st, held)
    transform = _TRANSFORM.get(goal.task_type)
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
