"""aem environments for TRL's own tool loop: ``GRPOTrainer(environment_factory=...)``.

TRL 1.16 can play multi-turn episodes itself: it makes one instance per rollout with the
factory, calls ``reset(**row)`` with the dataset row's fields and appends the text it returns
to the row's last user message, exposes the instance's public methods as tools, runs the
model's tool calls until it stops calling (or ``max_tool_calling_iterations``), and scores the
rollout with ``get_reward()``. Tool results are masked out of the loss (TRL's ``tool_mask``).

Why offer it beside :class:`aem_agent.rollout.groups.MultiTurnRollout`: users who already train with
TRL's tool calling can point it at any aem id unchanged, and
:class:`aem_agent.grpo.trainer.AEMGRPOTrainer` assigns turn-level credit per reply on that path
too (each episode's :class:`ToolEnv` keeps the states and rewards GiGPO reads:
:func:`reply_turns`). Our own rollout stays the token-exact path with the step layout, reply
prefix and history window; TRL's loop has none of those.

Usage::

    factory = environment_factory("aem/ALFWorld-v0", max_steps=50)
    trainer = GRPOTrainer(model, args=config, train_dataset=tool_dataset("aem/ALFWorld-v0", 256),
                          environment_factory=factory)
"""

from __future__ import annotations

import inspect
import itertools
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from aem_agent.credit.base import CreditError
from aem_agent.prompts import admissible_block
from aem_agent.rollout.records import EpisodeSpec
from aem_envs.registration import agent_brief, resolve_env_id

#: The line after the first observation telling the model how to act (TRL shows the tool's
#: schema in the system prompt, but not that one call is one environment step).
ACT_INSTRUCTION = (
    "Act by calling the `act` tool with one action at a time; each call returns the next "
    "observation. Stop calling it once the episode is over."
)

#: What ``act`` adds when the env's infrastructure failed (the episode ends, unscored).
INFRA_FAILED = "The environment failed; the episode is over and is not scored."

#: What ``act`` answers once the episode has ended (the env is not stepped again).
EPISODE_OVER = "The episode is over; no further action is taken."


@dataclass(frozen=True)
class Trace:
    """What one episode of a :class:`ToolEnv` went through, for turn-level credit.

    Attributes:
        first: the raw observation ``reset`` started from (the first reply's state).
        rewards: the env's reward of each ``act`` call, in call order (0 for calls after
            the episode ended, which do not step the env).
        observations: the raw observation after each ``act`` call (the state the next
            call acts on).
    """

    first: str
    rewards: tuple[float, ...] = ()
    observations: tuple[str, ...] = ()

    def add(self, reward: float, observation: str) -> Trace:
        return Trace(self.first, (*self.rewards, reward), (*self.observations, observation))


class ToolEnv:
    """One aem environment as a TRL tool environment: ``reset``, the ``act`` tool, ``get_reward``.

    TRL pools instances and resets them for every new rollout, so the gym env is made once,
    on the first ``reset``, and reused; it is closed when the instance is garbage collected
    (or at interpreter exit), since TRL calls nothing on an environment at teardown.

    TRL turns every public method into a tool the model may call, so what the trainer reads
    besides (:attr:`trace`, :attr:`infra_error`) are properties.
    """

    #: The methods TRL offers the model as tools (its public methods but ``reset`` and
    #: ``get_reward``); every call of one is one :attr:`trace` entry.
    TOOLS = ("act",)

    def __init__(
        self, env_id: str, env_kwargs: dict[str, Any], options: dict[str, Any], seeds: Iterator[int]
    ) -> None:
        self._env_id = resolve_env_id(env_id)
        self._env_kwargs = env_kwargs
        self._options = options
        self._seeds = seeds
        self._env: gym.Env | None = None
        self._reward = 0.0
        self._done = False
        self._infra_error: str | None = None
        self._trace = Trace("")

    @property
    def env(self) -> gym.Env | None:
        """The gym env (made on the first ``reset``), for experts and inspection; a property
        so that TRL, which turns public methods into tools, does not offer it to the model."""
        return self._env

    @property
    def trace(self) -> Trace:
        """The current episode's observations and per-call rewards (:func:`reply_turns`)."""
        return self._trace

    @property
    def infra_error(self) -> str | None:
        """What the env reported in ``info["infra_error"]`` this episode, if anything."""
        return self._infra_error

    def reset(self, **row: Any) -> str:
        """Start an episode and return its first observation, as the row's user message tail.

        TRL passes every field of the dataset row. ``seed``, ``split`` and ``task_id`` pick the
        episode (so the G rollouts of a GRPO group, which share a row, share a task, as
        :func:`tool_dataset` arranges); without ``seed`` the factory's counter gives the next
        seed, a different task per rollout. Other fields (``prompt``) are ignored.
        """
        if self._env is None:
            self._env = gym.make(self._env_id, **self._env_kwargs)
            weakref.finalize(self, self._env.close)
        seed = next(self._seeds) if row.get("seed") is None else int(row["seed"])
        spec = EpisodeSpec(self._env_id, seed, row.get("split"), row.get("task_id"))
        options = {**self._options, **(spec.reset_options() or {})}
        observation, info = self._env.reset(seed=spec.seed, options=options or None)
        self._reward, self._done, self._infra_error = 0.0, False, None
        self._trace = Trace(observation)
        text = observation
        if info["instruction"] not in observation:
            text = f"Your task is to: {info['instruction']}\n\n{observation}"
        return f"{text}{_admissible(info)}\n\n{ACT_INSTRUCTION}"

    # The docstring below is what the model reads: TRL builds the tool's schema from the
    # signature and the Google-style docstring.
    def act(self, action: str) -> str:
        """Take one action in the environment and observe its result.

        Args:
            action: The action, written exactly as the environment expects it (one of the
                admissible actions when they are listed).

        Returns:
            The observation after the action, and whether the episode is over.
        """
        if self._env is None:
            raise RuntimeError("act() before reset(): TRL resets every environment first")
        if self._done:
            self._trace = self._trace.add(0.0, self._trace.observations[-1])
            return EPISODE_OVER
        observation, reward, terminated, truncated, info = self._env.step(action)
        self._reward += float(reward)
        self._trace = self._trace.add(float(reward), observation)
        if info.get("infra_error"):
            self._done, self._infra_error = True, str(info["infra_error"])
            return f"{observation}\n\n{INFRA_FAILED}"
        if terminated or truncated:
            self._done = True
            outcome = "won" if info["won"] else "not won"
            return f"{observation}\n\nThe episode is over ({outcome}, score {info['score']:g})."
        return f"{observation}{_admissible(info)}"

    def get_reward(self) -> float | None:
        """The episode's summed reward under the env's reward scheme (what TRL optimises).

        ``None`` when the env reported an infrastructure failure (``info["infra_error"]``): TRL
        then leaves the rollout out of its group's baseline and gives it advantage 0.
        """
        return None if self._infra_error else self._reward


def environment_factory(
    env_id: str, *, options: dict[str, Any] | None = None, **env_kwargs: Any
) -> Callable[[], ToolEnv]:
    """A factory of :class:`ToolEnv` for ``GRPOTrainer(environment_factory=...)``.

    ``env_kwargs`` go to ``gym.make`` (``max_steps``, ``reward_scheme``, data paths, …);
    ``options`` are reset options every episode gets (e.g. ``{"split": "test"}``), which a
    row's own ``split``/``task_id`` override. The id is resolved now, so an unknown one fails
    here rather than inside the trainer. Instances share one seed counter (see
    :meth:`ToolEnv.reset`).
    """
    resolve_env_id(env_id)
    seeds = itertools.count()
    fixed = dict(options or {})

    def make() -> ToolEnv:
        return ToolEnv(env_id, env_kwargs, fixed, seeds)

    return make


def tool_dataset(env_id: str, num_tasks: int, *, seed: int = 0, split: str | None = None) -> Any:
    """A ``datasets.Dataset`` of ``num_tasks`` episodes for the factory's environments.

    Each row is a conversational prompt (the env brief's role text and an empty user turn,
    which ``reset`` fills with the first observation) and a ``seed`` (and ``split``): TRL
    repeats a row ``num_generations`` times, so a GRPO group plays one task.
    """
    from datasets import Dataset

    prompt = [
        {"role": "system", "content": agent_brief(env_id).role},
        {"role": "user", "content": ""},
    ]
    columns: dict[str, list[Any]] = {
        "prompt": [prompt] * num_tasks,
        "seed": list(range(seed, seed + num_tasks)),
    }
    if split is not None:
        columns["split"] = [split] * num_tasks
    return Dataset.from_dict(columns)


def reply_turns(env: ToolEnv, replies: Sequence[dict[str, Any]]) -> tuple[list[str], list[float]]:
    """The state each reply of a rollout acted on (its anchor) and the reward its calls earned.

    ``replies`` are the model's replies in order, as TRL's ``parse_response`` reads them. TRL's
    loop runs every tool call of a reply, in order, before it generates the next reply, so a
    reply's env calls are the next entries of ``env.trace`` and the next reply starts from the
    observation after the last of them. The last reply's calls ran only when TRL then dropped
    their results for lack of room (it rolls back the messages, not the env), so it takes what
    is left of the trace: nothing or all its calls. A call TRL could not make (an unknown tool,
    arguments that do not fit) never reached the env and is not counted.
    """
    trace, used = env.trace, 0
    anchors: list[str] = []
    rewards: list[float] = []
    for k, reply in enumerate(replies):
        calls = _env_calls(env, reply)
        if k == len(replies) - 1 and len(trace.rewards) - used in (0, calls):
            calls = len(trace.rewards) - used
        elif used + calls > len(trace.rewards) or k == len(replies) - 1:
            raise CreditError(
                f"TRL's tool loop made {len(trace.rewards)} env calls in a rollout whose "
                f"replies ask for {used + calls} by reply {k}; its turns cannot be told apart "
                "(does the environment_factory's env come from aem_agent.grpo.tool_env?)"
            )
        anchors.append(trace.observations[used - 1] if used else trace.first)
        rewards.append(sum(trace.rewards[used : used + calls]))
        used += calls
    return anchors, rewards


def rollout_turns(
    env: ToolEnv,
    tokenizer: Any,
    prompt_ids: Sequence[int],
    completion_ids: Sequence[int],
    own: Sequence[bool],
) -> tuple[list[str], list[float]]:
    """:func:`reply_turns` of one rollout of TRL's tool loop, from its tokens.

    ``own`` marks the model's own completion tokens (TRL's ``completion_mask * tool_mask``);
    each contiguous run of them is one reply, parsed as TRL parsed it (the same function, on
    the same tokens, after the same prefix) to count its tool calls.
    """
    from trl.chat_template_utils import parse_response

    tools = [getattr(env, name) for name in env.TOOLS]
    prefix, replies, start = list(prompt_ids), [], None
    for i, mine in enumerate([*own, False]):
        if mine and start is None:
            start = i
        elif not mine and start is not None:
            head = prefix + list(completion_ids[:start])
            reply = list(completion_ids[start:i])
            replies.append(parse_response(tokenizer, reply, prefix=head, tools=tools))
            start = None
    return reply_turns(env, replies) if replies else ([], [])


def _env_calls(env: ToolEnv, reply: dict[str, Any]) -> int:
    """How many of ``reply``'s tool calls TRL could make on ``env`` (name and arguments fit)."""
    count = 0
    for call in reply.get("tool_calls") or []:
        function = (call.get("function") or {}) if call.get("type") == "function" else {}
        if function.get("name") not in env.TOOLS:
            continue
        try:
            inspect.signature(getattr(env, function["name"])).bind(**function["arguments"])
        except TypeError:
            continue
        count += 1
    return count


def _admissible(info: dict[str, Any]) -> str:
    """The prompts' listing of the admissible actions, as a paragraph after an observation."""
    block = admissible_block(info.get("admissible_actions") or None)
    return "\n\n" + block.rstrip("\n") if block else ""
