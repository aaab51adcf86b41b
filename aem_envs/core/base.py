"""The environment contract, implemented once for every aem environment.

Subclasses describe a benchmark (which tasks exist, how an episode starts, what an action
does); :class:`TextEnv` turns that into Gymnasium semantics: text spaces, seeding, the
``info`` keys every id carries, the reward scheme, the step limit, the invalid-action path
that never raises, and pickling by replay. Keeping this in one place is what lets a trainer
treat ALFWorld, WebShop and SWE-bench alike.
"""

from __future__ import annotations

import copy
import difflib
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium.error import ResetNeeded

from aem_envs.core.errors import ArgumentError, EnvClosedError
from aem_envs.core.outcome import END_DONE, END_STEP_LIMIT, END_STEP_LIMIT_GRADED, Outcome, Task
from aem_envs.core.rewards import RewardScheme
from aem_envs.core.spaces import TextSpace


@dataclass
class _Episode:
    """Enough to rebuild an episode in another process: RNG state at reset, options, actions."""

    rng_state: dict[str, Any]
    options: dict[str, Any]
    actions: list[str] = field(default_factory=list)


TRAIN_SPLIT = "train"  #: the split agents train on; every other one is held out of training


class TextEnv(gym.Env[str, str]):
    """Base class of every aem environment (``gymnasium.Env[str, str]``).

    Subclasses implement :meth:`task_ids`, :meth:`_start`, :meth:`_act` and
    :meth:`_admissible`; optionally :meth:`expert_action` and :meth:`_grade_at_limit`.
    Constructor keywords common to all: ``reward_scheme`` (see :class:`RewardScheme`),
    ``max_steps`` (episode limit → ``truncated``; ``gym.make(..., max_episode_steps=N)``
    sets the same limit), ``render_mode`` (``"ansi"``/``"human"``).

    Episode semantics, the same for every id: ``reset()`` without a split uses
    :meth:`default_split` (the training split); a ``step`` after the episode ended executes
    nothing and repeats the final ``terminated`` / ``truncated`` flags and outcome (``won``,
    ``score``) with zero reward; ``reset`` or ``step`` after ``close()`` raises
    :class:`~aem_envs.core.errors.EnvClosedError`.
    """

    # An instance attribute in gymnasium.Env (a subclass may set its own), so no ClassVar.
    metadata: dict[str, Any] = {"render_modes": ["ansi", "human"], "render_fps": 4}  # noqa: RUF012
    #: Constructor arguments, recorded by ``__new__`` for pickling (``__reduce__``).
    _init_args: tuple[tuple[Any, ...], dict[str, Any]]
    #: Longest observation the env emits; longer text is clipped with a marker.
    max_observation_length: ClassVar[int] = 1 << 16
    #: Longest action accepted; longer strings are invalid actions (never an exception).
    max_action_length: ClassVar[int] = 1 << 13
    default_max_steps: ClassVar[int] = 50
    #: Splits in the order ``aem envs`` prints them.
    splits: ClassVar[tuple[str, ...]] = (TRAIN_SPLIT,)
    #: Words shaped like this env's commands, for readable random samples of the action space.
    action_vocabulary: ClassVar[Sequence[str] | None] = None

    def __new__(cls, *args: Any, **kwargs: Any) -> TextEnv:
        self = super().__new__(cls)
        # Shallow on purpose: arguments may be large shared objects (a 100k-product catalog).
        self._init_args = (args, dict(kwargs))
        return self

    def __init__(
        self,
        *,
        reward_scheme: RewardScheme | dict[str, Any] | str | None = None,
        max_steps: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode={render_mode!r} is not supported; choose one of "
                f"{self.metadata['render_modes']}"
            )
        self.render_mode = render_mode
        self.reward_scheme = RewardScheme.coerce(reward_scheme)
        self._max_steps_given = max_steps is not None
        self.max_steps = self._checked_limit("max_steps", max_steps)
        self.observation_space = TextSpace(self.max_observation_length)
        self.action_space = (
            TextSpace(self.max_action_length, vocabulary=self.action_vocabulary)
            if self.action_vocabulary
            else TextSpace(self.max_action_length)
        )
        self.task: Task | None = None
        self._episode: _Episode | None = None
        self._steps = 0
        self._done = False
        self._end_flags = (False, False)
        self._closed = False
        self._last_observation = ""
        self._last_info: dict[str, Any] = {}

    # ------------------------------------------------------------------ subclass hooks
    def task_ids(self, split: str) -> Sequence[str]:
        """Ids of the tasks in ``split`` (stable order: seeding picks by index)."""
        raise NotImplementedError

    def _start(self, task_id: str, split: str) -> tuple[Task, str]:
        """Begin an episode on ``task_id``; return the task and the first observation."""
        raise NotImplementedError

    def _act(self, action: str) -> Outcome:
        """Execute one action; an action that cannot run returns ``Outcome(valid=False)``."""
        raise NotImplementedError

    def _admissible(self) -> list[str] | None:
        """Actions valid now, or ``None`` where the action space is open (e.g. a shell)."""
        return None

    def _grade_at_limit(self) -> Outcome | None:
        """Called when the step limit ends an episode that did not finish; may grade it."""
        return None

    def expert_action(self) -> str:
        """The next action of this env's expert for the current episode."""
        raise NotImplementedError(f"{type(self).__name__} has no expert")

    @classmethod
    def default_split(cls) -> str:
        """The split ``reset()`` draws from without a ``split`` option: ``train`` where the
        env has one (an agent trains on it), else the env's only or first split."""
        return TRAIN_SPLIT if TRAIN_SPLIT in cls.splits else cls.splits[0]

    @classmethod
    def task_set_summary(cls) -> dict[str, dict[str, int]]:
        """Bundled task counts, split → task type → count, for ``aem envs``.

        Must not start an engine or import optional dependencies: it is read to list envs.
        """
        return {}

    # ------------------------------------------------------------------ Gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        self._check_open("reset")
        if options is not None and not isinstance(options, Mapping):
            raise ArgumentError(
                f"reset options must be a dict, got {type(options).__name__} {options!r:.60}; "
                f"pass e.g. options={{'split': {self.default_split()!r}}}"
            )
        super().reset(seed=seed)
        options = dict(options or {})
        self._episode = _Episode(copy.deepcopy(dict(self.np_random.bit_generator.state)), options)
        return self._begin(options)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._check_open("step")
        if self._episode is None:
            raise ResetNeeded("call reset() before step()")
        self._episode.actions.append(action if isinstance(action, str) else repr(action))
        if self._done:
            return self._after_end()
        if not isinstance(action, str):
            outcome = Outcome(
                f"Invalid action: expected a string, got {type(action).__name__}.", valid=False
            )
        elif len(action) > self.max_action_length:
            outcome = Outcome(
                f"Invalid action: {len(action)} characters is longer than the "
                f"{self.max_action_length} allowed.",
                valid=False,
            )
        else:
            outcome = self._act(action)
        return self._advance(outcome)

    def reject(self, reason: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Take a step that does nothing but say ``reason`` (e.g. a reply without an action).

        Why public: wrappers that parse LLM replies need the invalid-action path (penalty,
        step count, limit) without inventing an action string the env might accept.
        """
        self._check_open("step")
        if self._episode is None:
            raise ResetNeeded("call reset() before step()")
        self._episode.actions.append(_Rejection(reason))
        if self._done:
            return self._after_end()
        return self._advance(Outcome(reason, valid=False))

    def close(self) -> None:
        """Release the env; subclasses free their engines first, then call this."""
        self._closed = True
        super().close()

    def adopt_step_limit(self, limit: int) -> None:
        """Take ``gym.make``'s ``max_episode_steps`` as this env's own step limit.

        Why: the env ends episodes itself (SWE grades at the limit), so a larger limit in a
        ``TimeLimit`` above it would never be reached; one limit, given either way, holds.
        The constructor arguments are updated too, so a pickled copy keeps the limit.
        """
        limit = self._checked_limit("max_episode_steps", limit)
        if self._max_steps_given and limit != self.max_steps:
            raise ArgumentError(
                f"max_steps={self.max_steps} and max_episode_steps={limit} disagree; "
                "give only one of them"
            )
        self.max_steps = limit
        self._init_args[1]["max_steps"] = limit

    def render(self) -> str | None:
        if self.render_mode == "human":
            print(self._last_observation)
            return None
        return self._last_observation

    @property
    def admissible_actions(self) -> list[str] | None:
        return None if self._done else self._admissible()

    # ------------------------------------------------------------------ internals
    @property
    def env_id(self) -> str:
        """The id this env was made under (for messages): its spec's, else its table entry's."""
        if self.spec is not None:
            return self.spec.id
        from aem_envs.registration import ENTRIES

        name = f"{type(self).__module__}:{type(self).__name__}"
        return next((e.id for e in ENTRIES if e.entry_point == name), type(self).__name__)

    def _check_open(self, method: str) -> None:
        if self._closed:
            make_id = f"aem_envs:{self.env_id}" if self.env_id.startswith("aem/") else self.env_id
            raise EnvClosedError(
                f"{method}() on a closed {self.env_id} env; make a new one with "
                f"gym.make({make_id!r})"
            )

    def _checked_limit(self, name: str, value: Any) -> int:
        if value is None:
            return self.default_max_steps
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ArgumentError(
                f"{name}={value!r} is not a whole number of steps; pass a positive int, "
                f"e.g. {name}={self.default_max_steps}"
            )
        if value < 1:
            raise ArgumentError(f"{name}={value} must be at least 1 step; pass a positive int")
        return int(value)

    def _begin(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        supported = ["task_id", "split", *self._extra_reset_options()]
        unknown = sorted(set(options) - set(supported), key=str)
        if unknown:
            raise ArgumentError(
                f"unknown reset option(s) {unknown}; supported: {', '.join(supported)}"
            )
        split = options.get("split", self.default_split())
        if split not in self.splits:
            raise ArgumentError(
                f"split={split!r} does not exist; choose one of {list(self.splits)}"
            )
        ids = self.task_ids(split)
        if "task_id" in options:
            task_id = str(options["task_id"])
            if task_id not in ids:
                raise ArgumentError(self._unknown_task_message(task_id, split, ids))
        else:
            if not ids:
                raise ArgumentError(
                    f"split {split!r} has no tasks; choose one of {list(self.splits)}"
                )
            task_id = ids[int(self.np_random.integers(len(ids)))]
        self._steps = 0
        self._done = False
        self._end_flags = (False, False)
        self.task, observation = self._start(task_id, split)
        self._last_observation = self._clip(observation)
        self._last_info = self._info(Outcome(observation))
        return self._last_observation, dict(self._last_info)

    def _unknown_task_message(self, task_id: str, split: str, ids: Sequence[str]) -> str:
        """One line: where the task is if it is in another split, else the command listing ids."""
        for other in self.splits:
            if other != split and task_id in self.task_ids(other):
                return (
                    f"task_id={task_id!r} is in split {other!r}, not {split!r}; pass "
                    f"options={{'split': {other!r}, 'task_id': {task_id!r}}}"
                )
        close = difflib.get_close_matches(task_id, list(ids), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return (
            f"task_id={task_id!r} is not in split {split!r}{hint}; list its {len(ids)} ids "
            f"with `aem envs {self.env_id} --tasks --split {split}`"
        )

    def _after_end(self) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """A step once the episode is over: nothing runs, the final flags and outcome stay.

        Why not ``ResetNeeded``: batched rollouts step every env of a group in lockstep, and
        one that finished early must keep reporting how it finished, worth no more reward.
        """
        terminated, truncated = self._end_flags
        info = {**self._last_info, "action_valid": False, "admissible_actions": None}
        message = "The episode is over; call reset() to start a new one."
        return message, 0.0, terminated, truncated, info

    def _extra_reset_options(self) -> Sequence[str]:
        """Reset options a subclass understands beyond ``task_id`` and ``split``."""
        return ()

    def _advance(self, outcome: Outcome) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._steps += 1
        terminated = outcome.done
        truncated = False
        reason = END_DONE if terminated else None
        if not terminated and outcome.infra_error is None and self._steps >= self.max_steps:
            truncated, reason = True, END_STEP_LIMIT
            graded = self._grade_at_limit()
            if graded is not None:
                graded.observation = outcome.observation + "\n" + graded.observation
                graded.valid = outcome.valid
                graded.info = {**outcome.info, **graded.info}
                outcome = graded
                # Graded: the outcome is final (nothing follows, no value to bootstrap), and
                # the limit is what ended it, so both flags hold.
                terminated, reason = True, END_STEP_LIMIT_GRADED
        if outcome.infra_error is not None:  # cut short by the machinery: no outcome at all
            terminated, truncated, reason = False, True, None  # the Outcome names the end
        if reason is not None:
            outcome.info = {**outcome.info, "end_reason": reason}
        reward = self.reward_scheme.reward(
            valid=outcome.valid, done=terminated, won=outcome.won, score=outcome.score
        )
        self._done = terminated or truncated
        self._end_flags = (terminated, truncated)
        self._last_observation = self._clip(outcome.observation)
        self._last_info = self._info(outcome)
        return self._last_observation, float(reward), terminated, truncated, dict(self._last_info)

    def _info(self, outcome: Outcome) -> dict[str, Any]:
        assert self.task is not None
        return {
            **outcome.info,
            "task_id": self.task.task_id,
            "task_type": self.task.task_type,
            "instruction": self.task.instruction,
            "won": bool(outcome.won),
            "score": float(outcome.score),
            "action_valid": bool(outcome.valid),
            "admissible_actions": self.admissible_actions,
            "step": self._steps,
        }

    def _clip(self, text: str) -> str:
        limit = self.max_observation_length
        if len(text) <= limit:
            return text
        marker = f"\n[... {len(text) - limit} characters clipped ...]\n"
        head = (limit - len(marker)) // 2
        tail = limit - len(marker) - head
        return text[:head] + marker + text[len(text) - tail :]

    # ------------------------------------------------------------------ pickling by replay
    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as constructor arguments plus the episode so far, rebuilt by replay.

        Why: environments hold engines, browsers and containers that cannot be pickled;
        replaying the same seed state and actions rebuilds an equal env in any process.
        """
        args, kwargs = self._init_args
        return (_rebuild, (type(self), args, kwargs, copy.deepcopy(self._episode)))


class _Rejection(str):
    """An entry in the action log that stands for :meth:`TextEnv.reject`, not a real action."""


def _rebuild(cls: type[TextEnv], args: tuple, kwargs: dict, episode: _Episode | None) -> TextEnv:
    env = cls(*args, **kwargs)
    if episode is None:
        return env
    env.np_random = np.random.Generator(np.random.PCG64())
    env.np_random.bit_generator.state = copy.deepcopy(episode.rng_state)
    env._episode = _Episode(episode.rng_state, episode.options)
    env._begin(dict(episode.options))
    for action in episode.actions:
        if isinstance(action, _Rejection):
            env.reject(str(action))
        else:
            env.step(action)
    return env
