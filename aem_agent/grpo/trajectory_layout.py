"""The trajectory layout's turns and entropies: :class:`TrajectoryLayoutMixin` of the AEM trainer.

In the trajectory layout (and on TRL's tool loop) a row is a whole episode, so the credit
chain's units are the turns inside each row: found from aem's ``turn_ids``, from the runs of
the model's own tokens between tool or environment tokens, or the row itself. The step
layout's counterpart is :class:`aem_agent.grpo.step_layout.StepLayoutMixin`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from aem_agent.credit.turns import RowTurns
from aem_agent.grpo.step_layout import SOURCE_EXTRA_FORWARD, SOURCE_OLD_POLICY, SOURCE_SAMPLER

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from aem_agent.grpo.config import AEMConfig
    from aem_agent.grpo.trl_private import GRPOInternals

    _Base = GRPOInternals  # what the mixin is mixed into, for the type checker
else:
    _Base = object


class TrajectoryLayoutMixin(_Base):
    """Turn units and per-token entropies of episode rows."""

    if TYPE_CHECKING:  # provided by AEMGRPOTrainer
        args: AEMConfig
        model: PreTrainedModel | torch.nn.Module
        _old_policy_entropies: torch.Tensor | None

    def _trajectory_turns(
        self, inputs: list[dict[str, Any]], out: dict[str, Any], *, states: bool
    ) -> RowTurns:
        """Rows are episodes; each turn of a row (its ``turn_ids``) is one unit.

        Without ``turn_ids`` but with a ``tool_mask`` (TRL's tool loop, or a rollout that
        returns only ``env_mask``), each contiguous run of the model's own tokens is one turn:
        the tool or environment tokens between two replies are what separate turns. Without
        either, a row is one turn. Per-turn rewards and states come from aem's rollout
        (``turn_rewards``, ``turn_anchors``) or, on TRL's tool loop, from each rollout's
        :class:`~aem_agent.grpo.tool_env.ToolEnv` when ``states`` asks for them.
        """
        mask = out["completion_mask"]
        if "tool_mask" in out:
            mask = mask * out["tool_mask"]
        mask = mask.cpu()
        n = len(mask)
        token_turn = None
        if inputs and "turn_ids" in inputs[0]:
            token_turn = _pad_rows([x["turn_ids"] for x in inputs], mask, fill=-1).long()
        elif "tool_mask" in out:
            token_turn = run_turn_ids(mask)
        rewards = anchors = None
        if inputs and "turn_rewards" in inputs[0]:
            rewards = [x["turn_rewards"] for x in inputs]
            anchors = [x["turn_anchors"] for x in inputs]
        elif states and "tool_mask" in out:
            anchors, rewards = self._tool_loop_turns(out, mask)
        return RowTurns(
            mask=mask,
            group=self.group_of(torch.arange(n), n),
            episode=torch.arange(n),
            first_episode=self.accelerator.process_index * n,
            advantage=out["advantages"],
            token_turn=token_turn,
            rewards=rewards,
            anchors=anchors,
        )

    def _tool_loop_turns(
        self, out: dict[str, Any], mask: torch.Tensor
    ) -> tuple[list[list[str]] | None, list[list[float]] | None]:
        """Per rollout, the state and reward of each reply on TRL's tool loop, read from the
        :class:`~aem_agent.grpo.tool_env.ToolEnv` it played on (``None`` when another kind of
        environment played a rollout: those report no turns)."""
        from aem_agent.grpo.tool_env import ToolEnv, rollout_turns

        envs = self.tool_environments()
        if not envs or not all(isinstance(env, ToolEnv) for env in envs):
            return None, None
        tokenizer = getattr(self.processing_class, "tokenizer", self.processing_class)
        prompts, prompt_mask = out["prompt_ids"].cpu(), out["prompt_mask"].cpu().bool()
        completions = out["completion_ids"].cpu()
        anchors, rewards = [], []
        for i, env in enumerate(envs):
            states, earned = rollout_turns(
                env,
                tokenizer,
                prompts[i][prompt_mask[i]].tolist(),
                completions[i].tolist(),
                mask[i].bool().tolist(),
            )
            anchors.append(states)
            rewards.append(earned)
        return anchors, rewards

    def _trajectory_entropies(
        self, inputs: list[dict[str, Any]], out: dict[str, Any], wanted: bool
    ) -> tuple[torch.Tensor | None, float]:
        """Entropies of the episode rows: sampler, captured forward, or (if AEM is on) extra."""
        if inputs and "sampler_entropies" in inputs[0]:
            rows = [x["sampler_entropies"] for x in inputs]
            return _pad_rows(rows, out["completion_ids"]), SOURCE_SAMPLER
        if self._old_policy_entropies is not None:
            captured, self._old_policy_entropies = self._old_policy_entropies, None
            return captured, SOURCE_OLD_POLICY
        if not wanted:
            return None, 0.0
        input_ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
        attention = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
        batch_size = (
            self.args.per_device_train_batch_size
            if self.model.training
            else self.args.per_device_eval_batch_size
        )
        with torch.no_grad():
            _, entropies = self.score_tokens(
                self.model,
                input_ids,
                attention,
                out["completion_ids"].size(1),
                batch_size=batch_size,
                compute_entropy=True,
            )
        return entropies, SOURCE_EXTRA_FORWARD


def run_turn_ids(mask: torch.Tensor) -> torch.Tensor:
    """``(B, T)`` turn index of every token: the number of the contiguous run of 1s of
    ``mask`` it is in, counted from 0 per row; −1 where ``mask`` is 0."""
    mask = mask.to(torch.bool)
    before = torch.zeros_like(mask)
    before[:, 1:] = mask[:, :-1]
    starts = (mask & ~before).to(torch.long)
    return torch.where(mask, starts.cumsum(dim=1) - 1, -1)


def _pad_rows(rows: list[list[float]], like: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
    """Right-pad ragged per-token lists to ``like``'s (B, T) shape (on the CPU)."""
    out = torch.full(like.shape, fill, dtype=torch.float32)
    for i, row in enumerate(rows):
        width = min(len(row), like.shape[1])
        out[i, :width] = torch.tensor(row[:width], dtype=torch.float32)
    return out
