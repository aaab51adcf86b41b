"""``turn-penalty``: the outcome for every turn, each penalty for its own turn (verl-agent)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from aem_agent.credit import CreditError, TurnBatch, TurnPenalty, build
from aem_agent.grpo.config import AEMConfig


def turns(rewards: list[list[float]], group: list[int]) -> TurnBatch:
    """One unit per turn; ``rewards[e]`` are episode e's turn rewards. The incoming advantage is
    deliberately nonsense: the estimator must not read it."""
    episode = torch.repeat_interleave(
        torch.arange(len(rewards)), torch.tensor([len(r) for r in rewards])
    )
    return TurnBatch(
        episode=episode,
        group=torch.tensor(group)[episode],
        turn=torch.cat([torch.arange(len(r)) for r in rewards]),
        advantage=torch.full((len(episode),), 123.0, dtype=torch.float64),
        tokens=torch.full((len(episode),), 7),
        reward=torch.tensor([x for r in rewards for x in r], dtype=torch.float64),
    )


def test_a_penalty_is_charged_to_its_own_turn_and_the_win_to_every_turn() -> None:
    # A won episode with an invalid second turn, and a lost one with an invalid last turn.
    batch = turns([[0, -0.1, 10], [0, 0, -0.1]], [0, 0])
    assert TurnPenalty().scores(batch).tolist() == pytest.approx([10, 9.9, 10, 0, 0, -0.1])
    credit = TurnPenalty(scale="none")(batch)
    mean = (10 + 9.9 + 10 - 0.1) / 6
    assert credit.advantage.tolist() == pytest.approx(
        [10 - mean, 9.9 - mean, 10 - mean, -mean, -mean, -0.1 - mean]
    )
    # Inside each episode the invalid turn is the one below its neighbours, by the penalty.
    assert float(credit.advantage[0] - credit.advantage[1]) == pytest.approx(0.1)
    assert float(credit.advantage[4] - credit.advantage[5]) == pytest.approx(0.1)
    assert credit.metrics["turn_penalty/penalised_share"] == pytest.approx(2 / 6)


def test_in_a_group_without_a_win_the_group_scale_makes_penalties_full_size() -> None:
    # Group 0: no win, one invalid turn in six; group 1: a win and a loss, no penalty.
    batch = turns([[0, 0, -0.1], [0, 0, 0], [0, 10], [0, 0]], [0, 0, 1, 1])
    group = TurnPenalty(scale="group")(batch).advantage
    rows = batch.group == 0
    assert float(group[rows].sum()) == pytest.approx(0, abs=1e-9)
    assert float(group[rows].std()) == pytest.approx(1, rel=1e-4)  # a full-size signal
    assert float(group[2]) < -2  # the invalid turn
    batch_scaled = TurnPenalty(scale="batch")(batch).advantage
    assert abs(float(batch_scaled[2])) < 0.05  # beside a win of 10 it is small
    for g in (0, 1):  # every group's rows sum to zero whatever the scale
        assert float(batch_scaled[batch.group == g].sum()) == pytest.approx(0, abs=1e-9)


def test_without_penalties_it_centres_on_the_group_mean_over_turns() -> None:
    # A 2-turn win beside a 5-turn loss: the turn baseline, as turn-mean's.
    batch = turns([[0, 10], [0, 0, 0, 0, 0]], [0, 0])
    advantage = TurnPenalty(scale="none")(batch).advantage
    assert advantage.tolist() == pytest.approx([10 - 20 / 7] * 2 + [-20 / 7] * 5)


@pytest.mark.parametrize(
    ("setting", "scale"), [("group", "group"), (True, "group"), ("batch", "batch"), (False, "none")]
)
def test_its_scale_is_trl_scale_rewards(tmp_path: Path, setting: object, scale: str) -> None:
    config = AEMConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], scale_rewards=setting)
    assert TurnPenalty.from_config(config).scale == scale  # TRL's old spellings too


def test_a_scale_it_cannot_follow_is_one_clear_error() -> None:
    with pytest.raises(CreditError, match="scale_rewards='sometimes'"):
        TurnPenalty.from_config(SimpleNamespace(scale_rewards="sometimes"))


def test_it_needs_the_turn_rewards() -> None:
    batch = turns([[0, 10]], [0])
    with pytest.raises(CreditError, match="needs the turns' reward"):
        TurnPenalty()(
            TurnBatch(batch.episode, batch.group, batch.turn, batch.advantage, batch.tokens)
        )


def test_it_chains_first_and_the_config_accepts_it(tmp_path: Path) -> None:
    config = AEMConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        report_to=[],
        credit="turn-penalty+aem",
        scale_rewards="batch",
    )
    chain = build(config.credit_spec, config)
    assert [e.name for e in chain.estimators] == ["turn-penalty", "aem"]
    assert chain.estimators[0].scale == "batch"
    assert chain.needs >= {"reward", "entropy"}
