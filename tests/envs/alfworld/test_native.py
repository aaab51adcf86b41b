"""The native engine on a hand-written ALFRED problem; expected texts are upstream's output."""

from __future__ import annotations

import pytest

from aem_envs.alfworld.native import NOTHING_HAPPENS, NativeGame, display_list
from aem_envs.alfworld.pddl import Goal

GOAL = Goal("pick_and_place_simple", "Mug", "CoffeeMachine")
INSTRUCTION = "put some mug on coffeemachine"


@pytest.fixture
def game(kitchen_problem: str) -> NativeGame:
    game = NativeGame(kitchen_problem, GOAL, INSTRUCTION)
    game.reset()
    return game


def test_intro_lists_every_receptacle_and_states_the_task(kitchen_problem: str) -> None:
    intro = NativeGame(kitchen_problem, GOAL, INSTRUCTION).reset()
    assert intro == (
        "-= Welcome to TextWorld, ALFRED! =-\n\n"
        "You are in the middle of a room. Looking quickly around you, you see a cabinet 2, "
        "a cabinet 1, a coffeemachine 1, and a countertop 1.\n\n"
        "Your task is to: put some mug on coffeemachine."
    )


def test_admissible_commands_at_start(game: NativeGame) -> None:
    assert game.admissible() == [
        "go to cabinet 1",
        "go to cabinet 2",
        "go to coffeemachine 1",
        "go to countertop 1",
        "help",
        "inventory",
        "look",
    ]


def test_shared_location_and_opening(game: NativeGame) -> None:
    assert game.step("go to cabinet 1") == (
        "You arrive at cabinet 1. The cabinet 1 is closed.",
        True,
    )
    # cabinet 2 shares cabinet 1's location: no "go to" for it, but it can be examined.
    assert "go to cabinet 2" not in game.admissible()
    assert game.step("go to cabinet 2") == (NOTHING_HAPPENS, False)
    assert game.step("open cabinet 1")[0] == (
        "You open the cabinet 1. The cabinet 1 is open. In it, you see a mug 1."
    )
    assert game.step("look")[0] == (
        "You are facing the cabinet 2, and cabinet 1. Next to it, you see nothing."
    )
    assert "take mug 1 from cabinet 1" in game.admissible()


def test_take_examine_inventory_and_win(game: NativeGame) -> None:
    game.step("go to countertop 1")
    assert game.step("take apple 1 from countertop 1")[0] == (
        "You pick up the apple 1 from the countertop 1."
    )
    assert game.step("inventory")[0] == "You are carrying: a apple 1."
    assert game.step("examine apple 1")[0] == "There's nothing special about apple 1."
    assert "take mug 2 from countertop 1" not in game.admissible()  # hands are full
    game.step("go to coffeemachine 1")
    # The coffee machine cannot hold an apple (no canContain fact).
    assert not any(a.startswith("move apple 1") for a in game.admissible())
    game.step("go to countertop 1")
    game.step("move apple 1 to countertop 1")
    game.step("take mug 2 from countertop 1")
    assert game.step("examine mug 2")[0] == "This is a normal mug 2. In it, you see nothing."
    assert not game.won()
    game.step("go to coffeemachine 1")
    assert game.step("move mug 2 to coffeemachine 1") == (
        "You move the mug 2 to the coffeemachine 1.",
        True,
    )
    assert game.won()


def test_look_from_the_middle_of_the_room_lists_nothing(game: NativeGame) -> None:
    # Bound to the agent's location, the grammar's query finds no receptacle there.
    assert game.step("look")[0] == (
        "You are in the middle of a room. Looking quickly around you, you see nothing."
    )


def test_reset_restores_the_initial_state(game: NativeGame) -> None:
    game.step("go to countertop 1")
    game.step("take apple 1 from countertop 1")
    game.reset()
    assert game.state.held is None
    assert "go to countertop 1" in game.admissible()


def test_unknown_and_padded_commands(game: NativeGame) -> None:
    assert game.step("dance") == (NOTHING_HAPPENS, False)
    assert game.step("  inventory  ") == ("You are not carrying anything.", True)


def test_display_list() -> None:
    assert display_list([]) == "nothing"
    assert display_list(["a x"]) == "a x"
    assert display_list(["a x", "a y", "a z"]) == "a x, a y, and a z"
