"""Record every episode as one JSON Lines file, written atomically.

Layout: ``<directory>/<episode_id>.jsonl``. Line 1 is a header (``kind="episode"``: env id,
seed, reset options, task), then one line per step (``kind="step"``: action, observation,
reward, terminated, truncated, info; a reply the env rejected through ``reject`` has
``action: null`` and the reason in ``rejected``), then a footer (``kind="end"``: return,
length, won, score, finished). The file appears only when the episode ends (or the env
closes with an unfinished episode, flagged ``finished: false``), by rename from a temporary
file, so a killed run never leaves a half-written trajectory — a reader either sees the
whole episode or none of it.

A caller that knows more than the env adds it to the same rows: :meth:`~TrajectoryRecorder.
next_episode` names the next episode's file and adds header fields, :meth:`~TrajectoryRecorder.
next_step` adds fields to the next step's row (a model's raw reply, its token counts), and
with ``write_on_end=False`` the caller writes the episode itself by
:meth:`~TrajectoryRecorder.finish`, with fields for the end row (timings measured after the
last step). The benchmark runner (``benchmarks/episodes.py``) records every episode this way.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym

from aem_envs.core.io import atomic_write_jsonl, jsonable


class TrajectoryRecorder(gym.Wrapper[str, str, str, str], gym.utils.RecordConstructorArgs):
    """Writes one ``.jsonl`` file per episode into ``directory``.

    It forwards ``reject`` (the invalid-action path of :class:`aem_envs.TextEnv`) and records
    that step too, so placed inside :class:`~aem_envs.wrappers.LLMActionWrapper` it sees the
    parsed actions and every rejected reply.

    Example::

        >>> import tempfile
        >>> import gymnasium as gym
        >>> import aem_envs
        >>> from aem_envs.wrappers import LLMActionWrapper, TrajectoryRecorder, read_trajectory
        >>> recorder = TrajectoryRecorder(gym.make("aem_envs:aem/ALFWorld-v0"), tempfile.mkdtemp())
        >>> env = LLMActionWrapper(recorder)
        >>> _ = env.reset(seed=0)
        >>> _ = env.step("no action here")
        >>> env.close()
        >>> [row["kind"] for row in read_trajectory(recorder.last_path)]
        ['episode', 'step', 'end']
    """

    def __init__(
        self,
        env: gym.Env[str, str],
        directory: str | os.PathLike[str],
        *,
        episode_prefix: str = "",
        write_on_end: bool = True,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, directory=directory, episode_prefix=episode_prefix, write_on_end=write_on_end
        )
        gym.Wrapper.__init__(self, env)
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.episode_prefix = episode_prefix
        #: False: an ended episode waits for :meth:`finish` (reset and close still write it).
        self.write_on_end = write_on_end
        self._rows: list[dict[str, Any]] = []
        self._path: Path | None = None
        self._return = 0.0
        self._ended = False
        self._next_id: str | None = None
        self._header_fields: dict[str, Any] = {}
        self._step_fields: dict[str, Any] = {}
        self.last_path: Path | None = None

    def next_episode(self, episode_id: str | None = None, **fields: Any) -> None:
        """Name the next episode ``episode_id`` (its file ``<directory>/<episode_id>.jsonl``;
        ``/`` makes sub-folders) instead of a random id, and add ``fields`` to its header row.

        Why: a caller that resumes by file (is this episode's file there and finished?) needs
        a name it can compute before playing. Fields replace recorder fields of the same name.
        """
        self._next_id = episode_id
        self._header_fields = jsonable(fields)

    def next_step(self, **fields: Any) -> None:
        """Add ``fields`` to the next step's row (e.g. the raw reply the action was parsed
        from, which only the caller above :class:`~aem_envs.wrappers.LLMActionWrapper` has)."""
        self._step_fields = jsonable(fields)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        self._flush(finished=self._ended)
        episode_id = self._next_id or f"{self.episode_prefix}{uuid.uuid4().hex[:12]}"
        header, self._next_id, self._header_fields = self._header_fields, None, {}
        # The path is set before the env resets, so an episode whose reset fails can still
        # be written (by finish) with its error.
        self._path = self.directory / f"{episode_id}.jsonl"
        self._rows, self._return, self._ended, self._step_fields = [], 0.0, False, {}
        obs, info = self.env.reset(seed=seed, options=options)
        spec_id = (
            self.env.spec.id if self.env.spec is not None else type(self.env.unwrapped).__name__
        )
        self._rows = [
            {
                "kind": "episode",
                "episode_id": episode_id,
                "env_id": spec_id,
                "seed": seed,
                "options": jsonable(options or {}),
                "observation": obs,
                "info": jsonable(info),
                **header,
            }
        ]
        return obs, info

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        result = self.env.step(action)
        shown = action if isinstance(action, str) else repr(action)
        return self._record({"action": shown}, *result)

    def reject(self, reason: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        """The env's invalid-action step for ``reason``, recorded with ``action: null``."""
        result = self.env.get_wrapper_attr("reject")(reason)
        return self._record({"action": None, "rejected": reason}, *result)

    def _record(
        self,
        row: dict[str, Any],
        obs: str,
        reward: SupportsFloat,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any],
    ) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        self._return += float(reward)
        fields, self._step_fields = self._step_fields, {}
        self._rows.append(
            {
                "kind": "step",
                **row,
                **fields,
                "observation": obs,
                "reward": float(reward),
                "terminated": bool(terminated),
                "truncated": bool(truncated),
                "info": jsonable(info),
            }
        )
        self._ended = bool(terminated or truncated)
        if self._ended and self.write_on_end:
            self._flush(finished=True)
        return obs, reward, terminated, truncated, info

    def finish(self, *, finished: bool | None = None, **fields: Any) -> Path | None:
        """Write the current episode now, with ``fields`` added to its end row; return its path.

        ``finished`` defaults to whether the episode ended. Also writes an episode whose reset
        failed (no header, no steps), so the caller can keep the error in the file. Nothing to
        write (no episode, or already written) returns None.
        """
        if self._path is None:
            return None
        done = self._ended if finished is None else finished
        return self._flush(finished=done, fields=jsonable(fields), empty=True)

    def close(self) -> None:
        self._flush(finished=self._ended)
        super().close()

    def _flush(
        self, *, finished: bool, fields: dict[str, Any] | None = None, empty: bool = False
    ) -> Path | None:
        if self._path is None or not (self._rows or empty):
            return None
        steps = [row for row in self._rows if row["kind"] == "step"]
        last_info = self._rows[-1].get("info", {}) if self._rows else {}
        self._rows.append(
            {
                "kind": "end",
                "finished": finished,
                "length": len(steps),
                "return": self._return,
                "won": bool(last_info.get("won", False)),
                "score": float(last_info.get("score", 0.0)),
                **(fields or {}),
            }
        )
        self.last_path = atomic_write_jsonl(self._path, self._rows)
        self._rows, self._path, self._ended = [], None, False
        return self.last_path


def read_trajectory(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Rows of a trajectory file written by :class:`TrajectoryRecorder`."""
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
