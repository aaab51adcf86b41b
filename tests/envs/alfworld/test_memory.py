"""The agent-side memory of an ALFWorld room: read from observation text only."""

from __future__ import annotations

import gymnasium as gym

from aem_envs.alfworld.memory import (
    likely_order,
    memory_lines,
    object_types,
    remember,
    shown_actions,
)

INTRO = (
    "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly "
    "around you, you see a cabinet 2, a cabinet 1, a drawer 1, a fridge 1, and a shelf 1.\n\n"
    "Your task is to: cool some apple and put it in shelf."
)
STEPS = [
    (INTRO, "go to cabinet 1"),
    ("You arrive at cabinet 1. The cabinet 1 is closed.", "open cabinet 1"),
    (
        "You open the cabinet 1. The cabinet 1 is open. In it, you see a apple 1, and a cup 2.",
        "take apple 1 from cabinet 1",
    ),
    ("You pick up the apple 1 from the cabinet 1.", "go to fridge 1"),
    ("You arrive at fridge 1. The fridge 1 is closed.", "cool apple 1 with fridge 1"),
]


def test_memory_reads_places_searches_and_what_is_held() -> None:
    memory = remember(STEPS[:-1], STEPS[-1][0])
    assert memory.places == ["cabinet 2", "cabinet 1", "drawer 1", "fridge 1", "shelf 1"]
    assert memory.searched == {"cabinet 1": ["cup 2"]}  # the apple was taken out
    assert (memory.at, memory.held) == ("fridge 1", "apple 1")
    cooled = remember(STEPS, "You cool the apple 1 using the fridge 1.")
    assert cooled.done_to_held == ["cooled"]
    placed = remember(
        [*STEPS, ("You cool the apple 1 using the fridge 1.", "move apple 1 to shelf 1")],
        "You move the apple 1 to the shelf 1.",
    )
    assert placed.held is None and placed.searched["shelf 1"] == ["apple 1"]


def test_memory_lines_list_unsearched_places_most_likely_first() -> None:
    prior = {"appletype": {"fridgetype": 9, "shelftype": 2}}
    lines = memory_lines("cool some apple and put it in shelf", STEPS[:2], STEPS[2][0], prior)
    assert lines[0] == "Holding: nothing."
    assert "Searched: cabinet 1 (apple 1, cup 2)." in lines
    assert lines[-1] == ("Not searched yet (likely first): fridge 1, shelf 1, cabinet 2, drawer 1.")


def test_the_light_is_wanted_once_the_object_is_held() -> None:
    prior = {"bowltype": {"cabinettype": 5}, "desklamptype": {"sidetabletype": 5}}
    kinds = [k.removesuffix("type") for k in prior]
    assert object_types("look at bowl under the desklamp", kinds) == ["bowl", "desklamp"]
    order = likely_order(["cabinet 1", "sidetable 1"], "desklamp", prior)
    assert order == ["sidetable 1", "cabinet 1"]
    held = [
        (INTRO.replace("cabinet 1", "sidetable 1"), "take bowl 1 from cabinet 2"),
    ]
    lines = memory_lines(
        "look at bowl under the desklamp",
        held,
        "You pick up the bowl 1 from the cabinet 2.",
        prior,
    )
    assert lines[0] == "Holding: bowl 1."
    assert lines[-1].startswith("Not searched yet (likely first): sidetable 1,")


def test_compact_listing_hides_places_and_idle_actions() -> None:
    actions = ["go to cabinet 1", "open cabinet 1", "examine cabinet 1", "look", "inventory"]
    assert shown_actions(actions) == ["open cabinet 1"]


def test_the_first_unsearched_place_is_where_the_searching_expert_goes() -> None:
    """The memory's order is the searching expert's, so a student can follow it from text."""
    env = gym.make("aem_envs:aem/ALFWorld-v0", expert="search", max_steps=20)
    agree = searches = 0
    for seed in range(12):
        obs, info = env.reset(seed=seed, options={"split": "train"})
        history: list[tuple[str, str]] = []
        for _ in range(20):
            action = env.unwrapped.expert_action()
            lines = memory_lines(info["instruction"], history, obs)
            if action.startswith("go to ") and lines[0] == "Holding: nothing.":
                searches += 1
                listed = lines[-1].split(": ", 1)[1]
                agree += listed.startswith(action.removeprefix("go to ") + ",") or (
                    listed == action.removeprefix("go to ") + "."
                )
            history.append((obs, action))
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
    env.close()
    assert searches >= 20
    assert agree / searches >= 0.95, (agree, searches)
