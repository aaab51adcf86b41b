"""Record every episode as one JSON Lines file, written atomically.

Layout: ``<directory>/<episode_id>.jsonl``. Line 1 is a header (``kind="episode"``: env id,
seed, reset options, task), then one line per step (``kind="step"``: action, observation,
reward, terminated, truncated, info; a reply the env rejected through ``reject`` has
``action: null`` and the reason in ``rejected``), then a footer (``kind="end"``: return,
length, won, score, finished). The file appears only when the episode ends (or the env
closes with an unfinished episode, flagged ``finished: false``), by rename from a temporary
file, so a killed run never leaves a half-written trajectory — a reader either sees the
whole episode or none of it.
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
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, directory=directory, episode_prefix=episode_prefix
        )
        gym.Wrapper.__init__(self, env)
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.episode_prefix = episode_prefix
        self._rows: list[dict[str, Any]] = []
        self._path: Path | None = None
        self._return = 0.0
        self.last_path: Path | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        self._flush(finished=False)
        obs, info = self.env.reset(seed=seed, options=options)
        episode_id = f"{self.episode_prefix}{uuid.uuid4().hex[:12]}"
        self._path = self.directory / f"{episode_id}.jsonl"
        spec_id = (
            self.env.spec.id if self.env.spec is not None else type(self.env.unwrapped).__name__
        )
        self._return = 0.0
        self._rows = [
            {
                "kind": "episode",
                "episode_id": episode_id,
                "env_id": spec_id,
                "seed": seed,
                "options": jsonable(options or {}),
                "observation": obs,
                "info": jsonable(info),
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
        self._rows.append(
            {
                "kind": "step",
                **row,
                "observation": obs,
                "reward": float(reward),
                "terminated": bool(terminated),
                "truncated": bool(truncated),
                "info": jsonable(info),
            }
        )
        if terminated or truncated:
            self._flush(finished=True)
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        self._flush(finished=False)
        super().close()

    def _flush(self, *, finished: bool) -> None:
        if self._path is None or not self._rows:
            return
        last_info = self._rows[-1].get("info", {})
        self._rows.append(
            {
                "kind": "end",
                "finished": finished,
                "length": len(self._rows) - 1,
                "return": self._return,
                "won": bool(last_info.get("won", False)),
                "score": float(last_info.get("score", 0.0)),
            }
        )
        self.last_path = atomic_write_jsonl(self._path, self._rows)
        self._rows, self._path = [], None


def read_trajectory(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Rows of a trajectory file written by :class:`TrajectoryRecorder`."""
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
