"""Trajectory files: one JSONL per episode, complete or absent, never half-written."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

from aem_envs.wrappers import LLMActionWrapper, TrajectoryRecorder, read_trajectory
from tests.fixtures.corridor import FIXTURE_ID, CorridorEnv, register_fixture


def test_finished_episode_is_written_whole(tmp_path: Path) -> None:
    env = TrajectoryRecorder(CorridorEnv(), tmp_path)
    env.reset(seed=0)
    actions = []
    done = False
    while not done:
        action = env.unwrapped.expert_action()
        actions.append(action)
        _, _, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
    rows = read_trajectory(env.last_path)
    assert [r["kind"] for r in rows] == ["episode"] + ["step"] * len(actions) + ["end"]
    assert [r["action"] for r in rows[1:-1]] == actions
    assert rows[0]["seed"] == 0 and rows[-1]["finished"] and rows[-1]["won"]
    assert rows[-1]["return"] == 10.0
    assert not list(tmp_path.glob(".*.tmp"))


def test_unfinished_episode_is_flushed_on_reset_and_close(tmp_path: Path) -> None:
    env = TrajectoryRecorder(CorridorEnv(), tmp_path)
    env.reset(seed=1)
    env.step("look")
    assert list(tmp_path.glob("*.jsonl")) == []  # nothing visible mid-episode
    env.reset(seed=2)
    first = read_trajectory(env.last_path)
    assert first[-1]["finished"] is False and first[-1]["length"] == 1
    env.close()
    assert len(list(tmp_path.glob("*.jsonl"))) == 2


def test_trajectory_files_get_the_usual_permissions(tmp_path: Path) -> None:
    import os
    import stat

    env = TrajectoryRecorder(CorridorEnv(), tmp_path)
    env.reset(seed=0)
    env.close()
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(env.last_path.stat().st_mode) == 0o666 & ~mask


def test_recorder_inside_the_reply_wrapper_sees_rejected_replies(tmp_path: Path) -> None:
    recorder = TrajectoryRecorder(CorridorEnv(), tmp_path)
    env = LLMActionWrapper(recorder)
    env.reset(seed=0)
    _, reward, _, _, info = env.step("no action in this reply")
    env.step("<action>look</action>")
    env.close()
    _, rejected, looked, _ = read_trajectory(recorder.last_path)
    assert rejected["action"] is None and "no <action>" in rejected["rejected"]
    assert rejected["reward"] == reward == pytest.approx(-0.1)
    assert rejected["info"]["action_valid"] is False and not info["action_valid"]
    assert looked["action"] == "look" and "rejected" not in looked


def test_recorder_records_its_constructor_arguments(tmp_path: Path) -> None:
    register_fixture()
    env = TrajectoryRecorder(gym.make(FIXTURE_ID), tmp_path, episode_prefix="run-")
    recorded = env.spec.additional_wrappers[-1]
    assert recorded.name == "TrajectoryRecorder"
    assert recorded.kwargs == {
        "directory": tmp_path,
        "episode_prefix": "run-",
        "write_on_end": True,
    }
    again = gym.make(env.spec)  # the spec rebuilds the same wrapper stack
    assert isinstance(again, TrajectoryRecorder) and again.episode_prefix == "run-"
    again.close()
    env.close()


def test_a_caller_names_the_file_adds_fields_and_writes_the_end_itself(tmp_path: Path) -> None:
    """What the benchmark runner needs: a file name it can find again, the raw reply beside
    the parsed action, and an end row written after its own last measurement."""
    recorder = TrajectoryRecorder(CorridorEnv(), tmp_path, write_on_end=False)
    env = LLMActionWrapper(recorder)
    recorder.next_episode("policy/task__seed0", task="corridor")
    env.reset(seed=0)
    done = False
    while not done:
        reply = f"<action>{env.unwrapped.expert_action()}</action>"
        recorder.next_step(reply=reply, completion_tokens=3)
        _, _, terminated, truncated, _ = env.step(reply)
        done = terminated or truncated
    assert not (tmp_path / "policy").exists()  # ended, but waits for finish
    path = recorder.finish(record={"seconds": 1.5})
    assert path == tmp_path / "policy" / "task__seed0.jsonl"
    rows = read_trajectory(path)
    assert rows[0]["episode_id"] == "policy/task__seed0" and rows[0]["task"] == "corridor"
    assert all(r["reply"] == f"<action>{r['action']}</action>" for r in rows[1:-1])
    assert all(r["completion_tokens"] == 3 for r in rows[1:-1])
    assert rows[-1]["finished"] and rows[-1]["won"] and rows[-1]["record"] == {"seconds": 1.5}
    assert recorder.finish() is None  # written once
    env.close()
    assert sorted(p.name for p in tmp_path.rglob("*.jsonl")) == ["task__seed0.jsonl"]


def test_finish_keeps_an_episode_whose_reset_failed(tmp_path: Path) -> None:
    class Broken(CorridorEnv):
        def _start(self, task_id, split):
            raise RuntimeError("engine down")

    recorder = TrajectoryRecorder(Broken(), tmp_path, write_on_end=False)
    recorder.next_episode("broken")
    with pytest.raises(RuntimeError):
        recorder.reset(seed=0)
    rows = read_trajectory(recorder.finish(finished=False, error="engine down"))
    assert rows == [
        {
            "kind": "end",
            "finished": False,
            "length": 0,
            "return": 0.0,
            "won": False,
            "score": 0.0,
            "error": "engine down",
        }
    ]
