"""The properties of AEM that docs/aem.md lists, checked on bare tensors."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from aem_agent.credit.modulation import aem_modulate, group_alpha, scope_keys, unit_index

finite = st.floats(min_value=-5.0, max_value=5.0, allow_nan=False, allow_infinity=False)
entropy = st.floats(min_value=0.0, max_value=8.0, allow_nan=False, allow_infinity=False)


@st.composite
def batches(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Groups of responses: advantages, per-token entropies, a response mask, group ids."""
    n_groups = draw(st.integers(1, 4))
    size = draw(st.integers(1, 5))
    length = draw(st.integers(1, 6))
    rows = n_groups * size
    adv = torch.tensor(draw(st.lists(finite, min_size=rows, max_size=rows)))
    ent = torch.tensor(
        draw(
            st.lists(
                st.lists(entropy, min_size=length, max_size=length), min_size=rows, max_size=rows
            )
        )
    )
    lengths = draw(st.lists(st.integers(1, length), min_size=rows, max_size=rows))
    mask = (torch.arange(length).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).long()
    groups = torch.arange(n_groups).repeat_interleave(size)
    return adv, ent, mask, groups


def _alpha(adv: torch.Tensor, modulated: torch.Tensor) -> torch.Tensor:
    return modulated.double() / adv.double()


@settings(max_examples=60, deadline=None)
@given(batches(), st.floats(min_value=0.05, max_value=4.0))
def test_group_mean_of_alpha_is_one(batch, lam: float) -> None:
    adv, ent, mask, groups = batch
    adv = adv.abs() + 1.0  # nonzero so α can be read back from A'/A
    modulated, _ = aem_modulate(adv, ent, mask, groups, lam=lam)
    alpha = _alpha(adv, modulated)
    for g in groups.unique():
        assert alpha[groups == g].mean().item() == pytest.approx(1.0, abs=1e-6)


@settings(max_examples=60, deadline=None)
@given(batches(), st.floats(min_value=0.05, max_value=4.0))
def test_alpha_strictly_decreasing_in_entropy(batch, lam: float) -> None:
    adv, ent, mask, groups = batch
    adv = torch.ones_like(adv)
    modulated, _ = aem_modulate(adv, ent, mask, groups, lam=lam, min_range=0.0)
    hbar = (ent * mask).sum(1) / mask.sum(1)
    for g in groups.unique():
        rows = (groups == g).nonzero().flatten().tolist()
        for i in rows:
            for j in rows:
                # 1e-3 nats apart: closer pairs can round to one float32 α at small λ
                if hbar[i] < hbar[j] - 1e-3:
                    assert modulated[i] > modulated[j]


@settings(max_examples=60, deadline=None)
@given(batches())
def test_lambda_zero_is_identity_bit_for_bit(batch) -> None:
    adv, ent, mask, groups = batch
    for turns in (None, torch.zeros_like(mask)):
        modulated, _ = aem_modulate(adv, ent, mask, groups, lam=0.0, turn_ids=turns)
        expected = adv if turns is None else adv.unsqueeze(1).expand_as(ent)
        assert torch.equal(modulated, expected)


@settings(max_examples=40, deadline=None)
@given(batches(), st.floats(min_value=-1e3, max_value=1e3, allow_nan=False))
def test_masked_tokens_never_change_the_result(batch, garbage: float) -> None:
    adv, ent, mask, groups = batch
    before, stats_before = aem_modulate(adv, ent, mask, groups, lam=1.0)
    noisy = torch.where(mask.bool(), ent, torch.full_like(ent, garbage))
    after, stats_after = aem_modulate(adv, noisy, mask, groups, lam=1.0)
    assert torch.equal(before, after)
    assert stats_before == stats_after


@settings(max_examples=40, deadline=None)
@given(batches(), entropy)
def test_identical_entropy_gives_alpha_one(batch, value: float) -> None:
    adv, _, mask, groups = batch
    ent = torch.full(mask.shape, value)
    modulated, stats = aem_modulate(adv, ent, mask, groups, lam=2.0)
    assert torch.equal(modulated, adv)
    assert stats["alpha_min"] == stats["alpha_max"] == 1.0


def test_single_member_groups_keep_alpha_one() -> None:
    adv = torch.tensor([1.0, -2.0, 0.5])
    ent = torch.tensor([[0.1, 0.2], [3.0, 4.0], [1.0, 0.0]])
    modulated, _ = aem_modulate(adv, ent, torch.ones_like(ent), torch.arange(3), lam=1.0)
    assert torch.equal(modulated, adv)


def test_formula_on_a_worked_example() -> None:
    adv = torch.tensor([1.0, 1.0, -1.0])
    ent = torch.tensor([[0.0], [1.0], [2.0]])
    modulated, stats = aem_modulate(adv, ent, torch.ones_like(ent), torch.zeros(3), lam=1.0, eps=0)
    weights = [1.0, math.exp(-0.5), math.exp(-1.0)]
    mean = sum(weights) / 3
    assert modulated.tolist() == pytest.approx(
        [w / mean * a for w, a in zip(weights, adv.tolist(), strict=True)]
    )
    assert stats["entropy_mean"] == pytest.approx(1.0)
    assert stats["positive_advantage_share"] == pytest.approx(2 / 3)
    assert stats["alpha_max"] == pytest.approx(1 / mean)


def test_turn_level_gives_one_alpha_per_turn() -> None:
    adv = torch.tensor([2.0, 2.0])
    ent = torch.tensor([[0.0, 0.0, 9.0, 1.0], [2.0, 2.0, 2.0, 2.0]])
    mask = torch.tensor([[1, 1, 0, 1], [1, 1, 1, 1]])
    turns = torch.tensor([[0, 0, 0, 1], [0, 0, 1, 1]])
    modulated, _ = aem_modulate(adv, ent, mask, torch.zeros(2), lam=1.0, turn_ids=turns)
    assert modulated.shape == ent.shape
    # Turn 0 of row 0 (H̄ 0) is the least surprising unit, both turns of row 1 (H̄ 2) the most.
    assert modulated[0, 0] == modulated[0, 1] > modulated[0, 3] > modulated[1, 0]
    assert modulated[1, 0] == modulated[1, 3]
    hbars = torch.tensor([0.0, 1.0, 2.0, 2.0])
    valid = torch.ones(4, dtype=torch.bool)
    alpha, gated = group_alpha(hbars, torch.zeros(4), valid, lam=1.0, eps=1e-6)
    assert not gated.any()
    assert modulated[0, 3].item() == pytest.approx(2 * alpha[1].item())
    assert alpha.mean().item() == pytest.approx(1.0)


def test_empty_responses_keep_alpha_one_and_stay_out_of_the_group() -> None:
    adv = torch.tensor([1.0, 1.0, 1.0])
    ent = torch.tensor([[0.0], [1.0], [5.0]])
    mask = torch.tensor([[1], [1], [0]])
    modulated, _ = aem_modulate(adv, ent, mask, torch.zeros(3), lam=1.0)
    assert modulated[2] == 1.0
    assert (modulated[:2].mean()).item() == pytest.approx(1.0)


def test_gate_keeps_alpha_one_below_the_minimum_range() -> None:
    adv = torch.tensor([1.0, 1.0, 1.0, 1.0])
    # Group 0's mean entropies span 0.05 nats (under the 0.1 gate), group 1's span 0.5.
    ent = torch.tensor([[1.0], [1.05], [1.0], [1.5]])
    groups = torch.tensor([0, 0, 1, 1])
    modulated, stats = aem_modulate(adv, ent, torch.ones_like(ent), groups, lam=1.0)
    assert modulated[:2].tolist() == [1.0, 1.0]
    assert modulated[2] > 1.0 > modulated[3]
    assert stats["gated_share"] == pytest.approx(0.5)
    opened, _ = aem_modulate(adv, ent, torch.ones_like(ent), groups, lam=1.0, min_range=0.01)
    assert opened[0] > 1.0 > opened[1]


def _two_episodes() -> dict[str, torch.Tensor]:
    """One group of two episodes (3 and 2 turns) in both layouts, with per-token entropies."""
    turns = [[[0.1, 0.3], [2.0], [1.0, 1.2, 1.4]], [[0.5], [3.0, 2.0]]]
    width = max(sum(len(t) for t in e) for e in turns)
    traj_ent = torch.zeros(2, width)
    traj_turn = torch.full((2, width), -1)
    for b, episode in enumerate(turns):
        flat = [(k, h) for k, turn in enumerate(episode) for h in turn]
        for j, (k, h) in enumerate(flat):
            traj_ent[b, j], traj_turn[b, j] = h, k
    rows = [turn for episode in turns for turn in episode]
    step_width = max(len(r) for r in rows)
    step_ent = torch.tensor([r + [0.0] * (step_width - len(r)) for r in rows])
    step_mask = torch.tensor([[1] * len(r) + [0] * (step_width - len(r)) for r in rows])
    return {
        "traj_ent": traj_ent,
        "traj_mask": (traj_turn >= 0).long(),
        "traj_turn": traj_turn,
        "step_ent": step_ent,
        "step_mask": step_mask,
        "step_episode": torch.tensor([0, 0, 0, 1, 1]),
    }


def test_same_alpha_for_the_same_turns_in_both_layouts() -> None:
    x = _two_episodes()
    adv = torch.tensor([1.0, -1.0])
    trajectory, _ = aem_modulate(
        adv, x["traj_ent"], x["traj_mask"], torch.zeros(2), turn_ids=x["traj_turn"]
    )
    step_adv = adv[x["step_episode"]]
    step, _ = aem_modulate(step_adv, x["step_ent"], x["step_mask"], torch.zeros(5))
    per_turn = [
        trajectory[b, (x["traj_turn"][b] == k).nonzero()[0, 0]].item()
        for b, n in ((0, 3), (1, 2))
        for k in range(n)
    ]
    assert per_turn == pytest.approx(step.tolist())
    assert len(set(round(v, 6) for v in per_turn[:3])) == 3  # turns of one episode differ


def test_trajectory_unit_gives_one_alpha_per_episode_in_both_layouts() -> None:
    x = _two_episodes()
    adv = torch.tensor([1.0, 1.0])
    trajectory, _ = aem_modulate(
        adv, x["traj_ent"], x["traj_mask"], torch.zeros(2), unit="trajectory", min_range=0.0
    )
    step, _ = aem_modulate(
        adv[x["step_episode"]],
        x["step_ent"],
        x["step_mask"],
        torch.zeros(5),
        unit="trajectory",
        episode_ids=x["step_episode"],
        min_range=0.0,
    )
    assert step.tolist() == pytest.approx(trajectory[x["step_episode"]].tolist())
    assert trajectory[0] > 1.0 > trajectory[1]  # episode 0's mean entropy is the lower one


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scope": "episode"}, "scope"),
        ({"unit": "episode"}, "unit"),
        ({"min_range": -1.0}, "min_range"),
    ],
)
def test_bad_settings_raise_one_clear_error(kwargs: dict, message: str) -> None:
    ent = torch.zeros(2, 3)
    with pytest.raises(ValueError, match=message):
        aem_modulate(torch.zeros(2), ent, torch.ones_like(ent), torch.zeros(2), **kwargs)


# ---------------------------------------------------------------------------- the ablations
@settings(max_examples=60, deadline=None)
@given(batches(), st.floats(min_value=0.05, max_value=4.0))
def test_reversed_alpha_is_the_mirror_of_alpha(batch, lam: float) -> None:
    """λ < 0 weighs a response as λ > 0 weighs the response of mirrored entropy (−H̄)."""
    _, ent, mask, groups = batch
    hbar = (ent * mask).sum(1) / mask.sum(1)
    valid = torch.ones(len(hbar), dtype=torch.bool)
    reversed_alpha, gated = group_alpha(hbar, groups, valid, lam=-lam)
    mirrored, mirrored_gated = group_alpha(-hbar, groups, valid, lam=lam)
    assert torch.equal(gated, mirrored_gated)
    assert reversed_alpha.tolist() == pytest.approx(mirrored.tolist(), rel=1e-9)


def test_reversed_alpha_weighs_surprising_responses_more() -> None:
    hbar = torch.tensor([0.2, 0.9, 1.6])
    alpha, _ = group_alpha(hbar, torch.zeros(3), torch.ones(3, dtype=torch.bool), lam=-1.0)
    assert alpha[0] < alpha[1] < alpha[2]
    assert alpha.mean().item() == pytest.approx(1.0)


@settings(max_examples=60, deadline=None)
@given(batches(), st.floats(min_value=-3.0, max_value=3.0), st.integers(0, 2**31))
def test_shuffled_alpha_keeps_each_groups_multiset(batch, lam: float, seed: int) -> None:
    _, ent, mask, groups = batch
    hbar = (ent * mask).sum(1) / mask.sum(1)
    valid = torch.ones(len(hbar), dtype=torch.bool)
    alpha, gated = group_alpha(hbar, groups, valid, lam=lam)
    shuffled, shuffled_gated = group_alpha(
        hbar, groups, valid, lam=lam, shuffle=torch.Generator().manual_seed(seed)
    )
    assert torch.equal(gated, shuffled_gated)
    for g in groups.unique():
        members = groups == g
        assert sorted(shuffled[members].tolist()) == sorted(alpha[members].tolist())


def test_shuffled_alpha_cuts_the_link_to_entropy() -> None:
    """Over many draws every unit gets the lowest α of its group sometimes."""
    hbar = torch.tensor([0.1, 0.5, 0.9, 1.3])
    valid = torch.ones(4, dtype=torch.bool)
    alpha, _ = group_alpha(hbar, torch.zeros(4), valid, lam=1.0)
    lowest = set()
    for seed in range(40):
        drawn, _ = group_alpha(
            hbar, torch.zeros(4), valid, lam=1.0, shuffle=torch.Generator().manual_seed(seed)
        )
        lowest.add(int(drawn.argmin()))
    assert int(alpha.argmin()) == 3 and lowest == {0, 1, 2, 3}


def test_scopes_normalise_over_the_group_the_trajectory_or_the_batch() -> None:
    """Two groups of two step-layout episodes, two turns each: the mean of α is 1 over each
    GRPO group, each episode's turns or the whole batch, as the scope says."""
    mask = torch.ones(8, 1)
    groups = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    episodes = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    ent = torch.tensor([[0.1], [1.9], [0.7], [1.0], [2.5], [3.9], [3.1], [3.0]])
    units = unit_index(mask, groups, episode_ids=episodes)
    adv = torch.ones(8)
    for scope, keys in (("group", groups), ("trajectory", episodes), ("batch", torch.zeros(8))):
        assert torch.equal(scope_keys(units, scope), keys.long())
        alpha, _ = aem_modulate(
            adv, ent, mask, groups, episode_ids=episodes, scope=scope, min_range=0.0
        )
        for key in keys.unique():
            assert alpha[keys == key].double().mean().item() == pytest.approx(1.0, abs=1e-6)
    batch_alpha, _ = aem_modulate(adv, ent, mask, groups, scope="batch", min_range=0.0)
    group_alpha_, _ = aem_modulate(adv, ent, mask, groups, scope="group", min_range=0.0)
    assert batch_alpha[:4].mean() > 1.0 > batch_alpha[4:].mean()  # group 0 is the calmer one
    assert not torch.allclose(batch_alpha, group_alpha_)


def test_positive_advantage_share_counts_units_not_episodes() -> None:
    """A failed episode of three turns and a won one of one turn: 1 of 4 units is positive."""
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0]])
    turn_ids = torch.tensor([[0, 0, 1, 1, 2, 2], [0, 0, -1, -1, -1, -1]])
    _, stats = aem_modulate(
        torch.tensor([-1.0, 1.0]), torch.rand(2, 6), mask, torch.zeros(2), turn_ids=turn_ids
    )
    assert stats["positive_advantage_share"] == pytest.approx(0.25)
    # A group of equal rewards leaves TRL's advantages at rounding noise: not a success.
    _, stats = aem_modulate(torch.tensor([1e-5, -1e-5]), torch.rand(2, 6), mask, torch.zeros(2))
    assert stats["positive_advantage_share"] == 0.0
