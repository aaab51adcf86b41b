"""The trainer's credit path on the tiny model: chains by name, a user's estimator, GiGPO's
step advantage on real rollouts, and infrastructure-failed episodes left out."""

from __future__ import annotations

import itertools
from typing import Any

import gymnasium as gym
import pytest
import torch

from aem_agent.rollout.batches import episode_reward
from tests.agent.conftest import DoorsEnv
from tests.agent.grpo.test_trainer import batch_out, make_config, make_trainer, weights

#: Test env ids: doors whose every step earns the env's index (0..3) so a group's returns
#: differ, the same with one step per episode where the env of index 1 fails, and doors where
#: one episode of each group wins at once while the others play to the turn limit.
INDEXED_ENV_ID, FLAKY_ENV_ID = "aemtest/IndexedDoors-v0", "aemtest/FlakyDoors-v0"
SHORT_WIN_ENV_ID, PENALISED_ENV_ID = "aemtest/ShortWinDoors-v0", "aemtest/PenalisedDoors-v0"


class IndexedDoorsEnv(DoorsEnv):
    """Doors whose every step (valid or not) earns the env's creation index modulo 4."""

    made = itertools.count()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.index = next(self.made) % 4

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self._rewarded(super().step(action))

    def reject(self, reason: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self._rewarded(super().reject(reason))

    def _rewarded(self, result: tuple) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, _, terminated, truncated, info = result
        return obs, float(self.index), terminated, truncated, info


class FlakyDoorsEnv(IndexedDoorsEnv):
    """One step per episode; the env of index 1 reports ``info["infra_error"]``, as an env
    whose engine connection was lost does."""

    made = itertools.count()

    def _rewarded(self, result: tuple) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, reward, _, truncated, info = super()._rewarded(result)
        if self.index == 1:
            info = {**info, "infra_error": "engine connection lost"}
        return obs, reward, True, truncated, info


class ShortWinDoorsEnv(IndexedDoorsEnv):
    """The env of index 0 wins on its first step (reward 10, episode over); the others earn
    nothing and play to the turn limit: ALFWorld's short wins beside long losses."""

    made = itertools.count()

    def _rewarded(self, result: tuple) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, _, terminated, truncated, info = result
        if self.index == 0:
            return obs, 10.0, True, truncated, info
        return obs, 0.0, terminated, truncated, info


class PenalisedDoorsEnv(ShortWinDoorsEnv):
    """ShortWinDoors whose losing episodes are penalised −0.1 on their second turn: ALFWorld's
    invalid-action penalty, on one known turn."""

    made = itertools.count()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.turn = 0

    def _rewarded(self, result: tuple) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = super()._rewarded(result)
        self.turn += 1
        return obs, reward - 0.1 * (self.turn == 2), terminated, truncated, info


def registered(env_id: str, entry_point: type) -> str:
    """``env_id``, registered with Gymnasium once for the session."""
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=entry_point)
    return env_id


@pytest.fixture(scope="module")
def penalised_env_id() -> str:
    return registered(PENALISED_ENV_ID, PenalisedDoorsEnv)


@pytest.fixture(scope="module")
def short_win_env_id() -> str:
    return registered(SHORT_WIN_ENV_ID, ShortWinDoorsEnv)


@pytest.fixture(scope="module")
def indexed_env_id() -> str:
    return registered(INDEXED_ENV_ID, IndexedDoorsEnv)


@pytest.fixture(scope="module")
def flaky_env_id() -> str:
    return registered(FLAKY_ENV_ID, FlakyDoorsEnv)


def test_gigpo_adds_the_step_advantage_of_the_shared_first_state(
    tiny_model_dir, tmp_path, indexed_env_id
) -> None:
    """All episodes of a group start in one state: turn 0 forms one anchor group, so each
    first turn's advantage is GRPO's plus its standardised discounted return (hand-computed
    here from the played turns)."""
    overrides = dict(rollout_layout="step", max_turns=3, max_completion_length=400)
    grpo, inputs = batch_out(
        make_trainer(
            tiny_model_dir, make_config(tmp_path, indexed_env_id, credit="grpo", **overrides)
        )
    )
    gigpo_trainer = make_trainer(
        tiny_model_dir, make_config(tmp_path, indexed_env_id, credit="gigpo", **overrides)
    )
    gigpo, again = batch_out(gigpo_trainer)
    assert [x["steps"] for x in again] == [x["steps"] for x in inputs]  # the same episodes
    returns = torch.tensor(
        [sum(0.95**t * s["reward"] for t, s in enumerate(x["steps"])) for x in inputs],
        dtype=torch.float64,
    )
    step = (returns - returns.mean()) / (returns.std() + 1e-6)
    assert step.abs().sum() > 0  # the episodes' returns differ
    first_rows = torch.tensor([0, *itertools.accumulate(len(x["steps"]) for x in inputs)][:-1])
    expected = grpo["advantages"][first_rows].double() + step
    assert torch.allclose(gigpo["advantages"][first_rows].double(), expected, atol=1e-5)
    assert len({s["anchor"] for x in inputs for s in x["steps"][:1]}) == 1
    metrics = gigpo_trainer._metrics["train"]
    assert metrics["gigpo/repeated_state_share"][0] > 0
    assert "aem/alpha_min" in metrics  # AEM observed (not applied) beside GiGPO


@pytest.mark.parametrize("layout", ["step", "trajectory"])
def test_gigpo_with_aem_trains(tiny_model_dir, tmp_path, doors_env_id, layout) -> None:
    config = make_config(tmp_path, doors_env_id, rollout_layout=layout, credit="gigpo+aem")
    trainer = make_trainer(tiny_model_dir, config)
    before = weights(trainer.model)
    trainer.train()
    logs = [row for row in trainer.state.log_history if "gigpo/step_groups" in row]
    assert len(logs) == 2 and all("aem/alpha_min" in row for row in logs)
    after = weights(trainer.model)
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))


def test_a_registered_estimator_runs_through_the_trainer(
    tiny_model_dir, tmp_path, doors_env_id, registered_double
) -> None:
    overrides = dict(rollout_layout="step", max_turns=2)
    grpo, _ = batch_out(
        make_trainer(
            tiny_model_dir, make_config(tmp_path, doors_env_id, credit="grpo", **overrides)
        )
    )
    trainer = make_trainer(
        tiny_model_dir, make_config(tmp_path, doors_env_id, credit="double", **overrides)
    )
    doubled, _ = batch_out(trainer)
    assert torch.equal(doubled["advantages"], 2 * grpo["advantages"])
    assert trainer._metrics["train"]["double/calls"] == [1.0]


@pytest.mark.parametrize("layout", ["step", "trajectory"])
def test_an_infrastructure_failure_is_out_of_baseline_and_loss(
    tiny_model_dir, tmp_path, flaky_env_id, layout
) -> None:
    config = make_config(tmp_path, flaky_env_id, rollout_layout=layout, max_steps=1)
    trainer = make_trainer(tiny_model_dir, config, reward=episode_reward)
    out, inputs = batch_out(trainer)
    failed = [bool(x["infra_error"]) for x in inputs]
    assert failed.count(True) == 1
    rewards = torch.tensor([x["episode_reward"] for x in inputs])
    kept = rewards[~torch.tensor(failed)]
    assert kept.unique().numel() > 1  # the baseline is not trivially zero
    expected = (kept - kept.mean()) / (kept.std() + 1e-4)  # TRL's formula, failed one left out
    if layout == "step":  # one row per turn; the failed episode has none
        assert out["advantages"][: len(kept)].tolist() == pytest.approx(expected.tolist(), abs=1e-5)
        assert out["completion_mask"][len(kept) :].sum() == 0
    else:
        advantages = out["advantages"]
        assert advantages[torch.tensor(failed)].abs().sum() == 0
        assert advantages[~torch.tensor(failed)].tolist() == pytest.approx(
            expected.tolist(), abs=1e-5
        )
        assert out["completion_mask"][torch.tensor(failed)].sum() == 0
        assert out["num_items_in_batch"] == out["completion_mask"].mul(out["tool_mask"]).sum()
    assert trainer._metrics["train"]["episode/infra_failed"] == [1.0]
    before = weights(trainer.model)
    trainer.train()  # a batch with a failed episode trains
    assert trainer.state.global_step == 1
    assert any(not torch.equal(a, b) for a, b in zip(before, weights(trainer.model), strict=True))


def test_step_layout_logs_token_counts_of_the_turn_rows(
    tiny_model_dir, tmp_path, doors_env_id
) -> None:
    """``num_tokens`` and the completion lengths describe the turn rows trained on, not TRL's
    one-token stand-ins."""
    config = make_config(tmp_path, doors_env_id, rollout_layout="step", max_turns=3)
    trainer = make_trainer(tiny_model_dir, config)
    _, inputs = batch_out(trainer)
    turns = [s for x in inputs for s in x["steps"]]
    replies = torch.tensor([float(len(s["completion_ids"])) for s in turns])
    tokens = sum(len(s["prompt_ids"]) + len(s["completion_ids"]) for s in turns)
    metrics = trainer._metrics["train"]
    assert len(turns) > len(inputs)  # several turns per episode: stand-ins would differ
    assert metrics["num_tokens"] == [tokens] and trainer.state.num_input_tokens_seen == tokens
    assert metrics["completions/mean_length"] == [pytest.approx(float(replies.mean()))]
    assert metrics["completions/min_length"] == [float(replies.min())]
    assert metrics["completions/max_length"] == [float(replies.max())]


def test_turn_mean_recentres_the_groups_turn_rows_on_real_rollouts(
    tiny_model_dir, tmp_path, short_win_env_id
) -> None:
    """Step layout, episodes of different lengths in one group: TRL's episode baseline leaves
    the group's turn rows summing to non-zero; ``turn-mean`` shifts every row of the group by
    one constant so that they sum to zero."""
    overrides = dict(rollout_layout="step", max_turns=3, max_completion_length=400)
    grpo, inputs = batch_out(
        make_trainer(
            tiny_model_dir, make_config(tmp_path, short_win_env_id, credit="grpo", **overrides)
        )
    )
    centred, again = batch_out(
        make_trainer(
            tiny_model_dir, make_config(tmp_path, short_win_env_id, credit="turn-mean", **overrides)
        )
    )
    assert [x["steps"] for x in again] == [x["steps"] for x in inputs]  # the same episodes
    lengths = [len(x["steps"]) for x in inputs]
    assert len(set(lengths)) > 1  # the case turn-mean exists for
    rows = sum(lengths)
    before, after = grpo["advantages"][:rows].double(), centred["advantages"][:rows].double()
    assert abs(float(before.sum())) > 1e-3
    assert float(after.sum()) == pytest.approx(0, abs=1e-5)
    shift = after - before
    assert torch.allclose(shift, shift[0].expand_as(shift), atol=1e-6)


def test_turn_penalty_charges_each_penalty_to_its_own_turn_row_on_real_rollouts(
    tiny_model_dir, tmp_path, penalised_env_id
) -> None:
    """Step layout: every turn row's advantage is the episode's outcome plus the row's own
    penalty, centred and scaled over the group's rows (TRL's default group scale), as computed
    here by hand from the rewards the rollout reported."""
    overrides = dict(rollout_layout="step", max_turns=3, max_completion_length=400)
    trainer = make_trainer(
        tiny_model_dir, make_config(tmp_path, penalised_env_id, credit="turn-penalty", **overrides)
    )
    out, inputs = batch_out(trainer)
    steps = [x["steps"] for x in inputs]
    assert any(s["reward"] < 0 for e in steps for s in e)  # penalised turns were played
    score = torch.tensor(
        [sum(max(s["reward"], 0) for s in e) + min(t["reward"], 0) for e in steps for t in e],
        dtype=torch.float64,
    )
    expected = (score - score.mean()) / (score.std() + 1e-6)
    assert torch.allclose(out["advantages"][: len(score)].double(), expected, atol=1e-5)
    assert trainer._metrics["train"]["turn_penalty/penalised_share"][0] > 0


def test_one_update_moves_each_turn_rows_reply_with_its_advantage(
    tiny_model_dir, tmp_path, penalised_env_id
) -> None:
    """The whole step-layout path, rollout to gradient: after one plain gradient step on the
    trainer's loss, the won episode's turn row is more likely and the lost ones' rows less,
    each by about its advantage (the rows, their advantages and the loss's tokens agree)."""
    overrides = dict(rollout_layout="step", max_turns=3, max_completion_length=400)
    trainer = make_trainer(
        tiny_model_dir,
        make_config(tmp_path, penalised_env_id, credit="turn-penalty", scale_rewards="none",
                    **overrides),
    )  # fmt: skip
    out, _ = batch_out(trainer)
    model, advantage = trainer.model, out["advantages"]
    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], 1)
    attention = torch.cat([out["prompt_mask"], out["completion_mask"]], 1)
    start = out["prompt_ids"].shape[1] - 1

    def reply_logprob() -> torch.Tensor:
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1].float()
        tokens = torch.log_softmax(logits, -1).gather(2, ids[:, 1:].unsqueeze(2)).squeeze(2)
        return (tokens[:, start:] * out["completion_mask"]).sum(1)

    before = reply_logprob()
    # Trainer's training loop sets this before every step; TRL's loss reads it.
    trainer.current_gradient_accumulation_steps = 1
    model.zero_grad()
    trainer.compute_loss(model, out).backward()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.grad is not None:
                parameter -= 0.5 * parameter.grad
    moved = reply_logprob() - before
    assert (advantage > 0).any() and (advantage < 0).any()
    assert bool((moved[advantage > 0] > 0).all()) and bool((moved[advantage < 0] < 0).all())
    assert float(torch.corrcoef(torch.stack([moved, advantage.float()]))[0, 1]) > 0.8
