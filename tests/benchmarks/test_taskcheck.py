"""AEM's weights broken down by command (``benchmarks.learning.taskcheck.alpha_by_command``)."""

from __future__ import annotations

import math

import pytest

from aem_agent.rollout.records import Episode, EpisodeSpec, Turn
from aem_agent.rollout.samplers import Generated
from benchmarks.learning.taskcheck import alpha_by_command, alpha_table


def episode(won: bool, *turns: tuple[str, bool, float]) -> Episode:
    """An episode of turns ``(action, valid, mean token entropy)``."""
    played = [
        Turn(
            [1],
            Generated([2, 3], [-0.5, -0.5], [hbar, hbar]),
            f"<action>{action}</action>",
            0.0,
            valid,
        )
        for action, valid, hbar in turns
    ]
    return Episode(EpisodeSpec("env", 0), turns=played, won=won)


def test_each_reply_gets_its_groups_alpha_under_its_command_refusal_and_outcome() -> None:
    group = [
        episode(True, ("take egg 1 from fridge 1", False, 0.1), ("go to fridge 1", True, 0.5)),
        episode(False, ("take egg 1 from fridge 1", False, 0.3)),
    ]
    calm = [
        episode(False, ("open drawer 1", True, 0.2)),
        episode(False, ("open drawer 2", True, 0.25)),
    ]
    rows = alpha_by_command([group, calm], lam=1.0, gate=0.1)
    weights = [1.0, math.exp(-1.0), math.exp(-0.5)]  # H̃ = 0, 1, 0.5 in the first group
    mean = sum(weights) / 3
    got = {(r["command"], r["refused"], r["won"]): r for r in rows}
    assert got[("take", True, True)]["alpha"] == pytest.approx(
        weights[0] / mean, rel=1e-4
    )  # ε in the scaling
    assert got[("go", False, True)]["alpha"] == pytest.approx(
        weights[1] / mean, rel=1e-4
    )  # ε in the scaling
    assert got[("take", True, False)]["alpha"] == pytest.approx(
        weights[2] / mean, rel=1e-4
    )  # ε in the scaling
    # the second group spans 0.05 nats, under the gate: α = 1 for both its replies
    assert got[("open", False, False)] == {
        "command": "open",
        "refused": False,
        "won": False,
        "turns": 2,
        "hbar": pytest.approx(0.225),
        "alpha": 1.0,
    }
    assert rows[0]["command"] == "open"  # most turns first
    table = alpha_table(rows, least=2)
    assert "| `open` | no | lost | 2 |" in table and "`take`" not in table
