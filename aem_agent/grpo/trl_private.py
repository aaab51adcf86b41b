"""Everything aem relies on inside TRL that TRL does not publish, in one module.

TRL 1.16 has no hook for the advantage (its maintainers point users at overriding
``_generate_and_score_completions``, TRL issue #4525; a public ``_transform_advantages`` is
proposed in TRL PR #7298: :data:`ADVANTAGE_HOOK`, used when TRL has it), no public per-token
forward, and no switch for the fused head's position choice; the Trainer beneath it reports
tied weights as missing on resume (:class:`TiedHeadResume`). What aem needs of those lives
here and nowhere else in the package, each piece with the TRL code it mirrors named beside
it; ``tests/agent/grpo/test_trl_contract.py`` fails loudly, naming the piece, when a TRL release
changes one, and ``tests/agent/grpo/test_trl_private.py`` fails when another module starts to use
a private TRL name.

:class:`GRPOInternals` is ``GRPOTrainer`` with its private methods put behind aem-named ones:
the trainer (:class:`aem_agent.grpo.trainer.AEMGRPOTrainer`) and the step layout
(:class:`aem_agent.grpo.step_layout.StepLayoutMixin`) call only those.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any

import torch
from transformers import Trainer
from trl import GRPOConfig, GRPOTrainer
from trl.trainer import utils as trl_utils

#: Graph-compiling device types (Neuron runs as ``xla``), which TRL scores in full on purpose so
#: that each compiled program keeps one shape; left as TRL has them.
FIXED_SHAPE_DEVICES = frozenset({"xla", "hpu", "lazy"})


class _ReplyPositionsSwitch:
    """TRL's fused-head predicate answered "labelled positions only" inside a scope only.

    TRL reads one module-level predicate (``trl.trainer.utils._use_triton``, looked up at
    call time in ``add_fused_lm_head``) to choose between projecting only labelled positions
    (Triton devices) and every position (elsewhere). While at least one scope is open, the
    module attribute is a predicate that answers yes for the contexts (threads, tasks) inside
    a scope and asks TRL's own predicate for every other; when the last scope closes, TRL's
    predicate is back. So ``_use_triton`` is TRL's outside aem's forwards, and a forward of
    another trainer running at the same time is not affected.
    """

    def __init__(self) -> None:
        self._inside: ContextVar[bool] = ContextVar("aem_reply_positions_only", default=False)
        self._lock = threading.Lock()
        self._open = 0
        self._trl: Callable[[torch.device], bool] | None = None

    def _predicate(self, device: torch.device) -> bool:
        if self._inside.get():
            return True
        assert self._trl is not None  # installed only while a scope is open
        return self._trl(device)

    @contextmanager
    def scope(self) -> Iterator[None]:
        token = self._inside.set(True)
        with self._lock:
            if self._open == 0:
                self._trl = trl_utils._use_triton
                trl_utils._use_triton = self._predicate
            self._open += 1
        try:
            yield
        finally:
            self._inside.reset(token)
            with self._lock:
                self._open -= 1
                if self._open == 0:
                    assert self._trl is not None  # saved when the first scope opened
                    trl_utils._use_triton = self._trl  # type: ignore[assignment]  # TRL's, typed loosely here
                    self._trl = None


_SWITCH = _ReplyPositionsSwitch()


def reply_positions_only(device: torch.device) -> Any:
    """Within: TRL's fused head scores only labelled positions of this context's forwards.

    Why (``aem_agent/grpo/lm_head.py`` has the measurement's story): on CPU TRL projects every
    prompt position onto the vocabulary and throws the result away. Graph-compiling devices are left
    as TRL has them. The kernel module keeps its own reference, so the projection itself still
    runs in torch on CPU.
    """
    return nullcontext() if device.type in FIXED_SHAPE_DEVICES else _SWITCH.scope()


#: The advantage hook TRL PR #7298 proposes, ``_transform_advantages(advantages) -> advantages``:
#: called on every process with the gathered per-completion advantages, after the group
#: normalisation and before TRL logs them and each process keeps its slice.
ADVANTAGE_HOOK = "_transform_advantages"


def advantage_path(trainer: type = GRPOTrainer) -> str:
    """Where aem takes TRL's group advantage from: ``"hook"`` when ``trainer`` (a TRL trainer
    class, not aem's) calls :data:`ADVANTAGE_HOOK`, ``"override"`` when only the batch
    ``_generate_and_score_completions`` returns has it (TRL 1.16)."""
    return "hook" if hasattr(trainer, ADVANTAGE_HOOK) else "override"


def rows_first(batch: dict[str, Any]) -> dict[str, Any]:
    """``batch`` with ``completion_ids`` as its first key.

    TRL's ``shuffle_sequence_dict`` and ``split_tensor_dict`` (``trl/trainer/utils.py``) take
    the batch size from the first non-``None`` value; a rewritten batch must not start with a
    scalar such as ``num_items_in_batch``.
    """
    return {"completion_ids": batch["completion_ids"], **batch}


def filled_by_tie(model: Any, key: str) -> bool:
    """Whether ``key`` is a tied weight that ``model`` holds as the very tensor of its source.

    Loading the source then loads ``key`` too, so a checkpoint without it lost nothing.
    """
    source = (getattr(model, "all_tied_weights_keys", None) or {}).get(key)
    return source is not None and model.get_parameter(key) is model.get_parameter(source)


class TiedHeadResume(Trainer):
    """A Trainer whose resume accepts a checkpoint without the tied output head, and refuses one
    whose model only claims the tie.

    transformers saves one copy of tied weights (with ``tie_word_embeddings`` the output head
    is the input embedding), and ``Trainer._load_from_checkpoint`` loads non-strictly and then,
    in ``_issue_warnings_after_load``, reports every missing key not in the model's
    ``_keys_to_ignore_on_save``, which transformers 5 no longer fills for tied weights: every
    resume of a fully trained model said "missing keys ['lm_head.weight']" although nothing was
    missing. A key the model ties but holds as a separate tensor (weights materialised after the
    tie, NVIDIA-NeMo/Automodel PR #2511) would resume with the head it had before the load,
    not the trained one: that is an error, not a warning.
    """

    def _issue_warnings_after_load(self, load_result: Any) -> None:
        tied = getattr(self.model, "all_tied_weights_keys", None) or {}
        missing = []
        for key in load_result.missing_keys:
            if filled_by_tie(self.model, key):
                continue
            if key in tied:
                raise ValueError(
                    f"the checkpoint has no {key} and the model ties it to {tied[key]} without "
                    "sharing the tensor: the resumed head would not be the trained one; call "
                    "model.tie_weights() before training, or save untied weights"
                )
            missing.append(key)
        super()._issue_warnings_after_load(load_result._replace(missing_keys=missing))


class GRPOInternals(TiedHeadResume, GRPOTrainer):
    """``GRPOTrainer`` with the private methods aem uses behind aem-named methods.

    Subclasses override :meth:`scoring` and :meth:`rewrite_batch` (around and after TRL's
    batch scoring) and call :meth:`score_tokens`, :meth:`record_metric`, :meth:`group_of`,
    :meth:`old_policy_forward_runs` and :meth:`capture_old_policy_entropies`.
    """

    args: GRPOConfig
    #: The gathered advantages :data:`ADVANTAGE_HOOK` was handed for the batch being scored.
    _hooked: torch.Tensor | None = None

    # ------------------------------------------------------------------ overrides
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        """Mirrors ``GRPOTrainer._generate_and_score_completions`` (TRL 1.16): generation,
        rewards, the group advantage and the old-policy/reference log-probs all happen inside
        it, so aem's changes go around (:meth:`scoring`) and after (:meth:`rewrite_batch`).

        With a TRL that calls :data:`ADVANTAGE_HOOK`, the group advantage aem starts from is
        the one the hook was handed, not the output's ``advantages`` key. The credit itself
        is still written here, after TRL: the hook maps one value per completion, while aem's
        credit is one value per turn (per token of an episode row, or on the step layout's
        rows, which TRL's batch does not have yet when the hook runs).
        """
        self._hooked = None
        with self.scoring(inputs):
            out = super()._generate_and_score_completions(inputs)
        if self._hooked is not None:
            n = len(out["advantages"])
            start = self.accelerator.process_index * n
            out["advantages"] = self._hooked[start : start + n]
        return self.rewrite_batch(inputs, out)

    def _transform_advantages(self, advantages: torch.Tensor) -> torch.Tensor:
        """TRL PR #7298's hook (:data:`ADVANTAGE_HOOK`), called only by a TRL that has it:
        the gathered group advantages are kept as the start of aem's credit chain and
        returned unchanged (what TRL logs is its own group advantage, as with the override)."""
        self._hooked = advantages.clone()
        return advantages

    def _get_per_token_logps_and_entropies(self, model: Any, *args: Any, **kwargs: Any) -> Any:
        """Mirrors ``GRPOTrainer._get_per_token_logps_and_entropies``: every forward TRL
        makes (old policy, reference, loss) scores reply positions only, and within
        :meth:`capture_old_policy_entropies` the policy's first no-entropy forward (TRL's
        old-policy forward; a reference forward of the same model comes after it) also keeps
        its entropies."""
        capture = self._entropy_capture == [] and model is self.model
        capture = capture and not kwargs.get("compute_entropy")
        if capture:
            kwargs["compute_entropy"] = True
        with reply_positions_only(self.accelerator.device):
            logps, entropies, aux = super()._get_per_token_logps_and_entropies(
                model, *args, **kwargs
            )
        if capture:
            assert self._entropy_capture is not None  # checked above
            self._entropy_capture.append(entropies)
            entropies = None
        return logps, entropies, aux

    def score_batch(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        """One batch of ``inputs`` played, scored and rewritten: the batch the loss sees
        (what ``_prepare_inputs`` buffers), without a training step."""
        return self._generate_and_score_completions(inputs)

    # ------------------------------------------------------------------ hooks for subclasses
    @contextmanager
    def scoring(self, inputs: list[dict[str, Any]]) -> Iterator[None]:
        """Around TRL's scoring of a batch (nothing by default)."""
        yield

    def rewrite_batch(self, inputs: list[dict[str, Any]], out: dict[str, Any]) -> dict[str, Any]:
        """TRL's scored batch as the loss will see it (unchanged by default)."""
        return out

    # ------------------------------------------------------------------ TRL internals, named
    _entropy_capture: list[torch.Tensor] | None = None

    @contextmanager
    def capture_old_policy_entropies(self, wanted: bool) -> Iterator[list[torch.Tensor]]:
        """Within (if ``wanted``): TRL's old-policy forward of the policy also computes the
        entropies, put in the yielded list instead of returned (TRL asks for none)."""
        captured: list[torch.Tensor] = []
        self._entropy_capture = captured if wanted else None
        try:
            yield captured
        finally:
            self._entropy_capture = None

    def score_tokens(
        self,
        model: Any,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        logits_to_keep: int,
        *,
        compute_entropy: bool,
        batch_size: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """TRL's own per-token log-probs (and entropies) of ``model`` on rows aem built,
        scoring reply positions only (``GRPOTrainer._get_per_token_logps_and_entropies``,
        not the capturing override above)."""
        with reply_positions_only(self.accelerator.device):
            logps, entropies, _ = GRPOTrainer._get_per_token_logps_and_entropies(
                self,
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                batch_size=batch_size,
                compute_entropy=compute_entropy,
            )
        return logps, entropies

    def record_metric(self, mode: str, name: str, value: float) -> None:
        """Log ``value`` under ``name`` with TRL's own metrics (``GRPOTrainer._metrics``,
        averaged and logged by ``GRPOTrainer.log``)."""
        self._metrics[mode][name].append(value)

    def replace_metric(self, mode: str, name: str, value: float) -> None:
        """Replace the value TRL logged last under ``name`` (for this batch) by ``value``."""
        values = self._metrics[mode][name]
        if values:
            values[-1] = value
        else:
            values.append(value)

    def drop_metrics(self, mode: str, prefix: str) -> None:
        """Forget what TRL logged under names starting with ``prefix`` this logging period."""
        for name in [n for n in self._metrics[mode] if n.startswith(prefix)]:
            del self._metrics[mode][name]

    def group_of(self, local_episode: torch.Tensor, n_episodes: int) -> torch.Tensor:
        """Global GRPO group of local episodes. Mirrors the group order of
        ``_generate_and_score_completions``: rewards are gathered process after process and
        viewed as ``(-1, num_generations)``, so a group is ``num_generations`` consecutive
        gathered rows, possibly spanning two processes."""
        training = self.model is not None and self.model.training
        size = self.num_generations if training else self.num_generations_eval
        first = self.accelerator.process_index * n_episodes
        return (first + local_episode.clamp(min=0)) // size

    def tool_environments(self) -> list[Any] | None:
        """The environment instance each local rollout of the last scored batch played on
        TRL's tool loop, in input order (``None`` without ``environment_factory``).

        Mirrors ``_generate_and_score_completions``, which draws one instance per input from
        its pool into ``self.environments`` and leaves them there until the next batch.
        """
        return self.environments

    def old_policy_forward_runs(self) -> bool:
        """Whether TRL computes old-policy log-probs this batch: the condition
        ``_generate_and_score_completions`` uses (accumulation not aligned with generation,
        or vLLM importance-sampling correction)."""
        assert self.args.steps_per_generation is not None  # GRPOConfig.__post_init__ sets it
        generate_every = self.args.steps_per_generation * self.num_iterations
        return self.args.gradient_accumulation_steps % generate_every != 0 or bool(
            self.use_vllm and self.vllm_importance_sampling_correction
        )

    def per_micro_batch_terms(self) -> list[str]:
        """The loss terms TRL computes per micro-batch besides the policy loss, by name.

        Mirrors ``GRPOTrainer.__init__`` (``_entropy_bonus_enabled``, ``top_entropy_quantile``,
        ``aux_loss_enabled``) and ``_compute_loss``, which adds them per call: a batch split
        into chunks would change each of them.
        """
        terms = {
            "entropy bonus": self._entropy_bonus_enabled,
            "top_entropy_quantile": self.top_entropy_quantile < 1.0,
            "MoE auxiliary loss": self.aux_loss_enabled,
        }
        return [name for name, on in terms.items() if on]

    def prepared_inputs(self, inputs: Any) -> dict[str, Any]:
        """TRL's prepared micro-batch: it generates, or hands out the buffered slice
        (``GRPOTrainer._prepare_inputs``)."""
        return self._prepare_inputs(inputs)

    def train_chunks(
        self,
        model: Any,
        chunks: Iterable[dict[str, Any]],
        num_items_in_batch: Any,
        prepared_s: float = 0.0,
    ) -> torch.Tensor:
        """One training step of TRL's over a prepared batch split into ``chunks``, each
        back-propagated on its own; the summed loss.

        ``GRPOTrainer.training_step`` counts every call as a step (``_step``, which decides
        when to generate again) and logs one ``step_time`` per call: the counter is rewound
        before each chunk and the chunks' times are merged into the step's one.
        ``prepared_s``, the seconds it took to prepare the batch (the rollout, on a step that
        generates), is counted in the step's time as TRL counts it where it generates inside
        its own ``training_step``.
        """
        first_step, times = self._step, self._metrics["train"]["step_time"]
        logged = len(times)
        self._current_train_step_time += prepared_s
        total: torch.Tensor | None = None
        with self._inputs_prepared():
            for chunk in chunks:
                self._step = first_step
                loss = GRPOTrainer.training_step(self, model, chunk, num_items_in_batch)
                total = loss if total is None else total + loss
        if len(times) > logged + 1:
            times[logged:] = [sum(times[logged:])]
        assert total is not None, "train_chunks needs at least one chunk"
        return total

    @contextmanager
    def _inputs_prepared(self) -> Iterator[None]:
        """Within: ``Trainer.training_step`` takes its inputs as already prepared.

        ``GRPOTrainer._prepare_inputs`` generates (or hands out the buffered slice) on every
        call; a training step back-propagated in chunks has prepared its batch once already.
        """
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


def _unchanged(inputs: dict[str, Any]) -> dict[str, Any]:
    return inputs
