"""``AEMGRPOTrainer``: TRL's GRPO trainer with AEM applied after its advantage computation.

TRL 1.16 builds advantages inside ``_generate_and_score_completions`` (no separate hook), so
this class calls it, then rewrites ``out["advantages"]`` with :func:`aem_agent.aem.aem_modulate`.
The loss, optimizer and everything else stay TRL's.

Where the per-token entropies come from, cheapest first (the design asks for no extra forward
pass when they are already known):

1. the sampler: :class:`aem_agent.rollout.MultiTurnRollout` returns the entropy of every token
   it generated (``sampler_entropies``), computed from the same logits it sampled from;
2. TRL's old-policy forward: when TRL runs one anyway (gradient accumulation not aligned with
   generation, or vLLM importance-sampling correction), it is asked for entropies as well;
3. otherwise one extra no-grad forward over the batch (plain single-turn prompts, vLLM without
   correction). ``aem/entropy_source`` in the logs says which one ran (1, 2 or 3).

Group statistics need whole groups, and a group's G rows may sit on different processes, so
entropies, masks and advantages are gathered from every process before α is computed; each
process then keeps its own rows.
"""

from __future__ import annotations

from typing import Any

import torch
from trl import GRPOTrainer

from aem_agent.aem import aem_modulate
from aem_agent.config import AEMConfig, ConfigError

#: Values of the ``aem/entropy_source`` metric.
SOURCE_SAMPLER, SOURCE_OLD_POLICY, SOURCE_EXTRA_FORWARD = 1.0, 2.0, 3.0


class AEMGRPOTrainer(GRPOTrainer):
    """GRPO with Adaptive Entropy Modulation; with ``aem_enabled=False`` (or λ = 0) it is GRPO.

    Logged each step (besides TRL's metrics): ``aem/entropy_mean``, ``aem/alpha_min``,
    ``aem/alpha_max``, ``aem/alpha_std``, ``aem/positive_advantage_share`` and, when the
    rollout reports them, ``episode/success_rate``, ``episode/score`` and ``episode/turns``.
    """

    args: AEMConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._aem_capture = False
        self._aem_captured: torch.Tensor | None = None
        layout = getattr(self.rollout_func, "layout", self.args.rollout_layout)
        if layout != self.args.rollout_layout:
            raise ConfigError(
                f"the rollout plays the {layout!r} layout but rollout_layout="
                f"{self.args.rollout_layout!r}; build both from the same AEMConfig"
            )
        if layout == "step" and self.beta != 0.0 and self.ref_model is None:
            raise ConfigError(
                "rollout_layout='step' with beta > 0 needs a separate reference model; "
                "set beta=0 or train without a PEFT adapter"
            )

    # ------------------------------------------------------------------ entropy capture
    def _get_per_token_logps_and_entropies(self, model, *args: Any, **kwargs: Any):
        """Ask TRL's old-policy forward for entropies too, when AEM needs them (source 2)."""
        capture = self._aem_capture and model is self.model and not kwargs.get("compute_entropy")
        if capture:
            kwargs["compute_entropy"] = True
            self._aem_capture = False
        logps, entropies, aux = super()._get_per_token_logps_and_entropies(model, *args, **kwargs)
        if capture:
            self._aem_captured = entropies
            entropies = None
        return logps, entropies, aux

    def _old_policy_forward_runs(self) -> bool:
        """Whether TRL computes old-policy log-probs this batch (the condition it uses)."""
        generate_every = self.args.steps_per_generation * self.num_iterations
        return self.args.gradient_accumulation_steps % generate_every != 0 or bool(
            self.use_vllm and self.vllm_importance_sampling_correction
        )

    # ------------------------------------------------------------------ the override
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        provides = getattr(self.rollout_func, "provides_entropies", None)
        sampler_known = bool(provides is not None and provides(self))
        self._aem_capture = not sampler_known and self._old_policy_forward_runs()
        self._aem_captured = None
        try:
            out = super()._generate_and_score_completions(inputs)
        finally:
            self._aem_capture = False
        # TRL merges the rollout's extra keys into ``inputs`` inside the call above.
        sampler = bool(inputs) and "sampler_entropies" in inputs[0]
        mode = "train" if self.model.training else "eval"
        self._log_episodes(inputs, mode)

        mask = out["completion_mask"]
        if "tool_mask" in out:
            mask = mask * out["tool_mask"]
        entropies, source = self._entropies(inputs, out, sampler)
        if entropies is None and not self.args.aem_active:
            share = self.accelerator.gather(out["advantages"]) > 0
            self._metrics[mode]["aem/positive_advantage_share"].append(share.float().mean().item())
            return self._expand_steps(inputs, out)
        if entropies is None:  # AEM on and nothing to reuse: one extra forward (source 3)
            entropies, source = self._entropy_forward(out), SOURCE_EXTRA_FORWARD

        turn_level = self.args.aem_active and self.args.aem_level == "turn"
        local_rows, local_width = mask.shape
        per_token = [entropies.float(), mask.long()]
        if turn_level:
            per_token.append(self._turn_ids(inputs, mask))
        gathered = [
            self.accelerator.gather(self.accelerator.pad_across_processes(t, dim=1)).cpu()
            for t in per_token
        ]
        advantages = self.accelerator.gather(out["advantages"]).cpu()
        group_size = self.num_generations if mode == "train" else self.num_generations_eval
        modulated, stats = aem_modulate(
            advantages,
            gathered[0],
            gathered[1],
            torch.arange(len(advantages)) // group_size,
            lam=self.args.aem_lambda if self.args.aem_active else 0.0,
            eps=self.args.aem_eps,
            level="turn" if turn_level else "response",
            turn_ids=gathered[2] if turn_level else None,
        )
        if self.args.aem_active:
            start = self.accelerator.process_index * local_rows
            local = modulated[start : start + local_rows].to(out["advantages"].device)
            out["advantages"] = local[:, :local_width] if local.dim() == 2 else local
        for name, value in stats.items():
            self._metrics[mode][f"aem/{name}"].append(value)
        self._metrics[mode]["aem/entropy_source"].append(source)
        return self._expand_steps(inputs, out)

    # ------------------------------------------------------------------ step layout
    def _expand_steps(self, inputs: list[dict[str, Any]], out: dict[str, Any]) -> dict[str, Any]:
        """Step layout: replace each episode row by one row per step, sharing its advantage.

        TRL has scored whole episodes (rewards, group advantages, AEM per episode); here each
        step becomes a (prompt, reply) sample with the episode's advantage, and the
        per-token tensors TRL computed on episode rows are recomputed on the step rows.
        Padding rows (mask 0, advantage 0) keep the row count divisible by
        ``steps_per_generation`` so TRL's split into micro-batches drops nothing.
        """
        if not inputs or "steps" not in inputs[0]:
            return out
        device = out["advantages"].device
        pad_id = self._tokenizer.pad_token_id
        rows = [(b, step) for b, x in enumerate(inputs) for step in x["steps"]]
        chunks = self.args.steps_per_generation if self.model.training else 1
        rows += [(-1, {"prompt_ids": [pad_id], "completion_ids": [pad_id], "logprobs": [0.0]})] * (
            -len(rows) % chunks
        )
        prompt_ids, prompt_mask = _stack([r["prompt_ids"] for _, r in rows], pad_id, left=True)
        completion_ids, completion_mask = _stack([r["completion_ids"] for _, r in rows], pad_id)
        real = torch.tensor([b >= 0 for b, _ in rows], dtype=torch.long).unsqueeze(1)
        completion_mask = completion_mask * real
        index = torch.tensor([max(b, 0) for b, _ in rows], device=device)
        advantages = out["advantages"][index] * real.squeeze(1).to(device)
        expanded: dict[str, Any] = {
            "prompt_ids": prompt_ids.to(device),
            "prompt_mask": prompt_mask.to(device),
            "completion_ids": completion_ids.to(device),
            "completion_mask": completion_mask.to(device),
            "advantages": advantages,
            "num_items_in_batch": self.accelerator.gather(completion_mask.sum().to(device)).sum(),
        }
        if "sampling_per_token_logps" in out:
            logps, _ = _stack([r["logprobs"] for _, r in rows], 0.0)
            expanded["sampling_per_token_logps"] = logps.to(device)
        for key, model in (
            ("old_per_token_logps", self.model),
            ("ref_per_token_logps", self.ref_model),
        ):
            if key in out:
                expanded[key] = self._step_logps(model, expanded)
        return expanded

    def _step_logps(self, model: Any, batch: dict[str, Any]) -> torch.Tensor:
        """Per-token log-probs of ``model`` on the step rows (old policy or reference)."""
        with torch.no_grad():
            logps, _, _ = super()._get_per_token_logps_and_entropies(
                model,
                torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1),
                torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1),
                batch["completion_ids"].size(1),
                batch_size=self.args.per_device_train_batch_size,
            )
        return logps

    # ------------------------------------------------------------------ helpers
    def _entropies(
        self, inputs: list[dict[str, Any]], out: dict[str, Any], sampler: bool
    ) -> tuple[torch.Tensor | None, float]:
        """Entropies already at hand (sources 1 and 2), shaped like the completion ids."""
        if sampler:
            return _pad_rows([x["sampler_entropies"] for x in inputs], out["completion_ids"]), (
                SOURCE_SAMPLER
            )
        if self._aem_captured is not None:
            captured, self._aem_captured = self._aem_captured, None
            return captured, SOURCE_OLD_POLICY
        return None, 0.0

    def _entropy_forward(self, out: dict[str, Any]) -> torch.Tensor:
        """One no-grad forward of the current policy over the batch, for entropies only."""
        input_ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
        attention = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
        mode_batch = (
            self.args.per_device_train_batch_size
            if self.model.training
            else self.args.per_device_eval_batch_size
        )
        with torch.no_grad():
            _, entropies, _ = super()._get_per_token_logps_and_entropies(
                self.model,
                input_ids,
                attention,
                out["completion_ids"].size(1),
                batch_size=mode_batch,
                compute_entropy=True,
            )
        return entropies

    @staticmethod
    def _turn_ids(inputs: list[dict[str, Any]], mask: torch.Tensor) -> torch.Tensor:
        """Turn index of every completion token (all 0 when the rollout gave none)."""
        if inputs and "turn_ids" in inputs[0]:
            return _pad_rows([x["turn_ids"] for x in inputs], mask, fill=-1).long()
        return torch.zeros_like(mask, dtype=torch.long)

    def _log_episodes(self, inputs: list[dict[str, Any]], mode: str) -> None:
        """Success rate, score and turns of the batch's episodes, averaged over processes."""
        for key, name in (("won", "success_rate"), ("score", "score"), ("num_turns", "turns")):
            if inputs and key in inputs[0]:
                values = torch.tensor(
                    [float(x[key]) for x in inputs], device=self.accelerator.device
                )
                mean = self.accelerator.gather(values).mean().item()
                self._metrics[mode][f"episode/{name}"].append(mean)


def _pad_rows(rows: list[list[float]], like: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
    """Right-pad ragged per-token lists to ``like``'s (B, T) shape on its device."""
    out = torch.full(like.shape, fill, dtype=torch.float32, device=like.device)
    for i, row in enumerate(rows):
        width = min(len(row), like.shape[1])
        out[i, :width] = torch.tensor(row[:width], dtype=torch.float32)
    return out


def _stack(
    rows: list[list], fill: float, *, left: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad ragged rows into a (B, T) tensor and its 0/1 mask (left padding for prompts)."""
    width = max(len(r) for r in rows)
    values, mask = [], []
    for row in rows:
        gap = [fill] * (width - len(row))
        values.append(gap + list(row) if left else list(row) + gap)
        ones, zeros = [1] * len(row), [0] * (width - len(row))
        mask.append(zeros + ones if left else ones + zeros)
    dtype = torch.float32 if isinstance(fill, float) else torch.long
    return torch.tensor(values, dtype=dtype), torch.tensor(mask, dtype=torch.long)
