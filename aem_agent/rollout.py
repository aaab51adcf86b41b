"""Multi-turn rollouts: groups of episodes played by the policy being trained, as token ids.

Why token ids all the way: the policy gradient needs the log-probabilities of exactly the tokens
the model sampled. Decoding a reply and re-tokenising the conversation later can split text
differently ("re-tokenisation drift"), so here every generated token is kept as generated, the
environment's reply is tokenised once as the chat-template segment that follows it, and the
model's next context is literally ``prompt_ids + completion_ids`` so far. A ``reply_prefix``
(e.g. ``"<action>"``) is pre-filled the same way: its tokens end every context the model
continues from (as part of the prompt, or of the masked observation segment), and its text is
put back in front of the decoded reply before parsing, so the sampled ids stay untouched.

Two layouts (``docs/aem.md``):

* ``trajectory`` — one sequence per episode: the first prompt, then assistant turns interleaved
  with observation segments; ``env_mask`` is 0 on observation tokens so they carry no loss and
  never enter the entropy average. :meth:`MultiTurnRollout.__call__` returns this layout in the
  shape TRL's ``rollout_func`` expects.
* ``step`` — one sample per turn: a fresh prompt (task + recent history window + observation)
  and the one reply; :func:`trajectory_batch` attaches them to a one-token stand-in row per
  episode (``steps``), which the trainer expands into one row per turn, every turn sharing
  its episode's advantage (its α is its own: ``docs/aem.md``).

A GRPO group is G consecutive prompts that are the same :class:`EpisodeSpec`, so the G episodes
start from the same task and seed and differ only in what the policy samples.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, SupportsFloat, get_args

import gymnasium as gym
import torch

from aem_agent.policies.base import PolicyInput
from aem_agent.prompts import build_messages, observation_prompt
from aem_envs.core.errors import AEMError
from aem_envs.registration import resolve_env_id
from aem_envs.wrappers import LLMActionWrapper, ReplyParser

#: How episodes become training rows (see the module docstring).
Layout = Literal["step", "trajectory"]
LAYOUTS: tuple[str, ...] = get_args(Layout)


#: Seconds between two progress lines of one rollout.
PROGRESS_SECONDS = 15.0


class RolloutError(AEMError, ValueError):
    """A rollout cannot run as configured (bad prompt key, tokenizer without chat template)."""


@dataclass(frozen=True)
class EpisodeSpec:
    """Which episode to play: env id, reset seed and split. Serialised as the dataset prompt."""

    env_id: str
    seed: int
    split: str | None = None

    def to_prompt(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_prompt(cls, prompt: Any) -> EpisodeSpec:
        try:
            return cls(**json.loads(prompt))
        except (TypeError, ValueError) as exc:
            raise RolloutError(
                f"rollout prompt {str(prompt)[:80]!r} is not an episode spec; build the training "
                "dataset with aem_agent.rollout.task_dataset()"
            ) from exc


@dataclass
class Generated:
    """One sampled reply: its token ids and, per token, log-probability and entropy.

    ``entropies`` is None when the sampler does not report them (vLLM); the trainer then
    takes them from a forward pass.
    """

    ids: list[int]
    logprobs: list[float]
    entropies: list[float] | None


#: Generates one reply per context (a list of token ids); contexts are whole sequences so far.
Generate = Callable[[list[list[int]]], list[Generated]]

#: Writes the reply for an env's current state in place of the model (e.g. the env's expert,
#: for supervised warm starts); the text must start with the rollout's ``reply_prefix``.
Teacher = Callable[[gym.Env], str]
#: ``behaviour(env, label)``: the reply text to execute when a teacher's label is ``label``
#: (the label itself, or another action that takes the episode off the teacher's path).
Behaviour = Callable[[gym.Env, str], str]


@dataclass
class Turn:
    """One assistant turn: the exact context the model saw and what it produced."""

    prompt_ids: list[int]
    reply: Generated
    text: str
    reward: float
    action_valid: bool


@dataclass
class Episode:
    """A played episode in both layouts' raw form."""

    spec: EpisodeSpec
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    entropies: list[float] = field(default_factory=list)
    turn_ids: list[int] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    reward: float = 0.0
    won: bool = False
    score: float = 0.0
    done: bool = False
    #: True when the token budget, not the env, ended the episode.
    out_of_tokens: bool = False


def task_dataset(
    env_ids: Sequence[str], num_tasks: int, *, seed: int = 0, split: str | None = None
) -> Any:
    """A ``datasets.Dataset`` whose ``prompt`` column holds one :class:`EpisodeSpec` per task.

    Env ids alternate and seeds count up from ``seed``, so the set is reproducible and every
    (env, seed) pair is a distinct task; TRL repeats each row ``num_generations`` times.
    """
    from datasets import Dataset

    specs = [
        EpisodeSpec(env_ids[i % len(env_ids)], seed + i, split).to_prompt()
        for i in range(num_tasks)
    ]
    return Dataset.from_dict({"prompt": specs})


class MultiTurnRollout:
    """Plays batches of episodes with a policy model; usable as TRL's ``rollout_func``.

    Environments are kept in a pool per env id and reused across calls (engines are slow to
    start); the batch's environments are stepped concurrently by ``workers`` threads, since an
    env step is mostly waiting on an engine, a browser or a container.
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        layout: Layout = "step",
        max_turns: int = 50,
        max_turn_tokens: int = 256,
        max_total_tokens: int = 4096,
        history_window: int = 2,
        env_kwargs: dict[str, Any] | None = None,
        workers: int = 8,
        parser: ReplyParser | None = None,
        system_prompt: str | None = None,
        reply_prefix: str | None = None,
    ) -> None:
        if getattr(tokenizer, "chat_template", None) is None:
            raise RolloutError("the tokenizer has no chat template; use an instruct/chat model")
        if layout not in LAYOUTS:
            raise RolloutError(f"layout={layout!r}; choose one of {list(LAYOUTS)}")
        self.tokenizer = tokenizer
        self.layout = layout
        self.max_turns = max_turns
        self.max_turn_tokens = max_turn_tokens
        self.max_total_tokens = max_total_tokens
        self.history_window = history_window
        self.env_kwargs = dict(env_kwargs or {})
        self.parser = parser or ReplyParser()
        self.system_prompt = system_prompt
        self.reply_prefix = reply_prefix or ""
        self._prefix_ids = (
            list(tokenizer(self.reply_prefix, add_special_tokens=False)["input_ids"])
            if self.reply_prefix
            else []
        )
        #: Called with one line every :data:`PROGRESS_SECONDS` of a long rollout (``aem train``
        #: sets it to ``print``), so minutes of generation are not minutes of silence.
        self.progress: Callable[[str], None] | None = None
        self._pool: dict[str, list[gym.Env]] = {}
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="aem-env")
        self._eos_id = int(tokenizer.eos_token_id)
        self._eos_text = tokenizer.convert_ids_to_tokens(self._eos_id)

    @classmethod
    def from_config(cls, config: Any, tokenizer: Any) -> MultiTurnRollout:
        """The rollout an :class:`aem_agent.config.AEMConfig` describes: every rollout
        setting reaches the rollout here, in one place."""
        return cls(
            tokenizer,
            layout=config.rollout_layout,
            max_turns=config.max_turns,
            max_turn_tokens=config.max_turn_tokens,
            max_total_tokens=config.max_completion_length,
            history_window=config.history_window,
            env_kwargs=config.env_kwargs,
            workers=config.env_workers,
            reply_prefix=config.reply_prefix,
        )

    # ------------------------------------------------------------------ TRL entry point
    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list]:
        """TRL ``rollout_func``: play one episode per prompt with ``trainer``'s model.

        Generation uses TRL's vLLM client when the trainer is configured for vLLM, else
        ``model.generate`` on the current weights. With several processes the turns run in
        lockstep (generation gathers weights or prompts collectively); vLLM server mode also
        needs the same number of prompts from every process, so finished episodes then send
        a one-token placeholder whose reply is thrown away.
        """
        accelerator = trainer.accelerator
        sync = None
        if accelerator.num_processes > 1:

            def sync(local_active: int) -> int:
                count = torch.tensor([local_active], device=accelerator.device)
                return int(accelerator.gather(count).sum())

        if trainer.use_vllm:
            generate = vllm_generator(trainer, self.max_turn_tokens)
        else:
            generate = trainer_generator(trainer, self.tokenizer, self.max_turn_tokens)
        specs = [EpisodeSpec.from_prompt(p) for p in prompts]
        episodes = self.play(specs, generate, sync=sync, full_batch=bool(trainer.use_vllm))
        stand_in = self._eos_id if self.layout == "step" else None
        return trajectory_batch(episodes, stand_in_eos=stand_in)

    def provides_entropies(self, trainer: Any) -> bool:
        """Whether batches will carry sampler entropies (vLLM returns log-probs only)."""
        return not trainer.use_vllm

    # ------------------------------------------------------------------ playing
    def play(
        self,
        specs: Sequence[EpisodeSpec],
        generate: Generate | None = None,
        *,
        sync: Callable[[int], int] | None = None,
        full_batch: bool = False,
        teacher: Teacher | None = None,
        behaviour: Behaviour | None = None,
    ) -> list[Episode]:
        """Play one episode per spec, generating all active episodes' turns as one batch.

        ``sync`` (distributed runs) maps this process's count of active episodes to the count
        over all processes, so every process makes the same number of ``generate`` calls;
        ``full_batch`` sends a placeholder context for each finished episode. With a
        ``teacher`` instead of ``generate``, its replies (see :meth:`teacher_reply`) are played
        and recorded as if sampled, so each ``Turn.prompt_ids`` is exactly the context the
        model would have been given. ``behaviour`` (with a teacher, step layout only) picks
        the action actually played while the teacher's reply stays the recorded label: the
        DAgger/DART way to show the states a student reaches after a mistake, each labelled
        with what the teacher would do there.
        """
        if (generate is None) == (teacher is None):
            raise RolloutError("play() takes exactly one of generate and teacher")
        if behaviour is not None and (teacher is None or self.layout != "step"):
            raise RolloutError(
                "play(behaviour=...) relabels teacher turns; it needs a teacher and the step "
                "layout (a trajectory row would pair a label with another action's observation)"
            )
        envs = self._checkout(specs)
        episodes = [Episode(spec) for spec in specs]
        resets = list(self._executor.map(self._reset, envs, specs))
        inputs = [
            PolicyInput(spec.env_id, info["instruction"], obs, [], info["admissible_actions"])
            for spec, (obs, info) in zip(specs, resets, strict=True)
        ]
        for episode, inp in zip(episodes, inputs, strict=True):
            episode.prompt_ids = self._encode_messages(self._messages(inp, history=False))
            episode.prompt_ids += self._prefix_ids
        last_report = time.monotonic()
        for turn in range(self.max_turns):
            active = [i for i, e in enumerate(episodes) if not (e.done or e.out_of_tokens)]
            if self.progress is not None and time.monotonic() - last_report > PROGRESS_SECONDS:
                self.progress(_progress_line(episodes, turn))
                last_report = time.monotonic()
            if not (sync(len(active)) if sync is not None else active):
                break
            asked = range(len(episodes)) if full_batch else active
            contexts = {
                i: self._context(episodes[i], inputs[i]) if i in active else [self._eos_id]
                for i in asked
            }
            if teacher is not None:
                labels = {i: teacher(envs[i]) for i in active}
                replies = {i: self.teacher_reply(labels[i]) for i in active}
            else:
                assert generate is not None  # checked above: exactly one of generate and teacher
                replies = dict(zip(contexts, generate(list(contexts.values())), strict=True))
            texts = [
                self.reply_prefix + self.tokenizer.decode(replies[i].ids, skip_special_tokens=True)
                if behaviour is None
                else behaviour(envs[i], labels[i])
                for i in active
            ]
            steps = list(self._executor.map(lambda i, t: envs[i].step(t), active, texts))
            for i, text, step in zip(active, texts, steps, strict=True):
                self._record(episodes[i], inputs[i], turn, contexts[i], replies[i], text, step)
        return episodes

    def teacher_reply(self, text: str) -> Generated:
        """A teacher's reply text as the token ids the model would emit after its context.

        The ``reply_prefix`` already ends the context, so only the rest of ``text`` is
        tokenised, then the EOS that closes a finished turn; log-probabilities are zero.
        """
        if not text.startswith(self.reply_prefix):
            raise RolloutError(
                f"teacher reply {text[:60]!r} does not start with reply_prefix "
                f"{self.reply_prefix!r}"
            )
        body = text[len(self.reply_prefix) :]
        ids = [*self.tokenizer(body, add_special_tokens=False)["input_ids"], self._eos_id]
        return Generated(ids, [0.0] * len(ids), None)

    def close(self) -> None:
        """Close every pooled environment and stop the worker threads."""
        for envs in self._pool.values():
            for env in envs:
                env.close()
        self._pool.clear()
        self._executor.shutdown(wait=True)

    # ------------------------------------------------------------------ internals
    def _checkout(self, specs: Sequence[EpisodeSpec]) -> list[gym.Env]:
        """One env per spec from the pool, creating only as many as this batch needs."""
        handed: dict[str, int] = {}
        envs = []
        for spec in specs:
            pool = self._pool.setdefault(spec.env_id, [])
            index = handed.get(spec.env_id, 0)
            if index == len(pool):
                pool.append(self._make(spec.env_id))
            handed[spec.env_id] = index + 1
            envs.append(pool[index])
        return envs

    def _make(self, env_id: str) -> gym.Env:
        env = gym.make(resolve_env_id(env_id), max_steps=self.max_turns, **self.env_kwargs)
        return LLMActionWrapper(env, self.parser)

    @staticmethod
    def _reset(env: gym.Env, spec: EpisodeSpec) -> tuple[str, dict[str, Any]]:
        options = {"split": spec.split} if spec.split else None
        return env.reset(seed=spec.seed, options=options)

    def _messages(self, inp: PolicyInput, *, history: bool) -> list[dict[str, str]]:
        window = self.history_window if history else 0
        return build_messages(inp, history_window=window, system_prompt=self.system_prompt)

    def _encode_messages(self, messages: list[dict[str, str]]) -> list[int]:
        encoded = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=False
        )
        return list(encoded["input_ids"] if isinstance(encoded, dict) else encoded)

    def _context(self, episode: Episode, inp: PolicyInput) -> list[int]:
        """What the model sees: the trajectory so far, or (step layout) a fresh prompt with
        the task, the recent history window and the current observation."""
        if self.layout == "step":
            return self._encode_messages(self._messages(inp, history=True)) + self._prefix_ids
        return episode.prompt_ids + episode.completion_ids

    def _record(
        self,
        episode: Episode,
        inp: PolicyInput,
        turn: int,
        context: list[int],
        reply: Generated,
        text: str,
        step: tuple[str, SupportsFloat, bool, bool, dict[str, Any]],
    ) -> None:
        obs, reward, terminated, truncated, info = step
        episode.turns.append(Turn(context, reply, text, float(reward), info["action_valid"]))
        episode.completion_ids += reply.ids
        episode.env_mask += [1] * len(reply.ids)
        episode.logprobs += reply.logprobs
        episode.entropies += reply.entropies if reply.entropies is not None else []
        episode.turn_ids += [turn] * len(reply.ids)
        episode.reward += float(reward)
        episode.won = bool(info["won"])
        episode.score = float(info["score"])
        episode.done = bool(terminated or truncated)
        inp.history.append((inp.observation, info.get("parsed_action") or text))
        inp.observation = obs
        inp.admissible_actions = info["admissible_actions"]
        if episode.done or self.layout == "step":
            return
        segment = self._observation_ids(inp)
        if not reply.ids or reply.ids[-1] != self._eos_id:
            segment = [self._eos_id, *segment]  # the turn hit its token limit: close it
        budget = len(episode.completion_ids) + len(segment) + self.max_turn_tokens
        if budget > self.max_total_tokens:
            episode.out_of_tokens = True
            return
        episode.completion_ids += segment
        episode.env_mask += [0] * len(segment)
        episode.logprobs += [0.0] * len(segment)
        episode.entropies += [0.0] * len(segment)
        episode.turn_ids += [-1] * len(segment)

    def _observation_ids(self, inp: PolicyInput) -> list[int]:
        """Tokens between an assistant turn's end-of-turn token and the next reply (ending with
        the reply prefix's tokens).

        The chat template is rendered once with and once without the new user message; the
        difference, taken from just after the assistant's end-of-turn token, is the segment.
        """
        user = {"role": "user", "content": observation_prompt(inp)}
        before = [{"role": "user", "content": "."}, {"role": "assistant", "content": "."}]
        head = self.tokenizer.apply_chat_template(before, tokenize=False)
        full = self.tokenizer.apply_chat_template(
            [*before, user], tokenize=False, add_generation_prompt=True
        )
        cut = head.rfind(self._eos_text)
        if cut < 0 or not full.startswith(head[: cut + len(self._eos_text)]):
            raise RolloutError(
                "the chat template does not end assistant turns with the EOS token "
                f"{self._eos_text!r}; multi-turn rollouts need a ChatML-style template"
            )
        segment = full[cut + len(self._eos_text) :]
        ids = self.tokenizer(segment, add_special_tokens=False)["input_ids"]
        return [*ids, *self._prefix_ids]


def _progress_line(episodes: Sequence[Episode], turn: int) -> str:
    turns = [t for e in episodes for t in e.turns]
    done = sum(e.done or e.out_of_tokens for e in episodes)
    valid = sum(t.action_valid for t in turns) / max(len(turns), 1)
    return (
        f"  rollout: turn {turn}, {done}/{len(episodes)} episodes done, "
        f"{len(turns)} turns played, valid actions {valid:.0%}"
    )


def trajectory_batch(
    episodes: Sequence[Episode], *, stand_in_eos: int | None = None
) -> dict[str, list]:
    """Episodes in the shape TRL's ``rollout_func`` returns (one row per episode).

    ``env_mask`` becomes TRL's tool mask; the other extra keys reach the reward functions and
    :class:`aem_agent.trainer.AEMGRPOTrainer` (sampler entropies, turn ids for turn-level AEM,
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
    )
    if all(len(e.entropies) == len(e.completion_ids) for e in episodes):
        batch["sampler_entropies"] = [e.entropies for e in episodes]
    return batch


def _step_sample(turn: Turn) -> dict[str, list]:
    """One turn as the trainer's step row: its context, reply, log-probs (and entropies)."""
    sample: dict[str, list] = {
        "prompt_ids": turn.prompt_ids,
        "completion_ids": turn.reply.ids,
        "logprobs": turn.reply.logprobs,
    }
    if turn.reply.entropies is not None:
        sample["entropies"] = turn.reply.entropies
    return sample


def episode_reward(completions: list, episode_reward: list[float], **_: Any) -> list[float]:
    """TRL reward function: the episode's summed env reward (10 / 0 / −0.1 by default)."""
    return [float(r) for r in episode_reward]


def model_generator(
    model: Any,
    tokenizer: Any,
    generation_config: Any,
    *,
    max_new_tokens: int,
) -> Generate:
    """A :data:`Generate` that samples with ``model.generate`` on left-padded contexts.

    Per-token log-probabilities and entropies come from the raw logits divided by the
    temperature, the same quantity TRL's training forward computes, so AEM can use them
    without another forward pass.
    """
    config = copy.deepcopy(generation_config)
    config.max_new_tokens = max_new_tokens
    config.output_logits = True
    config.return_dict_in_generate = True
    temperature = float(getattr(config, "temperature", None) or 1.0)
    eos = config.eos_token_id if config.eos_token_id is not None else tokenizer.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos])
    pad_id = (
        tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    )

    def generate(contexts: list[list[int]]) -> list[Generated]:
        if not contexts:  # a process with no active episode, kept in lockstep with the others
            return []
        device = next(model.parameters()).device
        width = max(len(c) for c in contexts)
        input_ids = torch.tensor([[pad_id] * (width - len(c)) + c for c in contexts], device=device)
        attention = torch.tensor(
            [[0] * (width - len(c)) + [1] * len(c) for c in contexts], device=device
        )
        with torch.no_grad():
            out = model.generate(
                input_ids=input_ids, attention_mask=attention, generation_config=config
            )
        sampled = out.sequences[:, width:]
        chosen_steps, entropy_steps = [], []
        for step, logits in enumerate(out.logits):  # one (B, V) slice at a time: bounded memory
            logp = torch.log_softmax(logits.float() / temperature, dim=-1)
            chosen_steps.append(logp.gather(-1, sampled[:, step : step + 1]).squeeze(-1))
            entropy_steps.append(-(logp.exp() * logp).sum(-1))
        chosen = torch.stack(chosen_steps, dim=1).tolist()
        entropy = torch.stack(entropy_steps, dim=1).tolist()
        new = sampled.tolist()
        results = []
        for row, ids in enumerate(new):
            end = next((k + 1 for k, t in enumerate(ids) if t in eos_ids), len(ids))
            results.append(Generated(ids[:end], chosen[row][:end], entropy[row][:end]))
        return results

    return generate


def trainer_generator(trainer: Any, tokenizer: Any, max_new_tokens: int) -> Generate:
    """:func:`model_generator` on the trainer's current weights, unwrapped for generation."""
    from trl.models import unwrap_model_for_generation

    def generate(contexts: list[list[int]]) -> list[Generated]:
        with unwrap_model_for_generation(
            trainer.model_wrapped,
            trainer.accelerator,
            gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
        ) as model:
            sample = model_generator(
                model, tokenizer, trainer.generation_config, max_new_tokens=max_new_tokens
            )
            return sample(contexts)

    return generate


def vllm_generator(trainer: Any, max_new_tokens: int) -> Generate:
    """A :data:`Generate` on TRL's vLLM backend (server or colocate), one reply per context.

    vLLM returns the sampled tokens' log-probabilities but no entropies; TRL already syncs
    the trainer's weights to vLLM before calling the rollout.
    """
    backend = trainer.vllm_generation

    def generate(contexts: list[list[int]]) -> list[Generated]:
        limit, backend.max_completion_length = backend.max_completion_length, max_new_tokens
        try:
            _, completion_ids, logprobs, _ = backend.generate(contexts, None, 1)
        finally:
            backend.max_completion_length = limit
        return [
            Generated(
                list(ids),
                [float("nan") if p[0] is None else float(p[0]) for p in lps]
                if lps is not None
                else [0.0] * len(ids),
                None,
            )
            for ids, lps in zip(
                completion_ids, logprobs or [None] * len(completion_ids), strict=True
            )
        ]

    return generate
