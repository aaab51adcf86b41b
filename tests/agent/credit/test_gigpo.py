"""GiGPO's defining properties on hand-built turn batches (``aem_agent.credit.gigpo``)."""

from __future__ import annotations

import math

import pytest
import torch

from aem_agent.credit import GiGPO, TurnBatch
from aem_agent.credit.gigpo import anchor_groups, discounted_returns, step_advantages


def turns(
    episodes: list[tuple[int, list[str], list[float], float]],
) -> TurnBatch:
    """A batch from ``(group, anchors, rewards, episode advantage)`` per episode."""
    episode, group, turn, reward, advantage, anchor = [], [], [], [], [], []
    for e, (g, states, rewards, adv) in enumerate(episodes):
        for t, (state, r) in enumerate(zip(states, rewards, strict=True)):
            episode.append(e), group.append(g), turn.append(t)
            reward.append(r), advantage.append(adv), anchor.append(state)
    return TurnBatch(
        episode=torch.tensor(episode),
        group=torch.tensor(group),
        turn=torch.tensor(turn),
        advantage=torch.tensor(advantage, dtype=torch.float64),
        tokens=torch.ones(len(episode), dtype=torch.float64),
        reward=torch.tensor(reward, dtype=torch.float64),
        anchor=anchor,
    )


def test_discounted_returns_run_backwards_along_each_episode_in_turn_order() -> None:
    # Episode 0's turns arrive out of order; episode 1 is interleaved with it.
    episode = torch.tensor([0, 1, 0, 0, 1])
    turn = torch.tensor([2, 0, 0, 1, 1])
    reward = torch.tensor([10.0, 1.0, 0.0, -0.1, 2.0])
    returns = discounted_returns(reward, episode, turn, gamma=0.95)
    expected = [10.0, 1.0 + 0.95 * 2.0, 0.95 * (-0.1 + 0.95 * 10.0), -0.1 + 0.95 * 10.0, 2.0]
    assert returns.tolist() == pytest.approx(expected)


def test_anchor_groups_match_identical_states_inside_an_episode_group_only() -> None:
    anchors = ["room", "hall", "room", "room", "room"]
    group = torch.tensor([0, 0, 0, 1, 1])
    ids = anchor_groups(anchors, group).tolist()
    assert ids[0] == ids[2]  # same state, same episode group: one step group
    assert ids[1] != ids[0]  # another state
    assert ids[3] == ids[4] != ids[0]  # the same text in another episode group is apart


def test_step_advantage_of_a_lone_state_is_zero() -> None:
    returns = torch.tensor([3.0, 5.0, 1.0], dtype=torch.float64)
    assert step_advantages(returns, torch.tensor([0, 1, 2])).tolist() == [0.0, 0.0, 0.0]


def test_no_repeated_state_reduces_to_episode_level_grpo() -> None:
    batch = turns(
        [
            (0, ["s0", "a1", "a2"], [0.0, 0.0, 10.0], 0.7),
            (0, ["s0'", "b1"], [0.0, -0.1], -0.7),
            (1, ["t0"], [10.0], 0.0),
        ]
    )
    credit = GiGPO()(batch)
    assert torch.equal(credit.advantage, batch.advantage)
    assert credit.metrics["gigpo/repeated_state_share"] == 0.0


def test_repeated_states_match_a_hand_computation() -> None:
    """Two episodes of one group share states A and B (B at different turns); C is lone.

    γ = 0.5: episode 0 returns (A: 0 + 0.5·10 = 5, B: 10), episode 1 returns 0 everywhere.
    Step groups: A {5, 0}, B {10, 0}, C {0}. With ``scale="none"`` A^S is the return minus
    its group's mean; with ``"std"`` it is also divided by the unbiased std (+ ε).
    """
    batch = turns(
        [
            (0, ["A", "B"], [0.0, 10.0], 0.5),
            (0, ["A", "C", "B"], [0.0, 0.0, 0.0], -0.5),
            (1, ["A", "B"], [0.0, 10.0], 0.0),  # same texts, another task: its own groups
        ]
    )
    centred = GiGPO(gamma=0.5, scale="none", omega=2.0)(batch).advantage.tolist()
    assert centred == pytest.approx(
        [0.5 + 2 * 2.5, 0.5 + 2 * 5.0, -0.5 - 2 * 2.5, -0.5, -0.5 - 2 * 5.0, 0.0, 0.0]
    )
    a_std, b_std = math.sqrt(2 * 2.5**2), math.sqrt(2 * 5.0**2)
    a, b = 2.5 / (a_std + 1e-6), 5.0 / (b_std + 1e-6)
    scaled = GiGPO(gamma=0.5)(batch)
    assert scaled.advantage.tolist() == pytest.approx(
        [0.5 + a, 0.5 + b, -0.5 - a, -0.5, -0.5 - b, 0.0, 0.0]
    )
    assert scaled.metrics["gigpo/step_groups"] == 5  # A, B, C of group 0; A, B of group 1
    assert scaled.metrics["gigpo/repeated_state_share"] == pytest.approx(4 / 7)


def test_gigpo_names_what_a_batch_without_turn_data_lacks() -> None:
    batch = turns([(0, ["A"], [1.0], 0.0)])
    bare = TurnBatch(
        episode=batch.episode,
        group=batch.group,
        turn=batch.turn,
        advantage=batch.advantage,
        tokens=batch.tokens,
    )
    with pytest.raises(ValueError, match=r"gigpo.*reward"):
        GiGPO()(bare)
