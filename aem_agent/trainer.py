"""``AEMGRPOTrainer``: TRL's GRPO trainer with AEM applied after its advantage computation.

The only change w.r.t. ``GRPOTrainer`` is the advantage: after TRL has computed the group
advantage, :mod:`aem_agent.aem` rescales it per turn-response by an entropy weight α
(``docs/aem.md``). The loss, optimizer, sampling and everything else stay TRL's. With the
step layout the batch TRL scored (one row per episode) is rewritten into one row per turn by
:class:`aem_agent.step_layout.StepLayoutMixin` before AEM runs; that is a change of rows, not
of the algorithm.

TRL 1.16 builds advantages inside ``_generate_and_score_completions`` (no separate hook), so
this class calls it, then rewrites its output. Where the per-token entropies come from,
cheapest first (no extra forward pass when they are already known):

1. the sampler: :class:`aem_agent.rollout.MultiTurnRollout` returns the entropy of every token
   it generated, computed from the same logits it sampled from;
2. the old-policy forward: when one runs anyway (gradient accumulation not aligned with
   generation, or vLLM importance-sampling correction), it is asked for entropies as well;
3. otherwise one extra no-grad forward over the rows. ``aem/entropy_source`` in the logs says
   which one ran (1, 2 or 3).

A group's units may sit on several processes, so each process computes the mean entropy of
its own units and only those scalars (with their group ids) are gathered before α; each
process then applies the α of its own units.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from trl import GRPOTrainer

from aem_agent import steps
from aem_agent.aem import (
    POSITIVE_TOLERANCE,
    Units,
    alpha_stats,
    apply_alpha,
    group_alpha,
    scope_keys,
    unit_index,
    unit_mean_entropy,
    unit_surprisal,
)
from aem_agent.config import AEMConfig, ConfigError
from aem_agent.head import reply_positions_only
from aem_agent.step_layout import (
    SOURCE_EXTRA_FORWARD,
    SOURCE_OLD_POLICY,
    SOURCE_SAMPLER,
    StepLayoutMixin,
)

if TYPE_CHECKING:  # peft is optional: imported only when LoRA is asked for
    from peft import PeftConfig
    from transformers import PreTrainedModel

#: TRL loss types normalised by the batch's token count: chunked back-propagation is exact
#: (when no other per-micro-batch term is on: ``AEMGRPOTrainer._chunking_exact``).
CHUNKABLE_LOSSES = frozenset({"dapo", "cispo", "vespo"})


@dataclass(frozen=True)
class AEMRecord:
    """What the last batch's AEM computed per unit (this process's units), kept so that the
    mechanism can be measured from outside (``benchmarks/learning/drift.py``): the units, their
    H̄, α, the base advantage A, the per-token surprisal S̄ of the sampled response (when the
    sampler's log-probs are known) and the batch that was trained on."""

    units: Units
    hbar: torch.Tensor
    valid: torch.Tensor
    alpha: torch.Tensor
    advantage: torch.Tensor
    surprisal: torch.Tensor | None
    batch: dict[str, Any]


class AEMGRPOTrainer(StepLayoutMixin, GRPOTrainer):
    """GRPO with Adaptive Entropy Modulation; with ``aem_enabled=False`` (or λ = 0) it is GRPO.

    Logged each step (besides TRL's metrics): ``aem/entropy_mean``, ``aem/alpha_min``,
    ``aem/alpha_max``, ``aem/alpha_std``, ``aem/gated_share``, ``aem/units``,
    ``aem/positive_advantage_share``, ``aem/entropy_source`` and, when the rollout reports
    them, ``episode/success_rate``, ``episode/score``, ``episode/turns`` and
    ``episode/valid_rate``.

    The step layout's rows come from :class:`~aem_agent.step_layout.StepLayoutMixin`
    (``_step_batch``, ``_step_view``, ``_step_forward``, ``_step_reference``).
    """

    args: AEMConfig
    model: PreTrainedModel | torch.nn.Module  # GRPOTrainer always has one (Trainer allows None)

    def __init__(
        self,
        model: Any,
        reward_funcs: Any = None,
        args: AEMConfig | None = None,
        train_dataset: Any = None,
        processing_class: Any = None,
        rollout_func: Any = None,
        **kwargs: Any,
    ) -> None:
        """Like ``GRPOTrainer``; without ``rollout_func``, ``train_dataset`` and
        ``environment_factory`` the trainer builds them from ``args`` (as TRL trainers build
        default ``args``): the multi-turn rollout over ``args.env_ids``, its task dataset and
        the episode reward. Without ``peft_config`` and with ``args.use_peft`` it builds the
        LoRA adapter of ``args`` (:func:`lora_config`), so ``aem train`` and the tests make
        the trainer with one and the same call.

        With ``environment_factory`` (e.g. :func:`aem_agent.trl_env.environment_factory`) TRL's
        own tool loop plays the episodes, one row each, so ``rollout_layout`` must be
        ``"trajectory"``; the rollout settings of ``args`` (``env_ids``, ``max_turns``, …) are
        not used there."""
        if not isinstance(args, AEMConfig):
            raise ConfigError("AEMGRPOTrainer needs args=AEMConfig(...)")
        tool_loop = kwargs.get("environment_factory") is not None
        if tool_loop and args.rollout_layout != "trajectory":
            raise ConfigError(
                "environment_factory plays TRL's tool loop, one row per episode; set "
                "rollout_layout='trajectory' in the AEMConfig"
            )
        if rollout_func is None and train_dataset is None and not tool_loop:
            from aem_agent.batches import episode_reward
            from aem_agent.episodes import task_dataset
            from aem_agent.rollout import MultiTurnRollout

            processing_class = processing_class or _tokenizer(model)
            rollout_func = MultiTurnRollout.from_config(args, processing_class)
            train_dataset = task_dataset(
                args.env_ids, args.num_tasks, seed=args.seed, split=args.env_split
            )
            reward_funcs = reward_funcs or [episode_reward]
        if args.use_peft and kwargs.get("peft_config") is None:
            kwargs["peft_config"] = lora_config(args)
        super().__init__(
            model=model,
            reward_funcs=reward_funcs,
            args=args,
            train_dataset=train_dataset,
            processing_class=processing_class,
            rollout_func=rollout_func,
            **kwargs,
        )
        self._aem_capture = False
        self._aem_captured: torch.Tensor | None = None
        self.aem_record: AEMRecord | None = None
        layout = getattr(self.rollout_func, "layout", self.args.rollout_layout)
        if layout != self.args.rollout_layout:
            raise ConfigError(
                f"the rollout plays the {layout!r} layout but rollout_layout="
                f"{self.args.rollout_layout!r}; build both from the same AEMConfig"
            )

    # ------------------------------------------------------------------ entropy capture
    def _get_per_token_logps_and_entropies(self, model, *args: Any, **kwargs: Any):
        """Ask TRL's old-policy forward for entropies too, when AEM needs them (source 2)."""
        capture = self._aem_capture and model is self.model and not kwargs.get("compute_entropy")
        if capture:
            kwargs["compute_entropy"] = True
            self._aem_capture = False
        with reply_positions_only(self.accelerator.device):
            logps, entropies, aux = super()._get_per_token_logps_and_entropies(
                model, *args, **kwargs
            )
        if capture:
            self._aem_captured = entropies
            entropies = None
        return logps, entropies, aux

    def _old_policy_forward_runs(self) -> bool:
        """Whether TRL computes old-policy log-probs this batch (the condition it uses)."""
        assert self.args.steps_per_generation is not None  # GRPOConfig.__post_init__ sets it
        generate_every = self.args.steps_per_generation * self.num_iterations
        return self.args.gradient_accumulation_steps % generate_every != 0 or bool(
            self.use_vllm and self.vllm_importance_sampling_correction
        )

    # ------------------------------------------------------------------ the override
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        step_layout = self.args.rollout_layout == "step"
        provides = getattr(self.rollout_func, "provides_entropies", None)
        sampler_known = bool(provides is not None and provides(self))
        # The step layout recomputes every forward on its own rows; TRL's run on stand-ins.
        self._aem_capture = (
            not step_layout and not sampler_known and self._old_policy_forward_runs()
        )
        self._aem_captured = None
        try:
            out = super()._generate_and_score_completions(inputs)
        finally:
            self._aem_capture = False
        # TRL merges the rollout's extra keys into ``inputs`` inside the call above.
        mode = "train" if self.model.training else "eval"
        self._log_episodes(inputs, mode)
        want_entropy = self.args.aem_active
        if step_layout and inputs and "steps" in inputs[0]:
            out, rows, entropies, source = self._step_batch(inputs, out, want_entropy)
            view = self._step_view(rows, len(inputs))
            view["logprobs"] = rows.logprobs
        else:
            entropies, source = self._trajectory_entropies(inputs, out, want_entropy)
            view = self._trajectory_view(inputs, out)
        if entropies is not None:
            self._modulate(out, entropies, view, mode)
            self._metrics[mode]["aem/entropy_source"].append(source)
        else:  # no unit entropies (vLLM, AEM off): the balance over rows
            gathered = self.accelerator.gather(out["advantages"])
            share = (gathered > POSITIVE_TOLERANCE).float().mean().item()
            self._metrics[mode]["aem/positive_advantage_share"].append(share)
        return out

    # ------------------------------------------------------------------ training forward
    def training_step(self, model: Any, inputs: dict[str, Any], num_items_in_batch: Any = None):
        """TRL's training step, back-propagated in chunks of at most ``loss_token_budget``
        tokens (the same number of chunks on every process).

        Why: a step-layout micro-batch holds every turn of its episodes (hundreds of rows of
        hundreds of tokens), and one forward over it with gradients held the activations of
        all of them at once. Only where the chunks' losses add up to the batch's loss exactly
        (:meth:`_chunking_exact`); otherwise TRL's single forward.
        """
        if not self._chunking_exact():
            return super().training_step(model, inputs, num_items_in_batch)
        model.train()  # as Trainer.training_step does first: generation reads the mode
        batch = self._prepare_inputs(inputs)  # TRL's: generates, or the buffered slice
        lengths = (batch["prompt_mask"].sum(1) + batch["completion_mask"].sum(1)).tolist()
        wanted = steps.plan_calls(lengths, self.args.loss_token_budget)
        device = self.accelerator.device
        n_chunks = int(self.accelerator.gather(torch.tensor([wanted], device=device)).max())
        first_step, times = self._step, self._metrics["train"]["step_time"]
        logged = len(times)
        total = None
        with self._inputs_prepared():
            for chunk in steps.chunk_batch(batch, n_chunks) if n_chunks > 1 else [batch]:
                self._step = first_step  # TRL counts each call as a step: this is one step
                loss = super().training_step(model, chunk, num_items_in_batch)
                total = loss if total is None else total + loss
        if len(times) > logged + 1:  # one step time per step, not one per chunk
            times[logged:] = [sum(times[logged:])]
        return total

    def _chunking_exact(self) -> bool:
        """Whether the micro-batch's loss is a sum of per-token terms over the whole batch.

        The token-normalised policy losses (``dapo``, ``cispo``, ``vespo``) divide by the
        batch's token count, so chunks add up exactly. TRL's other per-micro-batch terms do
        not: the entropy bonus (``entropy_coef``, or the adaptive one) is a mean over the
        micro-batch's tokens, ``top_entropy_quantile`` keeps tokens above a quantile of the
        micro-batch's entropies, and the MoE auxiliary loss is a load-balancing statistic of
        the micro-batch's router logits; each of these chunked would be a different loss.
        """
        return (
            self.loss_type in CHUNKABLE_LOSSES
            and not self._entropy_bonus_enabled
            and self.top_entropy_quantile >= 1.0
            and not self.aux_loss_enabled
        )

    @contextmanager
    def _inputs_prepared(self) -> Iterator[None]:
        """Within: ``Trainer.training_step`` takes its inputs as already prepared."""
        saved = self.__dict__.get("_prepare_inputs")
        # An instance attribute over the method, on purpose (removed again below).
        self._prepare_inputs = _unchanged  # type: ignore[method-assign]
        try:
            yield
        finally:
            if saved is None:
                del self._prepare_inputs
            else:
                self._prepare_inputs = saved  # type: ignore[method-assign]  # as above

    # ------------------------------------------------------------------ AEM
    def _modulate(
        self, out: dict[str, Any], entropies: torch.Tensor, view: dict[str, Any], mode: str
    ) -> None:
        """α per unit from gathered group statistics; rescale ``out["advantages"]`` in place.

        What was computed per unit is kept in :attr:`aem_record` (for measuring the mechanism:
        ``benchmarks/learning``).
        """
        units = unit_index(
            view["mask"],
            view["groups"],
            unit=self.args.aem_unit,
            turn_ids=view.get("turn_ids"),
            episode_ids=view.get("episode_ids"),
        )
        hbar, valid = unit_mean_entropy(entropies.cpu(), units)
        advantage = out["advantages"].detach().cpu().double()[units.owner]
        device = self.accelerator.device
        keys = scope_keys(units, self.args.aem_scope).double()
        local = torch.stack([hbar, keys, valid.double(), advantage], dim=1).to(device)
        padded = self.accelerator.pad_across_processes(local, dim=0, pad_index=0)
        gathered = self.accelerator.gather(padded).cpu()
        all_hbar, all_keys, all_valid = gathered[:, 0], gathered[:, 1].long(), gathered[:, 2] > 0
        shuffle = None
        if self.args.aem_shuffle:  # the same permutation on every process: seeded by the step
            step_seed = self.args.seed * 1_000_003 + self.state.global_step
            shuffle = torch.Generator().manual_seed(step_seed)
        alpha, gated = group_alpha(
            all_hbar,
            all_keys,
            all_valid,
            lam=self.args.aem_lambda if self.args.aem_active else 0.0,
            eps=self.args.aem_eps,
            min_range=self.args.aem_min_range,
            shuffle=shuffle,
        )
        for name, value in alpha_stats(alpha, all_hbar, all_valid, gated).items():
            self._metrics[mode][f"aem/{name}"].append(value)
        positive = (gathered[:, 3] > POSITIVE_TOLERANCE)[all_valid]
        share = float(positive.double().mean()) if len(positive) else 0.0
        self._metrics[mode]["aem/positive_advantage_share"].append(share)
        start = self.accelerator.process_index * padded.shape[0]
        mine = alpha[start : start + units.count]
        logprobs = view.get("logprobs")
        self.aem_record = AEMRecord(
            units,
            hbar,
            valid,
            mine,
            advantage,
            unit_surprisal(logprobs, units) if logprobs is not None else None,
            out,
        )
        if not self.args.aem_active:
            return
        advantages = out["advantages"]
        out["advantages"] = apply_alpha(advantages.cpu(), mine, units).to(advantages.device)

    def _group_of(self, local_episode: torch.Tensor, n_episodes: int) -> torch.Tensor:
        """Global GRPO group of local episodes (TRL groups consecutive gathered rows)."""
        mode_train = self.model.training
        size = self.num_generations if mode_train else self.num_generations_eval
        first = self.accelerator.process_index * n_episodes
        return (first + local_episode.clamp(min=0)) // size

    def _trajectory_view(self, inputs: list[dict[str, Any]], out: dict[str, Any]) -> dict:
        """Rows are episodes; with ``turn_ids`` every turn of a row is its own unit.

        Without ``turn_ids`` but with a ``tool_mask`` (TRL's tool loop, or a rollout that
        returns only ``env_mask``), each contiguous run of the model's own tokens is one turn:
        the tool or environment tokens between two replies are what separate turns.
        """
        mask = out["completion_mask"]
        if "tool_mask" in out:
            mask = mask * out["tool_mask"]
        mask = mask.cpu()
        rows = torch.arange(len(mask))
        view = {
            "mask": mask,
            "groups": self._group_of(rows, len(mask)),
            "episode_ids": self.accelerator.process_index * len(mask) + rows,
        }
        if inputs and "turn_ids" in inputs[0]:
            view["turn_ids"] = _pad_rows([x["turn_ids"] for x in inputs], mask, fill=-1).long()
        elif "tool_mask" in out:
            view["turn_ids"] = run_turn_ids(mask)
        return view

    # ------------------------------------------------------------------ entropies
    def _trajectory_entropies(
        self, inputs: list[dict[str, Any]], out: dict[str, Any], wanted: bool
    ) -> tuple[torch.Tensor | None, float]:
        """Entropies of the episode rows: sampler, captured forward, or (if AEM is on) extra."""
        if inputs and "sampler_entropies" in inputs[0]:
            rows = [x["sampler_entropies"] for x in inputs]
            return _pad_rows(rows, out["completion_ids"]), SOURCE_SAMPLER
        if self._aem_captured is not None:
            captured, self._aem_captured = self._aem_captured, None
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
            _, entropies, _ = super()._get_per_token_logps_and_entropies(
                self.model,
                input_ids,
                attention,
                out["completion_ids"].size(1),
                batch_size=batch_size,
                compute_entropy=True,
            )
        return entropies, SOURCE_EXTRA_FORWARD

    # ------------------------------------------------------------------ logging
    def _log_episodes(self, inputs: list[dict[str, Any]], mode: str) -> None:
        """Success rate, score, turns and valid-action share of the batch's episodes."""
        keys = (
            ("won", "success_rate"),
            ("score", "score"),
            ("num_turns", "turns"),
            ("valid_rate", "valid_rate"),
        )
        for key, name in keys:
            if inputs and key in inputs[0]:
                values = torch.tensor(
                    [float(x[key]) for x in inputs], device=self.accelerator.device
                )
                mean = self.accelerator.gather(values).mean().item()
                self._metrics[mode][f"episode/{name}"].append(mean)


def lora_config(config: AEMConfig) -> PeftConfig:
    """The ``peft.LoraConfig`` of ``config``'s LoRA settings (what TRL's ``peft_config`` takes)."""
    from aem_envs.core.errors import require

    peft = require("agent", "peft", feature="LoRA training (use_peft)")
    return peft.LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(config.lora_target_modules),
        task_type="CAUSAL_LM",
    )


def run_turn_ids(mask: torch.Tensor) -> torch.Tensor:
    """``(B, T)`` turn index of every token: the number of the contiguous run of 1s of
    ``mask`` it is in, counted from 0 per row; −1 where ``mask`` is 0."""
    mask = mask.to(torch.bool)
    before = torch.zeros_like(mask)
    before[:, 1:] = mask[:, :-1]
    starts = (mask & ~before).to(torch.long)
    return torch.where(mask, starts.cumsum(dim=1) - 1, -1)


def _unchanged(inputs: dict[str, Any]) -> dict[str, Any]:
    return inputs


def _tokenizer(model: Any) -> Any:
    """The tokenizer of a checkpoint path or loaded model, with a pad token."""
    from transformers import AutoTokenizer

    source = model if isinstance(model, str) else model.config._name_or_path
    tokenizer = AutoTokenizer.from_pretrained(source)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _pad_rows(rows: list[list[float]], like: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
    """Right-pad ragged per-token lists to ``like``'s (B, T) shape (on the CPU)."""
    out = torch.full(like.shape, fill, dtype=torch.float32)
    for i, row in enumerate(rows):
        width = min(len(row), like.shape[1])
        out[i, :width] = torch.tensor(row[:width], dtype=torch.float32)
    return out
