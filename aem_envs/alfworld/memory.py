"""What an agent knows of an ALFWorld room from its own observations, in a few short lines.

Why: a step-layout prompt shows a window of recent steps, so a small model forgets where it
has already looked: fine-tuned on the searching expert, it shuttled between the places its
window showed (``benchmarks/learning/results/warm-start/README.md``). This module reads the whole
episode's text (never the engine's state) and states what the agent has learnt: the places it
has searched and what they held, the places it has not searched yet, what it holds and what
it has done to it. :mod:`aem_agent.prompts` shows these lines in its ``compact`` style.

The places not yet searched are listed most likely first for the object the agent is after,
by where objects of that type start over the *train* split
(:func:`aem_envs.alfworld.env.train_prior`, the statistic the searching expert uses): prior
knowledge a policy could have learnt from training games, never a peek at the game played.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from aem_envs.alfworld.env import train_prior

_ROOM = re.compile(r"Looking quickly around you, you see (.*?)\.\s*$", re.M)
_ARRIVE = re.compile(r"^You arrive at ([a-z]+ \d+)\.")
_CONTENTS = re.compile(
    r"(?:On the ([a-z]+ \d+), you see|The ([a-z]+ \d+) is open\. In it, you see) (.*?)\.$"
)
_TAKE = re.compile(r"^You pick up the ([a-z]+ \d+) from the ([a-z]+ \d+)\.")
_PUT = re.compile(r"^You move the ([a-z]+ \d+) to the ([a-z]+ \d+)\.")
_TRANSFORM = re.compile(r"^You (clean|heat|cool) the ([a-z]+ \d+) using the ([a-z]+ \d+)\.")
_NAME = re.compile(r"[a-z]+ \d+")
_DONE = {"clean": "cleaned", "heat": "heated", "cool": "cooled"}
#: Places not searched yet that one prompt lists (most likely first).
UNSEARCHED_SHOWN = 8
#: Admissible actions the memory already covers (places) or that never help (the rest).
_HIDDEN_ACTIONS = re.compile(r"^(go to |examine |look$|inventory$|help$)")


@dataclass
class RoomMemory:
    """The facts of one episode so far, in the order the agent learnt them."""

    places: list[str] = field(default_factory=list)
    searched: dict[str, list[str]] = field(default_factory=dict)
    at: str | None = None
    held: str | None = None
    done_to_held: list[str] = field(default_factory=list)

    def read(self, observation: str) -> None:
        """Update from one observation (the intro, or what an action returned)."""
        room = _ROOM.search(observation)
        if room and not self.places:
            self.places = _NAME.findall(room.group(1))
        arrive = _ARRIVE.match(observation)
        if arrive:
            self.at = arrive.group(1)
        for line in observation.splitlines():
            contents = _CONTENTS.search(line)
            if contents:
                place = contents.group(1) or contents.group(2)
                self.searched[place] = _NAME.findall(contents.group(3))
        take, put = _TAKE.match(observation), _PUT.match(observation)
        if take:
            self.held, self.done_to_held = take.group(1), []
            items = self.searched.get(take.group(2))
            if items and take.group(1) in items:
                items.remove(take.group(1))
        elif put:
            self.held, self.done_to_held = None, []
            self.searched.setdefault(put.group(2), []).append(put.group(1))
        transform = _TRANSFORM.match(observation)
        if transform and transform.group(2) == self.held:
            self.done_to_held.append(_DONE[transform.group(1)])


def object_types(instruction: str, known: Sequence[str]) -> list[str]:
    """The object types an instruction names, in its word order (``["bowl", "desklamp"]``
    for "look at bowl under the desklamp")."""
    kinds = set(known)
    return [word for word in re.findall(r"[a-z]+", instruction.lower()) if word in kinds]


def wanted_type(instruction: str, memory: RoomMemory, known: Sequence[str]) -> str | None:
    """The type of object the agent looks for now: the task's object, or once it holds that
    object in a look-at-in-light task, the light."""
    kinds = object_types(instruction, known)
    if not kinds:
        return None
    held_type = memory.held.rsplit(" ", 1)[0] if memory.held else None
    if len(kinds) > 1 and held_type == kinds[0]:
        return kinds[1]
    return kinds[0]


def likely_order(
    places: Sequence[str], kind: str | None, prior: Mapping[str, Mapping[str, int]]
) -> list[str]:
    """``places`` most likely first to hold a ``kind`` object (ties: natural name order)."""
    counts = prior.get(f"{kind}type", {}) if kind else {}

    def key(place: str) -> tuple[int, str, int]:
        kind_of_place, number = place.rsplit(" ", 1)
        return (-counts.get(f"{kind_of_place}type", 0), kind_of_place, int(number))

    return sorted(places, key=key)


def remember(history: Sequence[tuple[str, str]], observation: str) -> RoomMemory:
    """The memory of an episode whose earlier steps are ``history`` (observation, action)
    pairs and whose current observation is ``observation``."""
    memory = RoomMemory()
    for seen, _action in history:
        memory.read(seen)
    memory.read(observation)
    return memory


def memory_lines(
    instruction: str,
    history: Sequence[tuple[str, str]],
    observation: str,
    prior: Mapping[str, Mapping[str, int]] | None = None,
) -> list[str]:
    """The prompt lines stating what the agent knows: held object, searched places with what
    they held, and places not searched yet (most likely first, at most
    :data:`UNSEARCHED_SHOWN`)."""
    prior = train_prior(None) if prior is None else prior
    memory = remember(history, observation)
    held = memory.held or "nothing"
    if memory.held and memory.done_to_held:
        held += f" ({', '.join(memory.done_to_held)})"
    searched = [
        f"{place} ({', '.join(items) if items else 'empty'})"
        for place, items in memory.searched.items()
    ]
    left = [p for p in memory.places if p not in memory.searched]
    kind = wanted_type(instruction, memory, [k.removesuffix("type") for k in prior])
    lines = [f"Holding: {held}."]
    if memory.at:
        lines.append(f"You are at: {memory.at}.")
    lines.append(f"Searched: {'; '.join(searched) if searched else 'nothing yet'}.")
    if left:
        shown = likely_order(left, kind, prior)[:UNSEARCHED_SHOWN]
        lines.append(f"Not searched yet (likely first): {', '.join(shown)}.")
    return lines


def shown_actions(actions: Sequence[str]) -> list[str]:
    """The admissible actions a compact prompt lists: everything but going to a place (the
    memory lists the places), looking, inventory, examining and help."""
    return [a for a in actions if not _HIDDEN_ACTIONS.match(a)]
