"""A local transformers causal LM as a policy: chat prompts in, batched generation out.

torch and transformers are imported when a policy is built, not when this module is, so that
``load_policy("expert")`` and the env-only installs never pay for (or need) them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from aem_agent.policies.base import Policy, PolicyInput, PolicyOutput
from aem_agent.prompts import PromptStyle, build_messages, read_prompt_layout
from aem_envs.core.errors import DataError, require

if TYPE_CHECKING:
    import torch
    from transformers import GenerationMixin, PreTrainedModel, PreTrainedTokenizerBase


class HFPolicy(Policy):
    """Generates replies with a local Hugging Face checkpoint (the bundled SmolLM2 by default).

    Prompts go through the tokenizer's chat template; a batch is left-padded into one
    ``generate`` call. Each output keeps the exact ``prompt_ids`` and ``completion_ids`` (up to
    and including the end-of-turn token) in ``extra``, so a rollout can train on the tokens
    that were sampled instead of re-tokenising the text, which can drift. ``temperature=0``
    decodes greedily. With a ``seed``, call ``k`` of :meth:`act` samples under seed
    ``seed + k`` inside a forked RNG, so runs repeat without disturbing the caller's RNG.
    ``num_threads`` sets torch's CPU threads; left ``None`` the process setting stands.
    ``reply_prefix`` pre-fills the start of every reply (e.g. the action tag, which gets very
    small models to answer with an action): its tokens end the prompt ids, and ``reply`` is the
    prefix plus the decoded completion. Training rollouts apply the same setting
    (:class:`aem_agent.rollout.groups.MultiTurnRollout`), so a trained model is benchmarked as it
    was trained. A checkpoint written by ``aem train`` or ``aem sft`` carries the prompt
    settings it was trained with (``aem-prompt.json``): history window, reply prefix, system
    prompt, prompt style and new tokens per turn left unset here are taken from it.
    """

    name = "hf"

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        device: str = "cpu",
        dtype: str | None = None,
        max_new_tokens: int | None = None,
        temperature: float = 0.7,
        top_p: float = 1.0,
        seed: int | None = 0,
        batch_size: int | None = None,
        num_threads: int | None = None,
        history_window: int | None = None,
        system_prompt: str | None = None,
        reply_prefix: str | None = None,
        prompt_style: PromptStyle | None = None,
    ) -> None:
        torch = require("agent", "torch", feature="local model policies")
        transformers = require("agent", "transformers", feature="local model policies")
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        if model_path is None:
            from aem_agent.models.bundled import smollm2_checkpoint

            model_path = smollm2_checkpoint()
        path = Path(model_path).expanduser()
        if not (path / "config.json").is_file():
            raise DataError(
                f"{path} is not a Hugging Face checkpoint directory (no config.json); give a "
                f"directory written by save_pretrained, e.g. a checkpoint of `aem train`"
            )
        if dtype is None:
            dtype = "float32" if device == "cpu" else "bfloat16"
        if not isinstance(getattr(torch, dtype, None), torch.dtype):
            raise ValueError(f"dtype {dtype!r} is not a torch dtype; use float32 or bfloat16")
        trained = read_prompt_layout(path)
        tokenizer = transformers.AutoTokenizer.from_pretrained(path)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            path, dtype=getattr(torch, dtype)
        ).to(device)
        self._setup(
            model,
            tokenizer,
            source=str(path),
            max_new_tokens=_first(max_new_tokens, trained.get("max_turn_tokens"), 256),
            temperature=temperature,
            top_p=top_p,
            seed=seed,
            batch_size=batch_size,
            history_window=_first(history_window, trained.get("history_window"), 5),
            system_prompt=_first(system_prompt, trained.get("system_prompt"), None),
            reply_prefix=_first(reply_prefix, trained.get("reply_prefix"), ""),
            prompt_style=_first(prompt_style, trained.get("prompt_style"), "full"),
        )

    @classmethod
    def from_model(
        cls, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, **settings: Any
    ) -> HFPolicy:
        """A policy over an already loaded model (e.g. the one a trainer is updating).

        ``settings`` are the generation and prompt keywords of the constructor.
        """
        policy = cls.__new__(cls)
        policy._setup(model, tokenizer, source=model.name_or_path, **settings)
        return policy

    def _setup(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        source: str | None,
        max_new_tokens: int = 256,
        temperature: float = 0.7,
        top_p: float = 1.0,
        seed: int | None = 0,
        batch_size: int | None = None,
        history_window: int = 5,
        system_prompt: str | None = None,
        reply_prefix: str = "",
        prompt_style: PromptStyle = "full",
    ) -> None:
        if not tokenizer.chat_template:
            raise DataError(
                f"the tokenizer of {source} has no chat template; use an instruct/chat "
                f"checkpoint or add a chat_template to its tokenizer_config.json"
            )
        if max_new_tokens < 1 or temperature < 0 or (batch_size is not None and batch_size < 1):
            raise ValueError(
                f"need max_new_tokens >= 1, temperature >= 0, batch_size >= 1; got "
                f"{max_new_tokens}, {temperature}, {batch_size}"
            )
        self.model, self.tokenizer, self.source = model, tokenizer, source
        self.max_new_tokens, self.temperature, self.top_p = max_new_tokens, temperature, top_p
        self.seed, self.batch_size = seed, batch_size
        self.history_window, self.system_prompt = history_window, system_prompt
        self.reply_prefix, self.prompt_style = reply_prefix, prompt_style
        self.eos_ids = _eos_ids(model, tokenizer)
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad) if pad is not None else self.eos_ids[0]
        self._calls = 0

    # ------------------------------------------------------------------ the policy
    def prompt_ids(self, inp: PolicyInput) -> list[int]:
        """Token ids of the chat prompt for ``inp``, through the reply header and prefix."""
        messages = build_messages(
            inp,
            history_window=self.history_window,
            system_prompt=self.system_prompt,
            style=self.prompt_style,
        )
        text = cast(  # tokenize=False: the prompt text
            "str",
            self.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=False
            ),
        )
        encoded = self.tokenizer(text + self.reply_prefix, add_special_tokens=False)
        return list(encoded["input_ids"])

    def act(self, inputs: Sequence[PolicyInput]) -> list[PolicyOutput]:
        prompts = [self.prompt_ids(inp) for inp in inputs]
        step = self.batch_size or max(1, len(prompts))
        completions: list[list[int]] = []
        for start in range(0, len(prompts), step):
            completions.extend(self.generate(prompts[start : start + step]))
        self._calls += 1
        return [
            PolicyOutput(
                reply=self.reply_prefix
                + cast("str", self.tokenizer.decode(completion, skip_special_tokens=True)),
                prompt_tokens=len(prompt),
                completion_tokens=len(completion),
                extra={
                    "prompt_ids": prompt,
                    "completion_ids": completion,
                    "finished": bool(completion) and completion[-1] in self.eos_ids,
                },
            )
            for prompt, completion in zip(prompts, completions, strict=True)
        ]

    def generate(self, prompts: Sequence[Sequence[int]]) -> list[list[int]]:
        """Completion ids for a batch of prompt ids, each cut after its first end token."""
        import torch

        device = self.model.device
        width = max(len(p) for p in prompts)
        input_ids = torch.tensor(
            [[self.pad_id] * (width - len(p)) + list(p) for p in prompts], device=device
        )
        attention_mask = torch.tensor(
            [[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device
        )
        sampling = self.temperature > 0
        # The policy's settings replace a checkpoint's own sampling defaults (Qwen2.5 ships
        # top_k=20 and a repetition penalty), so a run means the same on any checkpoint.
        options: dict[str, Any] = {
            "max_new_tokens": self.max_new_tokens,
            "do_sample": sampling,
            "repetition_penalty": 1.0,
            "pad_token_id": self.pad_id,
            "eos_token_id": self.eos_ids,
        }
        if sampling:
            options.update(temperature=self.temperature, top_p=self.top_p, top_k=0)
        training = self.model.training
        self.model.eval()  # no dropout while acting, even on a model a trainer is updating
        try:
            with self._rng(device), torch.no_grad():
                # A causal LM (AutoModelForCausalLM): its class mixes in generation.
                output = cast("GenerationMixin", self.model).generate(
                    input_ids=input_ids, attention_mask=attention_mask, **options
                )
        finally:
            self.model.train(training)
        return [self._cut(row) for row in output[:, width:].tolist()]

    def _cut(self, ids: list[int]) -> list[int]:
        for i, token in enumerate(ids):
            if token in self.eos_ids:
                return ids[: i + 1]
        return ids

    def _rng(self, device: torch.device) -> AbstractContextManager[None]:
        """A forked, seeded RNG for sampling calls; no-op for greedy or unseeded policies."""
        if self.seed is None or self.temperature == 0:
            return nullcontext()
        return _seeded_rng(device, self.seed + self._calls)

    def close(self) -> None:
        device = getattr(getattr(self, "model", None), "device", None)
        self.model = None  # type: ignore[assignment]
        if device is not None and device.type == "cuda":
            import torch

            torch.cuda.empty_cache()


def _first(*values: Any) -> Any:
    """The first value that is not None (an explicit setting, then the trained one)."""
    return next((v for v in values if v is not None), None)


@contextmanager
def _seeded_rng(device: torch.device, seed: int) -> Iterator[None]:
    """Seed torch's RNG for ``device`` inside a fork that restores the caller's state on exit."""
    import torch

    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


def _eos_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """End-of-turn ids from the generation config and tokenizer (chat models often have two)."""
    found: list[int] = []
    for value in (getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        for token in value if isinstance(value, list) else [value]:
            if token is not None and token not in found:
                found.append(int(token))
    if not found:
        raise DataError("the checkpoint defines no end-of-sequence token; set eos_token_id")
    return found
