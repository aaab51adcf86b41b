"""aem environments for TRL's own tool loop: ``GRPOTrainer(environment_factory=...)``.

TRL 1.16 can play multi-turn episodes itself: it makes one instance per rollout with the
factory, calls ``reset(**row)`` with the dataset row's fields and appends the text it returns
to the row's last user message, exposes the instance's public methods as tools, runs the
model's tool calls until it stops calling (or ``max_tool_calling_iterations``), and scores the
rollout with ``get_reward()``. Tool results are masked out of the loss (TRL's ``tool_mask``).

Why offer it beside :class:`aem_agent.rollout.MultiTurnRollout`: users who already train with
TRL's tool calling can point it at any aem id unchanged, and
:class:`aem_agent.trainer.AEMGRPOTrainer` applies AEM per tool-call turn on that path too. Our
own rollout stays the token-exact path with the step layout, reply prefix and history window;
TRL's loop has none of those.

Usage::

    factory = environment_factory("aem/ALFWorld-v0", max_steps=50)
    trainer = GRPOTrainer(model, args=config, train_dataset=tool_dataset("aem/ALFWorld-v0", 256),
                          environment_factory=factory)
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym

from aem_agent.episodes import EpisodeSpec
from aem_agent.prompts import admissible_block
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


class ToolEnv:
    """One aem environment as a TRL tool environment: ``reset``, the ``act`` tool, ``get_reward``.

    TRL pools instances and resets them for every new rollout, so the gym env is made once,
    on the first ``reset``, and reused; it is closed when the instance is garbage collected
    (or at interpreter exit), since TRL calls nothing on an environment at teardown.
    """

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

    @property
    def env(self) -> gym.Env | None:
        """The gym env (made on the first ``reset``), for experts and inspection; a property
        so that TRL, which turns public methods into tools, does not offer it to the model."""
        return self._env

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
            return EPISODE_OVER
        observation, reward, terminated, truncated, info = self._env.step(action)
        self._reward += float(reward)
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


def _admissible(info: dict[str, Any]) -> str:
    """The prompts' listing of the admissible actions, as a paragraph after an observation."""
    block = admissible_block(info.get("admissible_actions") or None)
    return "\n\n" + block.rstrip("\n") if block else ""
