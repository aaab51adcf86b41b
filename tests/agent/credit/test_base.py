"""The credit interface: chains, the registry, and turn batches from either rollout layout."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from aem_agent.credit import AEM, GRPO, Chain, Credit, CreditError, GiGPO, TurnBatch, build, parse
from aem_agent.credit.modulation import aem_modulate
from aem_agent.credit.turns import RowTurns, local_turns, token_advantages
from tests.agent.conftest import Doubling


def step_rows() -> tuple[RowTurns, torch.Tensor]:
    """Two episodes of one group as step rows (3 + 2 turns, one padding row), and entropies."""
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0], [1, 0, 0], [0, 0, 0]])
    entropies = torch.tensor(
        [[0.5, 0.7, 9], [2.0, 9, 9], [0.1, 0.2, 0.3], [1.5, 1.0, 9], [3.0, 9, 9], [9, 9, 9]]
    )
    rows = RowTurns(
        mask=mask,
        group=torch.zeros(6, dtype=torch.long),
        episode=torch.tensor([0, 0, 0, 1, 1, -1]),
        first_episode=0,
        advantage=torch.tensor([1.0, 1.0, 1.0, -1.0, -1.0, 0.0]),
        row_turn=torch.tensor([0, 1, 2, 0, 1, 0]),
        rewards=[[0.0, 0.0, 10.0], [0.0, -0.1]],
        anchors=[["s0", "s1", "s2"], ["s0", "s3"]],
    )
    return rows, entropies


def trajectory_rows() -> tuple[RowTurns, torch.Tensor]:
    """The same two episodes as one row each, observation tokens (mask 0) between turns."""
    mask = torch.tensor([[1, 1, 0, 1, 0, 1, 1, 1], [1, 1, 0, 0, 1, 0, 0, 0]])
    turn = torch.tensor([[0, 0, -1, 1, -1, 2, 2, 2], [0, 0, -1, -1, 1, -1, -1, -1]])
    entropies = torch.tensor([[0.5, 0.7, 9, 2.0, 9, 0.1, 0.2, 0.3], [1.5, 1.0, 9, 9, 3.0, 9, 9, 9]])
    step, _ = step_rows()
    rows = RowTurns(
        mask=mask,
        group=torch.zeros(2, dtype=torch.long),
        episode=torch.arange(2),
        first_episode=0,
        advantage=torch.tensor([1.0, -1.0]),
        token_turn=turn,
        rewards=step.rewards,
        anchors=step.anchors,
    )
    return rows, entropies


def test_both_layouts_give_the_same_turn_batch() -> None:
    batches = []
    for rows, entropies in (step_rows(), trajectory_rows()):
        batches.append(local_turns(rows, rows.units(), entropies=entropies))
    step, trajectory = batches
    for name in ("episode", "group", "turn", "advantage", "tokens", "entropy", "reward"):
        assert torch.allclose(getattr(step, name).double(), getattr(trajectory, name).double())
    assert step.anchor == trajectory.anchor == ["s0", "s1", "s2", "s0", "s3"]
    assert step.entropy is not None
    assert step.entropy.tolist() == pytest.approx([0.6, 2.0, 0.2, 1.25, 3.0])  # own tokens only
    assert step.reward is not None and step.reward.tolist() == [0.0, 0.0, 10.0, 0.0, -0.1]


def test_the_aem_estimator_equals_aem_on_bare_tensors() -> None:
    rows, entropies = step_rows()
    units = rows.units()
    batch = local_turns(rows, units, entropies=entropies)
    credit = AEM(lam=2.0, min_range=0.0)(batch)
    written = token_advantages(rows.advantage, credit.advantage, units)
    expected, stats = aem_modulate(
        rows.advantage, entropies, rows.mask, rows.group, lam=2.0, min_range=0.0
    )
    assert torch.allclose(written, expected)
    assert credit.metrics["aem/alpha_min"] == pytest.approx(stats["alpha_min"])
    assert credit.metrics["aem/units"] == 5


@pytest.mark.parametrize("aem", [AEM(apply=False, min_range=0.0), AEM(lam=0.0, min_range=0.0)])
def test_aem_that_only_observes_records_the_weight_it_applied(aem: AEM) -> None:
    """An observer (a GRPO run's) or λ = 0 leaves the advantage alone and records α = 1 per
    unit, the weight the update used (the drift law predicts from it)."""
    rows, entropies = step_rows()
    batch = local_turns(rows, rows.units(), entropies=entropies)
    credit = aem(batch)
    assert torch.equal(credit.advantage, batch.advantage)
    assert torch.equal(credit.units["aem/alpha"], torch.ones(len(batch), dtype=torch.float64))
    if aem.lam != 0:  # the observer still logs the α it would have applied
        assert credit.metrics["aem/alpha_max"] > credit.metrics["aem/alpha_min"]
    applied = AEM(min_range=0.0)(batch)
    assert torch.allclose(applied.advantage, applied.units["aem/alpha"] * batch.advantage.double())


def test_per_token_advantages_only_where_a_row_holds_turns_that_differ() -> None:
    rows, entropies = trajectory_rows()
    units = rows.units()
    batch = local_turns(rows, units, entropies=entropies)
    same = token_advantages(rows.advantage, GRPO()(batch).advantage, units)
    assert torch.equal(same, rows.advantage)  # GRPO: one value per row, bit for bit
    turned = token_advantages(rows.advantage, GiGPO()(batch).advantage, units)
    assert turned.shape == rows.mask.shape
    assert turned[0, 0] != turned[0, 3]  # two turns of one row, two advantages


def test_a_chain_feeds_each_estimator_the_previous_advantage() -> None:
    rows, entropies = step_rows()
    batch = local_turns(rows, rows.units(), entropies=entropies)
    gigpo = GiGPO()(batch)
    chained = Chain((GiGPO(), Doubling()))(batch)
    assert torch.allclose(chained.advantage, 2 * gigpo.advantage)
    assert set(chained.metrics) == {*gigpo.metrics, "double/calls"}
    assert Chain((GiGPO(), AEM())).needs == {"reward", "anchor", "entropy"}


def test_names_select_estimators(tmp_path, registered_double) -> None:
    from aem_agent.grpo.config import AEMConfig

    config = AEMConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[])
    assert [type(e) for e in build("gigpo+aem", config).estimators] == [GiGPO, AEM]
    assert build("grpo", config).name == "grpo"
    assert build("gigpo+double", config).name == "gigpo+double"
    assert parse("aem") == ["aem"]


@pytest.mark.parametrize(
    ("spec", "message"), [("gipgo", "unknown estimator 'gipgo'"), ("aem+aem", "twice")]
)
def test_bad_chains_name_the_problem(spec: str, message: str) -> None:
    with pytest.raises(CreditError, match=message):
        parse(spec)


def test_an_estimator_returning_the_wrong_shape_is_refused() -> None:
    rows, _ = step_rows()
    batch = local_turns(rows, rows.units())

    @dataclasses.dataclass(frozen=True)
    class Scalar:
        name: str = "scalar"
        needs: frozenset[str] = frozenset()

        def __call__(self, batch: TurnBatch) -> Credit:
            return Credit(batch.advantage.sum())

    with pytest.raises(CreditError, match=r"scalar.*one per unit"):
        Chain((Scalar(),))(batch)
