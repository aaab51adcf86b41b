"""aem/SWE-v0 through its own actions: the expert, the editor's confinement, the grammar."""

from __future__ import annotations

import json
import os
from pathlib import Path

import gymnasium as gym
import pytest

from aem_envs.swe.env import SWEEnv
from aem_envs.swe.tasks import DATA_DIR, read_bundled_rows

IDS = sorted(row["instance_id"] for row in read_bundled_rows())


def edit(**args) -> str:
    return "edit " + json.dumps(args)


@pytest.fixture(scope="module")
def env():
    environment = SWEEnv(max_steps=30)
    yield environment
    environment.close()


@pytest.fixture
def fresh(env):
    env.reset(seed=0, options={"task_id": IDS[0]})
    return env


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("task_id", IDS)
def test_expert_resolves_through_the_env_actions(env, task_id):
    env.reset(options={"task_id": task_id})
    for _ in range(5):
        _, reward, terminated, truncated, info = env.step(env.expert_action())
        assert info["action_valid"]
        if terminated:
            break
    assert terminated and info["won"] and info["score"] == 1.0 and reward > 0
    assert info["report"]["resolved"] is True
    assert env._sandbox is None  # the agent's container is gone once the episode ends


@pytest.mark.bwrap
@pytest.mark.parametrize(
    "task_id", [IDS[0], *(pytest.param(i, marks=pytest.mark.slow) for i in IDS[1:])]
)
def test_expert_resolves_on_the_bubblewrap_backend(task_id):
    """Hosts without a Docker engine run the same tasks in bubblewrap over a built rootfs."""
    environment = SWEEnv(max_steps=10, backend="bwrap")
    try:
        environment.reset(options={"task_id": task_id})
        for _ in range(5):
            _, _, terminated, _, info = environment.step(environment.expert_action())
            if terminated:
                break
        assert terminated and info["won"] and info["report"]["resolved"] is True
    finally:
        environment.close()


@pytest.mark.docker
def test_bash_observation_has_exit_code_and_output(fresh):
    obs, _, terminated, _, info = fresh.step("bash: echo hello; exit 3")
    assert obs.startswith("exit code: 3") and "hello" in obs
    assert info["action_valid"] and not terminated and info["admissible_actions"] is None
    obs, *_ = fresh.step("git rev-parse --show-toplevel")
    assert "/testbed" in obs


@pytest.mark.docker
@pytest.mark.parametrize(
    "path", ["../../etc/passwd", "/etc/passwd", "/testbed/../etc/passwd", ".git/config"]
)
def test_editor_refuses_paths_outside_the_repository(fresh, path):
    obs, _, _, _, info = fresh.step(edit(command="view", path=path))
    assert not info["action_valid"] and "root:" not in obs
    obs, _, _, _, info = fresh.step(edit(command="create", path=path, file_text="x"))
    assert not info["action_valid"]


@pytest.mark.docker
def test_editor_refuses_symlinks_pointing_out(fresh):
    fresh.step("bash: ln -s /etc escape && ln -s /etc/passwd pw")
    for path in ("escape/passwd", "pw"):
        obs, _, _, _, info = fresh.step(edit(command="view", path=path))
        assert not info["action_valid"] and "root:" not in obs
    _, _, _, _, info = fresh.step(edit(command="create", path="escape/evil", file_text="x"))
    assert not info["action_valid"]
    obs, *_ = fresh.step("bash: ls /etc/evil; echo done")
    assert "No such file" in obs


@pytest.mark.docker
def test_editor_view_create_replace_insert(fresh):
    obs, _, _, _, info = fresh.step(
        edit(command="create", path="notes/a.txt", file_text="one\ntwo\n")
    )
    assert info["action_valid"] and obs.startswith("exit code: 0")
    fresh.step(edit(command="str_replace", path="notes/a.txt", old_str="two", new_str="2"))
    fresh.step(edit(command="insert", path="notes/a.txt", insert_line=1, new_str="1.5"))
    obs, *_ = fresh.step(edit(command="view", path="notes/a.txt", view_range=[1, 3]))
    assert obs.split("\n")[1:] == ["     1\tone", "     2\t1.5", "     3\t2"]
    obs, _, _, _, info = fresh.step(edit(command="str_replace", path="notes/a.txt", old_str="zz"))
    assert info["action_valid"] and obs.startswith("exit code: 1")


@pytest.mark.docker
@pytest.mark.parametrize("action", ["", "   ", "edit not json", 'edit {"command": "rm"}', "bash:"])
def test_malformed_actions_are_invalid(fresh, action):
    _, _, terminated, _, info = fresh.step(action)
    assert not info["action_valid"] and not terminated


@pytest.mark.docker
def test_step_limit_of_gym_make_grades_the_working_tree_and_releases_the_container():
    """``max_episode_steps`` ends the episode at the env's own limit: graded (terminated, the
    reward is final), cut by the limit (truncated), and the sandbox is gone at once."""
    from sandboxes.docker_engine import client_session

    environment = gym.make("aem_envs:aem/SWE-v0", max_episode_steps=2, backend="docker")
    try:
        environment.reset(options={"task_id": IDS[0]})
        container = environment.unwrapped._sandbox.container_id
        _, _, terminated, truncated, _ = environment.step("ls")
        assert not (terminated or truncated)
        _, _, terminated, truncated, info = environment.step("ls")
        assert terminated and truncated and info["end_reason"] == "step_limit_graded"
        assert info["report"]["resolved"] is False and info["score"] == 0.0
        assert environment.unwrapped._sandbox is None
        with client_session() as client:
            assert not client.containers.list(all=True, filters={"id": container})
    finally:
        environment.close()


def test_limits_are_settings_checked_at_construction():
    env = SWEEnv(memory="1g", cpus=0.5, pids=64, command_timeout=5)
    assert (env.limits.memory, env.limits.cpus, env.limits.pids) == ("1g", 0.5, 64)
    assert env.limits.command_timeout == 5.0
    with pytest.raises(ValueError, match="pids=8 is too small"):
        SWEEnv(pids=8)
    with pytest.raises(ValueError, match="memory"):
        SWEEnv(memory="lots")


def test_grading_sandbox_gets_the_env_limits(monkeypatch):
    """The grading sandbox is bounded like the episode's: memory, CPUs and processes."""
    import sandboxes
    from aem_envs.swe import grading

    opened = []

    class Stop(Exception):
        pass

    def record(image, *, backend, limits, **kwargs):
        opened.append(limits)
        raise Stop

    monkeypatch.setattr(sandboxes, "open_sandbox", record)
    env = SWEEnv(memory="1g", cpus=0.5, pids=64)
    instance = env.instances()[IDS[0]]
    with pytest.raises(Stop):
        grading.evaluate(instance, "", "no-image", limits=env.limits, timeout=30)
    (limits,) = opened
    assert (limits.memory, limits.cpus, limits.pids) == ("1g", 0.5, 64)
    assert limits.command_timeout == 30 and limits.output_chars == grading.LOG_CHARS


@pytest.mark.docker
def test_external_jsonl_instance_grades_through_gym_make(tmp_path: Path):
    row = read_bundled_rows()[-1]
    dataset = tmp_path / "external.jsonl"
    dataset.write_text(json.dumps(row) + "\n")
    bundles = tmp_path / "bundles"
    bundles.mkdir()
    name = f"{row['repo'].replace('/', '__')}.bundle"
    (bundles / name).write_bytes((DATA_DIR / name).read_bytes())
    environment = gym.make("aem_envs:aem/SWE-v0", dataset=str(dataset), bundles_dir=str(bundles))
    try:
        _, info = environment.reset(seed=1)
        assert info["task_id"] == row["instance_id"]
        while True:
            _, _, terminated, truncated, info = environment.step(
                environment.unwrapped.expert_action()
            )
            if terminated or truncated:
                break
        assert info["won"]
    finally:
        environment.close()


def _own_containers() -> set[str]:
    """Ids of this process's sandbox containers on the engine (running or not); other tests'
    envs may hold some, so a test compares the set after an episode with the set before."""
    from sandboxes.docker_engine import client_session
    from sandboxes.owner import LABEL_PREFIX

    with client_session() as client:
        label = f"{LABEL_PREFIX}.owner.pid={os.getpid()}"
        return {c.id for c in client.containers.list(all=True, filters={"label": label})}


def _assert_infra_end(step: tuple, kind: str) -> None:
    _, reward, terminated, truncated, info = step
    assert info["infra_error"]["kind"] == kind, info.get("infra_error")
    assert info["infra_error"]["message"]
    assert (reward, terminated, truncated, info["end_reason"]) == (0.0, False, True, "infra_error")
    assert not info["won"]


@pytest.mark.docker
def test_a_container_that_vanishes_mid_episode_ends_it_as_an_infra_error(docker_engine):
    from sandboxes.docker_engine import client_session

    before = _own_containers()
    environment = SWEEnv(backend="docker", max_steps=10)
    try:
        environment.reset(options={"task_id": IDS[0]})
        with client_session() as client:  # as the host's OOM killer or an operator would
            client.api.remove_container(environment._sandbox.container_id, force=True)
        _assert_infra_end(environment.step("bash: ls"), "container")
        assert environment._sandbox is None and _own_containers() <= before
        environment.reset(options={"task_id": IDS[0]})  # the next episode starts afresh
        _, _, _, _, info = environment.step("bash: true")
        assert "infra_error" not in info and info["action_valid"]
    finally:
        environment.close()
    assert _own_containers() <= before


@pytest.mark.docker
def test_engine_errors_are_retried_then_reported_not_raised(docker_engine, monkeypatch):
    """The engine stops answering mid-episode (injected where the sandbox calls it): each call
    is tried three times, then the episode ends with ``infra_error``; nothing is raised."""
    import requests
    from docker.api.exec_api import ExecApiMixin

    from sandboxes import docker_engine as engine

    before = _own_containers()
    environment = SWEEnv(backend="docker", max_steps=10)
    try:
        environment.reset(options={"task_id": IDS[0]})
        tries = []

        def refused(self, *args, **kwargs):
            tries.append(1)
            raise requests.exceptions.ConnectionError("connection refused")

        monkeypatch.setattr(engine, "RETRY_DELAYS", (0.0, 0.0))
        monkeypatch.setattr(ExecApiMixin, "exec_create", refused)
        _assert_infra_end(environment.step("submit"), "engine")
        assert len(tries) == 3
        monkeypatch.undo()
        assert environment._sandbox is None and _own_containers() <= before
    finally:
        environment.close()


@pytest.mark.docker
def test_a_missing_image_is_an_infra_error_at_reset(docker_engine):
    environment = SWEEnv(backend="docker", max_steps=10)
    try:
        environment._images[IDS[0]] = "aem-sandbox/instance:absent"
        _, info = environment.reset(options={"task_id": IDS[0]})
        assert info["infra_error"]["kind"] == "image"
        _assert_infra_end(environment.step("bash: ls"), "image")
    finally:
        environment.close()


@pytest.mark.parametrize("backend", [pytest.param("docker", marks=pytest.mark.docker), "bwrap"])
def test_grading_past_its_time_limit_is_an_infra_error(backend, request):
    request.getfixturevalue("docker_engine" if backend == "docker" else "bubblewrap")
    before = _own_containers() if backend == "docker" else set()
    # 10 ms: no grading (git apply, then a Python test run) ends that fast; at 0.2 s one
    # bubblewrap grading in about eight did, and the episode was graded.
    environment = SWEEnv(backend=backend, max_steps=10, eval_timeout=0.01)
    try:
        environment.reset(options={"task_id": IDS[0]})
        _assert_infra_end(environment.step("submit"), "timeout")
    finally:
        environment.close()
    if backend == "docker":
        assert _own_containers() <= before
