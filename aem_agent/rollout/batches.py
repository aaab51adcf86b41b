"""Played episodes as the batch TRL's ``rollout_func`` returns, and the reward read from it.

Why apart from :mod:`aem_agent.rollout.groups`: the rows are what the trainer consumes (TRL's keys
plus AEM's: sampler entropies, turn ids, the step layout's ``steps``), so their shape is
defined here once, next to the reward function that reads the same batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

from aem_agent.rollout.records import Episode, Turn

#: How episodes become training rows: one per turn (``step``) or one per episode
#: (``trajectory``); :mod:`aem_agent.rollout.groups` says what each holds.
Layout = Literal["step", "trajectory"]
LAYOUTS: tuple[str, ...] = get_args(Layout)


def trajectory_batch(
    episodes: Sequence[Episode], *, stand_in_eos: int | None = None
) -> dict[str, list]:
    """Episodes in the shape TRL's ``rollout_func`` returns (one row per episode).

    ``env_mask`` becomes TRL's tool mask; the other extra keys reach the reward functions and
    :class:`aem_agent.grpo.trainer.AEMGRPOTrainer` (sampler entropies, turn ids for turn-level AEM,
    episode statistics). With ``stand_in_eos`` (the step layout) each row is a one-token
    stand-in — the last prompt token and that EOS — so that TRL's forwards over the episode rows
    cost nothing, and the row carries its episode's turns (``steps``), which the trainer turns
    into one training row per turn after TRL has computed the advantages.
    """
    batch: dict[str, list] = {
        "episode_reward": [e.reward for e in episodes],
        "won": [float(e.won) for e in episodes],
        "score": [e.score for e in episodes],
        "num_turns": [len(e.turns) for e in episodes],
        "valid_rate": [
            sum(t.action_valid for t in e.turns) / max(len(e.turns), 1) for e in episodes
        ],
        "infra_error": [e.infra_error for e in episodes],
    }
    if stand_in_eos is not None:
        batch.update(
            prompt_ids=[e.prompt_ids[-1:] for e in episodes],
            completion_ids=[[stand_in_eos] for _ in episodes],
            logprobs=[[0.0] for _ in episodes],
            env_mask=[[1] for _ in episodes],
            steps=[[_step_sample(t) for t in e.turns] for e in episodes],
        )
        return batch
    batch.update(
        prompt_ids=[e.prompt_ids for e in episodes],
        completion_ids=[e.completion_ids for e in episodes],
        logprobs=[e.logprobs for e in episodes],
        env_mask=[e.env_mask for e in episodes],
        turn_ids=[e.turn_ids for e in episodes],
        turn_rewards=[[t.reward for t in e.turns] for e in episodes],
        turn_anchors=[[t.anchor for t in e.turns] for e in episodes],
    )
    if all(len(e.entropies) == len(e.completion_ids) for e in episodes):
        batch["sampler_entropies"] = [e.entropies for e in episodes]
    return batch


def _step_sample(turn: Turn) -> dict[str, Any]:
    """One turn as the trainer's step row: its context, reply, log-probs (and entropies), and
    for credit estimators its reward and the state it acted on."""
    sample: dict[str, Any] = {
        "prompt_ids": turn.prompt_ids,
        "completion_ids": turn.reply.ids,
        "logprobs": turn.reply.logprobs,
        "reward": turn.reward,
        "anchor": turn.anchor,
    }
    if turn.reply.entropies is not None:
        sample["entropies"] = turn.reply.entropies
    return sample


def episode_reward(
    completions: list,
    episode_reward: list[float],
    infra_error: list[str | None] | None = None,
    **_: Any,
) -> list[float | None]:
    """TRL reward function: the episode's summed env reward (10 / 0 / −0.1 by default).

    An episode whose env failed for an infrastructure reason gets ``None``: TRL then leaves it
    out of its group's baseline and gives it advantage 0, as the policy did not cause it.
    """
    failed = infra_error or [None] * len(episode_reward)
    return [None if f else float(r) for r, f in zip(episode_reward, failed, strict=True)]
