"""``aem play``: what a person sees while playing, and while watching a policy play."""

from __future__ import annotations

import pytest

from aem_cli.main import main
from aem_cli.play import numbered
from tests.fixtures.corridor import FIXTURE_ID, register_fixture


@pytest.fixture(autouse=True)
def _corridor() -> None:
    register_fixture()


def _typed(monkeypatch, *answers: str) -> None:
    replies = iter(answers)
    monkeypatch.setattr("builtins.input", lambda prompt="": next(replies))


def test_a_person_picks_actions_by_number_and_sees_reward_return_score_and_limit(
    monkeypatch, capsys
) -> None:
    # Seed 4 plays train-2-lamp with the lamp in room 3: east, east, east, take, drop.
    _typed(monkeypatch, "9", "1", "2", "2", "2", "drop lamp")
    assert main(["play", FIXTURE_ID, "--seed", "4", "--max-steps", "6"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("aemtest/Corridor-v0 · task train-2-lamp (fetch) · split train · seed 4")
    assert "── step 0/6 · return +0.00 · score 0.000 ──" in out
    assert "  1 go east    2 look" in out  # numbered, in columns
    assert "no action 9: pick 1-2 or type an action" in out  # refused, no step spent
    assert "action: go east\n\n── step 1/6 · reward +0.00 · return +0.00 · score 0.000 ──" in out
    assert "action: take lamp" in out  # number 2 in room 3
    assert "── step 5/6 · reward +10.00 · return +10.00 · score 1.000 ──" in out
    assert out.rstrip().splitlines()[-1] == (
        "won: won=True score=1.000 return=10.00 steps=5/6 task=train-2-lamp (fetch)"
    )


def test_an_invalid_action_is_marked_and_a_person_may_stop_with_a_summary(
    monkeypatch, capsys
) -> None:
    _typed(monkeypatch, "look", "fly", "quit")
    assert main(["play", FIXTURE_ID, "--max-steps", "5"]) == 0
    out = capsys.readouterr().out
    assert "── step 1/5 · reward +0.00 · return +0.00 · score 0.000 ──" in out
    assert "── step 2/5 · reward -0.10 (invalid action) · return -0.10 · score 0.000 ──" in out
    assert out.rstrip().splitlines()[-1].startswith("stopped: won=False score=0.000 return=-0.10")


def test_watching_a_policy_shows_its_reply_and_the_parsed_action(capsys) -> None:
    assert main(["play", FIXTURE_ID, "--policy", "expert", "--seed", "4"]) == 0
    out = capsys.readouterr().out
    assert 'reply:  "<think>The expert\'s next step.</think><action>go east</action>"' in out
    assert "action: go east" in out and "action: drop lamp" in out
    assert "  1 go east" not in out  # the numbered list is for a person
    assert out.rstrip().splitlines()[-1].startswith("won: won=True score=1.000 return=10.00")


def test_quiet_prints_only_the_result(capsys) -> None:
    assert main(["play", FIXTURE_ID, "--policy", "expert", "--seed", "4", "--quiet"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "won: won=True score=1.000 return=10.00 steps=5/20 task=train-2-lamp (fetch)"
    ]


def test_numbered_actions_fill_columns_top_to_bottom(monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "16")  # cells are 7 wide: two columns
    assert numbered(["a", "b", "c", "d", "e"]).splitlines() == [
        "  1 a    4 d",
        "  2 b    5 e",
        "  3 c",
    ]


@pytest.mark.slow
def test_the_reference_agent_can_be_watched(capsys) -> None:
    argv = ["play", "aem/ALFWorld-v0", "--policy", "aem-ref", "--split", "valid_unseen"]
    assert main([*argv, "--max-steps", "2"]) == 0
    out = capsys.readouterr().out
    assert "· policy aem-ref" in out.splitlines()[0]
    assert out.count("reply:  '<action>") == 2 and "action: go to " in out
    assert "steps=2/2" in out.splitlines()[-1]
