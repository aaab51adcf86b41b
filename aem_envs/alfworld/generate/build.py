"""One bundled ALFWorld game: a room from a floor plan, a goal, the expert's plan, verified.

Deterministic in (seed, split, task type, index), so any one game can be rebuilt alone; the
wheel's tables (floor plans, affordances, goal library) are the only inputs.
"""

from __future__ import annotations

import importlib.resources
import json
import random
from dataclasses import dataclass
from typing import Any

from aem_envs.alfworld import expert
from aem_envs.alfworld.native import NativeGame
from aem_envs.alfworld.pddl import (
    Goal,
    Item,
    Receptacle,
    Vocabulary,
    game_dict,
    mangle,
    problem_text,
    wheel_module,
)
from aem_envs.alfworld.upstream import UpstreamEngine

DEFAULT_SEED = 20210601
#: ALFWorld's valid_unseen scenes, held out of train and valid_seen here as well.
UNSEEN_FLOOR_PLANS = frozenset({10, 219, 308, 424})
ROOM_TYPES = {"Kitchen": range(1, 31), "LivingRoom": range(201, 231)}
ROOM_TYPES |= {"Bedroom": range(301, 331), "Bathroom": range(401, 431)}
#: Where lamps stand (ALFRED has no "fits" entry for them: they are switched, not placed).
LAMPS = ("DeskLamp", "FloorLamp")
LAMP_HOLDERS = ("Desk", "SideTable", "Dresser", "Shelf", "DiningTable", "CoffeeTable")
#: The appliance each transforming task needs (and must not be its destination).
APPLIANCE = {
    "pick_clean_then_place_in_recep": ("SinkBasin", "Cleanable"),
    "pick_heat_then_place_in_recep": ("Microwave", "Heatable"),
    "pick_cool_then_place_in_recep": ("Fridge", "Coolable"),
}
#: Room density: up to this many object types, each with 1–MAX_INSTANCES instances (tens of
#: objects, as in ALFWorld scenes, while keeping Fast Downward's grounding near ALFWorld's).
MAX_OBJECT_TYPES = 15
MAX_INSTANCES = 2


@dataclass(frozen=True)
class FloorPlan:
    """One AI2-THOR floor plan as the wheel describes it."""

    number: int
    room_type: str
    receptacles: tuple[tuple[str, str, tuple[float, float, int, int]], ...]
    object_types: tuple[str, ...]


def _layouts() -> Any:
    wheel_module("alfworld")
    return importlib.resources.files("alfworld") / "gen" / "layouts"


def load_floor_plan(number: int, vocab: Vocabulary) -> FloorPlan:
    layouts = _layouts()
    points = json.loads((layouts / f"FloorPlan{number}-openable.json").read_text())
    types = json.loads((layouts / f"FloorPlan{number}-objects.json").read_text())
    receptacles = []
    for thor_id, point in sorted(points.items()):
        parts = thor_id.split("|")
        rtype = parts[-1] if parts[-1].isalpha() else parts[0]
        if rtype in vocab.receptacle_types:
            receptacles.append((thor_id, rtype, (point[0], point[1], int(point[2]), int(point[3]))))
    room = next(name for name, numbers in ROOM_TYPES.items() if number in numbers)
    return FloorPlan(number, room, tuple(receptacles), tuple(sorted(set(types))))


def _location(x: float, z: float, rotation: int, horizon: int) -> str:
    return f"loc|{round(x / 0.25)}|{round(z / 0.25)}|{rotation // 90}|{horizon}"


def _coords(rng: random.Random) -> str:
    return "|".join(f"{rng.uniform(-4, 4):+06.2f}" for _ in range(3))


def build_room(
    rng: random.Random, plan: FloorPlan, vocab: Vocabulary
) -> tuple[list[Receptacle], list[Item], str]:
    """Every receptacle of the floor plan, and instances of up to MAX_OBJECT_TYPES of the
    object types it holds (lamps always: they are what look-at-in-light tasks need)."""
    receptacles = [
        Receptacle(thor_id, rtype, _location(*point)) for thor_id, rtype, point in plan.receptacles
    ]
    holders: dict[str, list[Receptacle]] = {}
    for otype in plan.object_types:
        if otype in LAMPS:
            fits = [r for r in receptacles if r.rtype in LAMP_HOLDERS]
        elif otype in vocab.object_types:
            fits = [r for r in receptacles if otype in vocab.can_contain.get(r.rtype, ())]
        else:
            fits = []
        if fits:
            holders[otype] = fits
    kept = sorted(rng.sample(sorted(holders), min(MAX_OBJECT_TYPES, len(holders))))
    kept += [t for t in LAMPS if t in holders and t not in kept]
    items: list[Item] = []
    seen: set[str] = set()
    for otype in kept:
        fits = holders[otype]
        for _ in range(1 if otype in LAMPS else rng.randint(1, MAX_INSTANCES)):
            thor_id = f"{otype}|{_coords(rng)}"
            while thor_id in seen:
                thor_id = f"{otype}|{_coords(rng)}"
            seen.add(thor_id)
            items.append(Item(thor_id, otype, rng.choice(fits).thor_id))
    taken = {r.location for r in receptacles}
    agent = _location(rng.randint(-12, 12) * 0.25, rng.randint(-12, 12) * 0.25, 90, 30)
    while agent in taken:
        agent = _location(rng.randint(-12, 12) * 0.25, rng.randint(-12, 12) * 0.25, 90, 30)
    return receptacles, items, agent


def choose_goal(
    rng: random.Random,
    task_type: str,
    receptacles: list[Receptacle],
    items: list[Item],
    vocab: Vocabulary,
) -> Goal | None:
    """A goal of ``task_type`` this room can satisfy and does not already satisfy."""
    rtypes = sorted({r.rtype for r in receptacles})
    type_of = {r.thor_id: r.rtype for r in receptacles}
    counts: dict[str, int] = {}
    for item in items:
        if item.otype not in LAMPS:
            counts[item.otype] = counts.get(item.otype, 0) + 1
    objects = sorted(counts)
    if task_type == "look_at_obj_in_light":
        lamps = sorted({i.otype for i in items if i.otype in LAMPS})
        if not lamps or not objects:
            return None
        return Goal(task_type, rng.choice(objects), "", rng.choice(lamps))
    appliance, affordance = APPLIANCE.get(task_type, (None, None))
    if appliance is not None:
        if appliance not in rtypes:
            return None
        assert affordance is not None  # APPLIANCE pairs an appliance with its affordance
        objects = [o for o in objects if o in vocab.affordances[affordance]]
    if task_type == "pick_two_obj_and_place":
        objects = [o for o in objects if counts[o] >= 2]
    rng.shuffle(objects)
    for obj in objects:
        homes = {type_of[i.receptacle] for i in items if i.otype == obj}
        parents = [
            rt
            for rt in rtypes
            if obj in vocab.can_contain.get(rt, ()) and rt != appliance and rt not in homes
        ]
        if parents:
            return Goal(task_type, obj, rng.choice(parents))
    return None


def instruction_and_goal_pddl(rng: random.Random, goal: Goal) -> tuple[str, str]:
    """The instruction (a goal-library template) and the PDDL goal, both from the wheel."""
    entry = wheel_module("alfworld.gen.goal_library").gdict[goal.task_type]
    fields = {"obj": goal.obj, "recep": goal.recep, "toggle": goal.toggle}
    instruction = rng.choice(entry["templates"]).format(**{k: v.lower() for k, v in fields.items()})
    return instruction, mangle(entry["pddl"].format(**fields))


def floor_plans_for(task_type: str, split: str) -> list[int]:
    """Floor plans valid for ``task_type`` (ALFRED's GOALS_VALID) on the split's side."""
    rooms = wheel_module("alfworld.gen.constants").GOALS_VALID[task_type]
    numbers = [n for room in sorted(rooms) for n in ROOM_TYPES[room]]
    unseen = split == "valid_unseen"
    return [n for n in numbers if (n in UNSEEN_FLOOR_PLANS) == unseen]


class GenerationError(RuntimeError):
    """The native and upstream engines disagreed, or no valid game could be built."""


def build_game(
    seed: int, split: str, task_type: str, index: int, vocab: Vocabulary
) -> dict[str, Any]:
    """Build one game and its expert plan (no engine); deterministic in its arguments."""
    for attempt in range(50):
        rng = random.Random(f"{seed}:{split}:{task_type}:{index}:{attempt}")
        number = rng.choice(floor_plans_for(task_type, split))
        receptacles, items, agent = build_room(rng, load_floor_plan(number, vocab), vocab)
        goal = choose_goal(rng, task_type, receptacles, items, vocab)
        if goal is None:
            continue
        instruction, goal_pddl = instruction_and_goal_pddl(rng, goal)
        name = f"aem_{split}_{task_type}_{index:03d}"
        problem = problem_text(name, vocab, receptacles, items, agent, goal_pddl)
        native = NativeGame(problem, goal, instruction)
        native.reset()
        try:
            steps = expert.plan(native)
        except LookupError:
            continue
        return {
            "id": f"{task_type}/{index:03d}",
            "task_type": task_type,
            "floor_plan": number,
            "goal": {"obj": goal.obj, "recep": goal.recep, "toggle": goal.toggle},
            "instruction": instruction,
            "problem": problem,
            "plan": steps,
        }
    raise GenerationError(f"no valid {task_type} game for {split} #{index} in 50 attempts")


def generate_game(
    seed: int, split: str, task_type: str, index: int, *, engine: UpstreamEngine, vocab: Vocabulary
) -> dict[str, Any]:
    """:func:`build_game`, kept only if :func:`verify` passes on the upstream engine."""
    game = build_game(seed, split, task_type, index, vocab)
    goal = Goal(task_type, **game["goal"])
    verify(game["problem"], goal, game["instruction"], game["plan"], engine)
    return game


def verify(
    problem: str, goal: Goal, instruction: str, steps: list[str], engine: UpstreamEngine
) -> None:
    """Replay ``steps`` on both engines: identical text and admissible sets, a win at the end."""
    native = NativeGame(problem, goal, instruction)
    engine.load(game_dict(problem, instruction))
    pairs = [(engine.reset(), native.reset())]
    for step in steps:
        if engine.admissible() != native.admissible():
            raise GenerationError(f"admissible sets differ before {step!r} in {problem[:60]!r}")
        (up, ok), (nat, _) = engine.step(step), native.step(step)
        if not ok:
            raise GenerationError(f"plan step {step!r} is not admissible upstream")
        pairs.append((up, nat))
    for up, nat in pairs:
        if up != nat:
            raise GenerationError(f"observations differ: upstream {up!r} vs native {nat!r}")
    if not engine.won() or not native.won():
        raise GenerationError(f"the plan does not win (upstream {engine.won()})")


_WORKER: dict[str, Any] = {}


def generate_job(job: tuple[int, str, str, int]) -> dict[str, Any] | str:
    """Pool worker: one game, or the reason it was rejected (one engine per process).

    Why here and not in ``__main__``: spawned workers do not import a package's
    ``__main__``, so the pool's function must live in a module they can import.
    """
    if not _WORKER:
        _WORKER["vocab"] = Vocabulary.from_wheel()
        _WORKER["engine"] = UpstreamEngine()
    try:
        return generate_game(*job, engine=_WORKER["engine"], vocab=_WORKER["vocab"])
    except GenerationError as exc:
        return f"{job}: {exc}"
