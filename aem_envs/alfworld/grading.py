"""When an ALFWorld game is won: the goal library's formula for each of the six task types.

The native engine asks this after every step (its ``won``); the upstream engine evaluates
the same PDDL goal through Fast Downward, and the differential test holds the two equal.
Success is the only reward signal ALFWorld has: ``score`` is 1.0 once the goal holds.
"""

from __future__ import annotations

from collections.abc import Iterable

from aem_envs.alfworld.pddl import Goal
from aem_envs.alfworld.state import Layout, State
from aem_envs.core.errors import DataError


def _of_type(layout: Layout, objects: Iterable[str], otype: str) -> list[str]:
    wanted = otype.lower() + "type"
    return [o for o in objects if layout.otype.get(o) == wanted]


def goal_satisfied(layout: Layout, state: State, goal: Goal) -> bool:
    """The goal-library formula of ``goal.task_type``, evaluated on ``state``."""
    task, rtype = goal.task_type, goal.recep.lower() + "type"
    placed = [(o, r) for o, r in state.in_recep if layout.rtype.get(r) == rtype]
    targets = set(_of_type(layout, layout.otype, goal.obj))
    if task == "pick_and_place_simple":
        return any(o in targets for o, _ in placed)
    if task == "pick_clean_then_place_in_recep":
        return any(o in targets and o in layout.cleanable and o in state.clean for o, _ in placed)
    if task == "pick_heat_then_place_in_recep":
        return any(o in targets and o in layout.heatable and o in state.hot for o, _ in placed)
    if task == "pick_cool_then_place_in_recep":
        return any(o in targets and o in layout.coolable and o in state.cool for o, _ in placed)
    if task == "pick_two_obj_and_place":
        per_recep: dict[str, set[str]] = {}
        for o, r in placed:
            if o in targets:
                per_recep.setdefault(r, set()).add(o)
        return any(len(objs) >= 2 for objs in per_recep.values())
    if task == "look_at_obj_in_light":
        here = set(layout.at_location.get(state.agent_loc, ()))
        lamps = set(_of_type(layout, layout.otype, goal.toggle))
        lit = any(
            o in lamps and o in layout.toggleable and o in state.toggled and r in here
            for o, r in state.in_recep
        )
        return lit and state.held in targets
    raise DataError(f"unknown ALFWorld task type {task!r}")
