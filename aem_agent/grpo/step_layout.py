"""The step layout's batch rewrite: :class:`StepLayoutMixin` of the AEM trainer.

TRL's ``GRPOTrainer`` scores one row per completion. With ``rollout_layout="step"`` the
rollout plays whole episodes but trains one row per turn, so after TRL has scored the episode
rows (stand-ins) this mixin turns each episode's turns into rows (:mod:`aem_agent.grpo.turn_rows`
holds the row data helpers), recomputes on them what TRL computed per token (old-policy and
reference log-probs, the vLLM importance-sampling ratio, the entropies AEM needs), and pads
rows across processes so every rank makes the same number of forward calls and gathers.

It is a change of rows, not of the algorithm, and is kept out of :mod:`aem_agent.grpo.trainer` so
that module reads as ``GRPOTrainer`` plus the credit change and its wiring. Its forwards are
TRL's own per-token forward (:meth:`aem_agent.grpo.trl_private.GRPOInternals.score_tokens`), not
the entropy-capturing override.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import torch
from trl.models.utils import disable_gradient_checkpointing
from trl.trainer.utils import use_adapter

from aem_agent.credit.turns import RowTurns
from aem_agent.grpo import turn_rows
from aem_agent.grpo.trl_private import rows_first

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from aem_agent.grpo.config import AEMConfig
    from aem_agent.grpo.trl_private import GRPOInternals

    _Base = GRPOInternals  # what the mixin is mixed into, for the type checker
else:
    _Base = object

#: Values of the ``aem/entropy_source`` metric.
SOURCE_SAMPLER, SOURCE_OLD_POLICY, SOURCE_EXTRA_FORWARD = 1.0, 2.0, 3.0


class StepLayoutMixin(_Base):
    """One row per turn: TRL's per-episode batch rewritten, and the forwards recomputed."""

    if TYPE_CHECKING:  # provided by AEMGRPOTrainer
        args: AEMConfig
        model: PreTrainedModel | torch.nn.Module

    def _step_batch(
        self, inputs: list[dict[str, Any]], out: dict[str, Any], want_entropy: bool
    ) -> tuple[dict[str, Any], turn_rows.StepRows, torch.Tensor | None, float]:
        """TRL's per-episode batch rewritten as one row per turn (see
        :mod:`aem_agent.grpo.turn_rows`).

        Every per-token quantity TRL computed is recomputed on the turn rows: old-policy and
        reference log-probs when TRL asked for them, the vLLM importance-sampling ratio, and
        the entropies AEM needs when the sampler did not report them. Forwards are split into
        token-budget micro-batches, the same number of calls on every process.
        """
        n_episodes = len(inputs)
        turn_rows.check_keys(out, n_episodes)
        device = out["advantages"].device
        assert self.args.steps_per_generation is not None  # GRPOConfig.__post_init__ sets it
        chunks = self.args.steps_per_generation if self.model.training else 1
        # Infrastructure-failed episodes train no rows (TRL gave them advantage 0 already).
        played = [[] if x.get("infra_error") else x["steps"] for x in inputs]
        local_rows = sum(len(turns) for turns in played)
        counts = self.accelerator.gather(torch.tensor([local_rows], device=device)).tolist()
        pad_id = cast("PreTrainedTokenizerBase", self.processing_class).pad_token_id
        rows = turn_rows.collect_steps(
            played,
            pad_id,
            rows=turn_rows.padded_row_count(local_rows, counts, chunks),
        )
        lengths = (rows.prompt_mask.sum(1) + rows.completion_mask.sum(1)).tolist()
        calls = turn_rows.plan_calls(lengths, self.args.step_token_budget)
        n_calls = int(self.accelerator.gather(torch.tensor([calls], device=device)).max())

        index = rows.episode.clamp(min=0).to(device)
        real = rows.real.to(device)
        batch = {key: value for key, value in out.items() if key not in turn_rows.PER_TOKEN_KEYS}
        batch.update({k: v[index] for k, v in turn_rows.per_episode(out, n_episodes).items()})
        batch["advantages"] = batch["advantages"] * real  # padding rows carry nothing
        for key in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask"):
            batch[key] = getattr(rows, key).to(device)
        mask = rows.completion_mask.float()
        batch["num_items_in_batch"] = self.accelerator.gather(
            rows.completion_mask.sum().to(device)
        ).sum()

        entropies, source = rows.entropies, SOURCE_SAMPLER
        need_entropy = want_entropy and entropies is None
        if "old_per_token_logps" in out or need_entropy:
            old, forward_entropies = self._step_forward(self.model, rows, n_calls, need_entropy)
            if "old_per_token_logps" in out:
                batch["old_per_token_logps"] = old.to(device)
            if need_entropy:
                entropies = forward_entropies
                source = (
                    SOURCE_OLD_POLICY if "old_per_token_logps" in out else (SOURCE_EXTRA_FORWARD)
                )
        if "sampling_per_token_logps" in out:
            batch["sampling_per_token_logps"] = rows.logprobs.to(device)
        if "importance_sampling_ratio" in out:
            ratio = turn_rows.importance_ratio(
                batch["old_per_token_logps"].cpu(),
                rows.logprobs,
                mask,
                mode=self.vllm_importance_sampling_mode,
                clip_min=self.vllm_importance_sampling_clip_min,
                clip_max=self.vllm_importance_sampling_clip_max,
            )
            batch["importance_sampling_ratio"] = ratio.to(device)
        if "ref_per_token_logps" in out:
            batch["ref_per_token_logps"] = self._step_reference(rows, n_calls).to(device)
        self._log_turn_rows(rows, out)
        return rows_first(batch), rows, entropies, source

    def _log_turn_rows(self, rows: turn_rows.StepRows, stand_ins: dict[str, Any]) -> None:
        """TRL's token count and completion-length metrics, recomputed on the turn rows.

        TRL logged them from the one-token stand-in rows it scored (``num_tokens`` 2 per
        episode, every completion 1 token long); what the model trains on are the turn rows.
        The vLLM sampling metrics TRL computed on the stand-ins are not logged (the ratio is
        recomputed per token on the turn rows; its statistics are not).
        """
        mode = "train" if self.model.training else "eval"
        device = self.accelerator.device
        real = rows.real
        reply = rows.completion_mask.sum(1)[real]
        tokens = rows.prompt_mask.sum() + rows.completion_mask.sum()
        loss_mask = stand_ins["completion_mask"] * stand_ins.get("tool_mask", 1)
        counted = stand_ins["prompt_mask"].sum().cpu() + loss_mask.sum().cpu()
        both = self.accelerator.gather(torch.stack([tokens, counted]).to(device).view(1, 2))
        if mode == "train":
            self.state.num_input_tokens_seen += int(both[:, 0].sum() - both[:, 1].sum())
        self.replace_metric(mode, "num_tokens", self.state.num_input_tokens_seen)
        last = rows.completion_ids[real].gather(1, (reply - 1).clamp(min=0).unsqueeze(1))
        ended = torch.isin(last.squeeze(1), torch.tensor(self.eos_token_ids))
        local = torch.stack([reply.float(), ended.float()], dim=1).to(device)
        padded = self.accelerator.pad_across_processes(local, dim=0, pad_index=-1)
        gathered = self.accelerator.gather(padded).cpu()
        gathered = gathered[gathered[:, 0] >= 0]
        if not len(gathered):  # every episode failed for an infrastructure reason
            return
        lengths, ended_all = gathered[:, 0], gathered[:, 1] > 0
        terminated = lengths[ended_all] if bool(ended_all.any()) else torch.zeros(1)
        values = {
            "completions/mean_length": lengths.mean(),
            "completions/min_length": lengths.min(),
            "completions/max_length": lengths.max(),
            "completions/clipped_ratio": (~ended_all).float().mean(),
            "completions/mean_terminated_length": terminated.mean(),
            "completions/min_terminated_length": terminated.min(),
            "completions/max_terminated_length": terminated.max(),
        }
        for name, value in values.items():
            self.replace_metric(mode, name, float(value))
        self.drop_metrics(mode, "sampling/")

    def _step_forward(
        self, model: Any, rows: turn_rows.StepRows, n_calls: int, with_entropy: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """No-grad per-token log-probs (and entropies) of ``model`` on the turn rows."""
        device = self.accelerator.device

        def forward(ids, attention, keep):
            return self.score_tokens(
                model, ids.to(device), attention.to(device), keep, compute_entropy=with_entropy
            )

        # TRL makes the same call: a PeftModel forwards the checkpointing switches to its base
        # model, and TrainingArguments has parsed a JSON string of kwargs into a dict.
        policy = cast("PreTrainedModel", self.model)
        kwargs = cast("dict[str, Any] | None", self.args.gradient_checkpointing_kwargs)
        with torch.no_grad(), disable_gradient_checkpointing(policy, kwargs):
            return turn_rows.batched_forward(forward, rows, n_calls, with_entropy=with_entropy)

    def _step_reference(self, rows: turn_rows.StepRows, n_calls: int) -> torch.Tensor:
        """Reference log-probs on the turn rows: the reference model, or with PEFT the base
        model with the adapter disabled (TRL's own rule, ``use_adapter``)."""
        if self.ref_model is not None:
            return self._step_forward(self.ref_model, rows, n_calls, False)[0]
        model = self.accelerator.unwrap_model(self.model)
        with use_adapter(model, adapter_name="ref" if "ref" in model.peft_config else None):
            return self._step_forward(self.model, rows, n_calls, False)[0]

    def _step_turns(
        self, rows: turn_rows.StepRows, inputs: list[dict[str, Any]], out: dict[str, Any]
    ) -> RowTurns:
        """Rows are turns, in episode then turn order: each real row is one unit."""
        n_episodes = len(inputs)
        row_turn, played = [], dict[int, int]()
        for ep in rows.episode.tolist():
            row_turn.append(played.get(ep, 0))
            played[ep] = row_turn[-1] + 1
        reported = all("reward" in s for x in inputs for s in x["steps"])
        return RowTurns(
            mask=rows.completion_mask,
            group=self.group_of(rows.episode, n_episodes),
            episode=rows.episode,
            first_episode=self.accelerator.process_index * n_episodes,
            advantage=out["advantages"],
            row_turn=torch.tensor(row_turn, dtype=torch.long),
            rewards=[[s["reward"] for s in x["steps"]] for x in inputs] if reported else None,
            anchors=[[s["anchor"] for s in x["steps"]] for x in inputs] if reported else None,
        )
