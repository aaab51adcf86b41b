"""Multi-turn rollouts: groups of episodes played by the policy being trained, as token ids.

Why token ids all the way: the policy gradient needs the log-probabilities of exactly the tokens
the model sampled. Decoding a reply and re-tokenising the conversation later can split text
differently ("re-tokenisation drift"), so here every generated token is kept as generated, the
environment's reply is tokenised once as the chat-template segment that follows it, and the
model's next context is literally ``prompt_ids + completion_ids`` so far. A ``reply_prefix``
(e.g. the action tag) is pre-filled the same way: its tokens end every context the model
continues from (as part of the prompt, or of the masked observation segment), and its text is
put back in front of the decoded reply before parsing, so the sampled ids stay untouched.

Two layouts (``docs/aem.md``):

* ``trajectory`` — one sequence per episode: the first prompt, then assistant turns interleaved
  with observation segments; ``env_mask`` is 0 on observation tokens so they carry no loss and
  never enter the entropy average. :meth:`MultiTurnRollout.__call__` returns this layout in the
  shape TRL's ``rollout_func`` expects.
* ``step`` — one sample per turn: a fresh prompt (task + recent history window + observation)
  and the one reply; :func:`aem_agent.rollout.batches.trajectory_batch` attaches them to a one-token
  stand-in row per episode (``steps``), which the trainer expands into one row per turn, every
  turn sharing its episode's advantage (its α is its own: ``docs/aem.md``).

A GRPO group is G consecutive prompts that are the same
:class:`aem_agent.rollout.records.EpisodeSpec`, so the G episodes start from the same task and seed
and differ only in what the policy samples. This module plays them; the records it fills
are in :mod:`aem_agent.rollout.records`, the samplers in :mod:`aem_agent.rollout.samplers`, the rows
it returns in :mod:`aem_agent.rollout.batches`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, cast

import torch

from aem_agent.policies.base import PolicyInput
from aem_agent.prompts import PromptStyle, build_messages, observation_prompt
from aem_agent.rollout.batches import LAYOUTS, Layout, trajectory_batch
from aem_agent.rollout.engine import EnvPool, Job, Live, Step, drive
from aem_agent.rollout.recording import Behaviour, Recording, Teacher
from aem_agent.rollout.records import Episode, EpisodeSpec, RolloutError, Turn
from aem_agent.rollout.samplers import Generate, Generated, trainer_generator, vllm_generator
from aem_envs.registration import resolve_env_id
from aem_envs.vector import cluster
from aem_envs.wrappers import REPLY_FORMAT, ReplyFormat

if TYPE_CHECKING:  # transformers and TRL load when a model does
    from transformers import PreTrainedTokenizerBase
    from trl import GRPOTrainer

    from aem_agent.grpo.config import AEMConfig


class MultiTurnRollout:
    """Plays batches of episodes with a policy model; usable as TRL's ``rollout_func``.

    Episodes are played by the episode engine (:func:`aem_agent.rollout.engine.drive`): environments
    are kept in a pool and reused across calls (engines are slow to start); the batch's
    environments are made and stepped concurrently by ``workers`` threads, since an env step
    is mostly waiting on an engine, a browser or a container.

    ``ray_address`` puts each env in a Ray actor (:func:`aem_envs.vector.make_ray_env`),
    where engines, browsers and containers can use other cores or machines: ``"local"`` a
    private Ray on loopback (or the one this process is connected to already), ``"auto"``,
    ``"HOST:6379"`` or ``"ray://HOST:10001"`` a cluster; ``None`` (default) envs in this
    process. The episodes are the same either way: same seeds, same observations and rewards.
    """

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        *,
        layout: Layout = "step",
        max_turns: int = 50,
        max_turn_tokens: int = 256,
        max_total_tokens: int = 4096,
        history_window: int = 2,
        env_kwargs: dict[str, Any] | None = None,
        workers: int = 8,
        parser: ReplyFormat | None = None,
        system_prompt: str | None = None,
        reply_prefix: str | None = None,
        ray_address: str | None = None,
        prompt_style: PromptStyle = "full",
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
        self.prompt_style = prompt_style
        self.env_kwargs = dict(env_kwargs or {})
        self.parser = parser or REPLY_FORMAT
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
        self.ray_address = ray_address
        self.envs = EnvPool(ray_address)
        #: Whether this rollout started Ray (it then stops it in :meth:`close`).
        self._owns_ray = cluster.connect(ray_address) if ray_address is not None else False
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="aem-env")
        self.eos_id = int(tokenizer.eos_token_id)
        self._eos_text = cast("str", tokenizer.convert_ids_to_tokens(self.eos_id))

    @classmethod
    def from_config(cls, config: AEMConfig, tokenizer: PreTrainedTokenizerBase) -> MultiTurnRollout:
        """The rollout an :class:`aem_agent.grpo.config.AEMConfig` describes: every rollout
        setting reaches the rollout here, in one place."""
        if config.max_completion_length is None:
            raise RolloutError("max_completion_length is the rollout's token budget; set it")
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
            ray_address=config.env_ray_address,
            prompt_style=config.prompt_style,
        )

    # ------------------------------------------------------------------ TRL entry point
    def __call__(self, prompts: list[str], trainer: GRPOTrainer) -> dict[str, list]:
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
        stand_in = self.eos_id if self.layout == "step" else None
        return trajectory_batch(episodes, stand_in_eos=stand_in)

    def provides_entropies(self, trainer: GRPOTrainer) -> bool:
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
        jobs = [self._job(spec) for spec in specs]
        recording = Recording(self, specs, generate, teacher, behaviour, full_batch)
        drive(
            jobs,
            recording.act,
            recording,
            envs=self.envs,
            concurrency=len(jobs),
            threads=self._executor,
            reply_format=self.parser,
            max_turns=self.max_turns,
            sync=sync,
        )
        return recording.episodes

    def start(self, spec: EpisodeSpec) -> Live[Job]:
        """One episode of ``spec`` reset as :meth:`play` starts it (an env from the pool, the
        rollout's parser and step limit), for a caller that steps it itself; hand it back
        with :meth:`release`."""
        job = self._job(spec)
        episode = Live(job, self.envs.acquire(job.env, job.env_kwargs), self.parser)
        episode.reset()
        return episode

    def release(self, episode: Live[Job]) -> None:
        """Return the env of an episode from :meth:`start` to the pool."""
        self.envs.release(episode.job.env, episode.job.env_kwargs, episode.bare)

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
        ids = [*self.tokenizer(body, add_special_tokens=False)["input_ids"], self.eos_id]
        return Generated(ids, [0.0] * len(ids), None)

    def close(self) -> None:
        """Close every pooled environment, stop the worker threads, and Ray if it started it."""
        self.envs.close()
        self._executor.shutdown(wait=True)
        if self._owns_ray:
            cluster.ray_module().shutdown()
            self._owns_ray = False

    # ------------------------------------------------------------------ internals
    def _job(self, spec: EpisodeSpec) -> Job:
        kwargs = dict(max_steps=self.max_turns, **self.env_kwargs)
        return Job(spec, resolve_env_id(spec.env_id), kwargs)

    def _messages(self, inp: PolicyInput, *, history: bool) -> list[dict[str, str]]:
        window = self.history_window if history else 0
        return build_messages(
            inp, history_window=window, system_prompt=self.system_prompt, style=self.prompt_style
        )

    def _encode_messages(self, messages: list[dict[str, str]]) -> list[int]:
        encoded = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=False
        )
        return list(encoded["input_ids"] if isinstance(encoded, dict) else encoded)

    def first_prompt(self, inp: PolicyInput) -> list[int]:
        """An episode's first context: the task and first observation, no history."""
        return self._encode_messages(self._messages(inp, history=False)) + self._prefix_ids

    def context(self, episode: Episode, inp: PolicyInput) -> list[int]:
        """What the model sees: the trajectory so far, or (step layout) a fresh prompt with
        the task, the recent history window and the current observation."""
        if self.layout == "step":
            return self._encode_messages(self._messages(inp, history=True)) + self._prefix_ids
        return episode.prompt_ids + episode.completion_ids

    def record(
        self,
        episode: Episode,
        inp: PolicyInput,
        turn: int,
        context: list[int],
        reply: Generated,
        text: str,
        step: Step,
    ) -> None:
        info = step.info
        """Append one played turn to ``episode``: its reply tokens and, in the trajectory layout,
        the observation segment that follows (or ``out_of_tokens`` when it would not fit)."""
        acted = Turn(context, reply, text, step.reward, info["action_valid"], step.acted_on)
        episode.turns.append(acted)
        episode.completion_ids += reply.ids
        episode.env_mask += [1] * len(reply.ids)
        episode.logprobs += reply.logprobs
        episode.entropies += reply.entropies if reply.entropies is not None else []
        episode.turn_ids += [turn] * len(reply.ids)
        episode.reward += step.reward
        episode.won, episode.score = bool(info["won"]), float(info["score"])
        episode.infra_error = str(info["infra_error"]) if info.get("infra_error") else None
        episode.done = bool(step.terminated or step.truncated or episode.infra_error)
        if episode.done or self.layout == "step":
            return
        segment = self._observation_ids(inp)
        if not reply.ids or reply.ids[-1] != self.eos_id:
            segment = [self.eos_id, *segment]  # the turn hit its token limit: close it
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
        head = self._render(before, add_generation_prompt=False)
        full = self._render([*before, user], add_generation_prompt=True)
        cut = head.rfind(self._eos_text)
        if cut < 0 or not full.startswith(head[: cut + len(self._eos_text)]):
            raise RolloutError(
                "the chat template does not end assistant turns with the EOS token "
                f"{self._eos_text!r}; multi-turn rollouts need a ChatML-style template"
            )
        segment = full[cut + len(self._eos_text) :]
        ids = self.tokenizer(segment, add_special_tokens=False)["input_ids"]
        return [*ids, *self._prefix_ids]

    def _render(self, messages: list[dict[str, str]], *, add_generation_prompt: bool) -> str:
        """The chat template applied to ``messages``, as text (not token ids)."""
        text = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt
        )
        assert isinstance(text, str)  # tokenize=False renders one conversation as one string
        return text
