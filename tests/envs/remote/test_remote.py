"""``aem serve`` and ``aem/Remote-v0`` on loopback: same episodes, bounded load, no leaks."""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import psutil
import pytest
import requests
from websockets.sync.client import connect

from aem_cli.main import main
from aem_envs.core.errors import NO_DEPS_PACKAGES, ArgumentError
from aem_envs.core.io import jsonable
from aem_envs.remote.client import RemoteEnvError
from sandboxes.lifetime import is_keeper
from tests.envs.remote.served import serving
from tests.fixtures.processes import kill_when_started, left_after_grace, process_tree

ROOT = Path(__file__).resolve().parents[3]


def _remote(url: str) -> gym.Env[str, str]:
    return gym.make("aem_envs:aem/Remote-v0", url=url)


def _play(env: gym.Env[str, str], seed: int, actions: list[str]) -> list[tuple[Any, ...]]:
    """Every return of ``reset`` and of ``step`` per action, info made JSON."""
    obs, info = env.reset(seed=seed)
    out: list[tuple[Any, ...]] = [(obs, jsonable(info))]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        out.append((obs, reward, terminated, truncated, jsonable(info)))
    return out


def _expert_actions(env_id: str, seed: int) -> list[str]:
    """An invalid action, then the expert to the end, then one step past the end."""
    env = gym.make(f"aem_envs:{env_id}")
    try:
        env.reset(seed=seed)
        actions = ["xyzzy frobnicate"]
        env.step(actions[0])
        done = False
        while not done:
            actions.append(env.unwrapped.expert_action())
            _, _, terminated, truncated, _ = env.step(actions[-1])
            done = terminated or truncated
    finally:
        env.close()
    return [*actions, "look"]


@pytest.mark.parametrize(("env_id", "seed"), [("aem/ALFWorld-v0", 3), ("aem/WebShop-v0", 5)])
def test_an_episode_through_the_client_equals_the_local_one(env_id: str, seed: int) -> None:
    actions = _expert_actions(env_id, seed)
    local = gym.make(f"aem_envs:{env_id}")
    with serving(env_id) as served:
        remote = _remote(served.url)
        try:
            assert remote.unwrapped.remote_id == env_id
            assert remote.observation_space == local.observation_space
            assert remote.action_space == local.action_space
            assert remote.action_space.vocabulary == local.unwrapped.action_space.vocabulary
            ours, theirs = _play(remote, seed, actions), _play(local, seed, actions)
        finally:
            remote.close()
            local.close()
    assert ours == theirs
    last = ours[-2]
    assert last[2] is True and last[4]["won"] and last[1] > 0  # the expert won, really
    assert ours[1][4]["action_valid"] is False  # the invalid action went through as one


def test_32_sessions_x_50_steps_under_load_then_no_env_left(capsys) -> None:
    sessions, steps = 32, 50
    with serving("aem/ALFWorld-v0", max_sessions=sessions) as served:

        def play(seed: int) -> list[float]:
            env = _remote(served.url)
            rng = np.random.default_rng(seed)
            latencies = []
            try:
                _, info = env.reset(seed=seed)
                for _ in range(steps):
                    action = str(rng.choice(info["admissible_actions"] or ["look"]))
                    tic = time.perf_counter()
                    _, _, terminated, truncated, info = env.step(action)
                    latencies.append(time.perf_counter() - tic)
                    if terminated or truncated:
                        _, info = env.reset()
            finally:
                env.close()
            return latencies

        tic = time.perf_counter()
        with ThreadPoolExecutor(sessions) as pool:
            runs = list(pool.map(play, range(sessions)))
        wall = time.perf_counter() - tic
        left = served.wait_for_sessions(0)
    latencies = [x for run in runs for x in run]
    assert [len(run) for run in runs] == [steps] * sessions
    p50, p95 = (float(np.percentile(latencies, q)) * 1e3 for q in (50, 95))
    with capsys.disabled():
        print(
            f"\n{sessions} sessions x {steps} steps on aem/ALFWorld-v0: step p50 {p50:.1f} ms, "
            f"p95 {p95:.1f} ms, {len(latencies) / wall:.0f} steps/s overall "
            f"(mean {statistics.fmean(latencies) * 1e3:.1f} ms)"
        )
    assert left == 0
    assert served.made == served.closed == sessions


def test_closed_idle_and_open_at_shutdown_sessions_all_close_their_env() -> None:
    with serving("aem/ALFWorld-v0", max_sessions=4, idle_timeout=1.0) as served:
        closed_by_client = _remote(served.url)
        closed_by_client.reset(seed=0)
        idle = _remote(served.url)
        idle.reset(seed=1)
        assert served.sessions() == 2
        closed_by_client.close()
        # OpenEnv's reaper looks every max(timeout / 4, 5) s: the idle one goes within ~6 s.
        assert served.wait_for_sessions(0) == 0
        assert served.made == served.closed == 2
        with pytest.raises(RemoteEnvError, match="closed this aem/ALFWorld-v0 session"):
            idle.step("look")
        idle.close()
        open_at_shutdown = _remote(served.url)
        open_at_shutdown.reset(seed=2)
        assert served.closed == 2
    assert served.made == served.closed == 3
    open_at_shutdown.close()


def _children() -> set[int]:
    """This process's descendants, less the lifetime keeper: the first browser of the session
    starts it, and it lives as long as this process does, by design."""
    return {
        p.pid
        for p in psutil.Process().children(recursive=True)
        if p.is_running() and not is_keeper(p.pid)
    }


@pytest.mark.browser
def test_browser_sessions_leave_no_chromium_behind() -> None:
    before = _children()
    with serving("aem/WebShopBrowser-v0", max_sessions=2) as served:
        closed_by_client, open_at_shutdown = _remote(served.url), _remote(served.url)
        closed_by_client.reset(seed=0)
        open_at_shutdown.reset(seed=1)
        started = _children() - before
        assert started  # each session's chromium and chromedriver
        closed_by_client.close()
        assert served.wait_for_sessions(1) == 1
    assert served.made == served.closed == 2
    open_at_shutdown.close()
    assert not _children() & started


def test_sessions_beyond_the_cap_are_refused_with_the_reason() -> None:
    with serving("aem/ALFWorld-v0", max_sessions=1) as served:
        first = _remote(served.url)
        try:
            with pytest.raises(RemoteEnvError, match=r"at capacity: 1/1 .*CAPACITY_REACHED"):
                _remote(served.url)
        finally:
            first.close()
        assert served.wait_for_sessions(0) == 0
        second = _remote(served.url)  # the slot is free again
        second.close()
    assert served.made == served.closed == 2


def test_malformed_requests_get_a_4xx_or_an_error_message() -> None:
    with serving("aem/ALFWorld-v0") as served:
        url = served.url
        bad_json = requests.post(
            f"{url}/step", data="{not json", headers={"content-type": "application/json"}
        )
        assert bad_json.status_code == 422 and "JSON decode error" in bad_json.text
        wrong_type = requests.post(f"{url}/step", json={"action": {"text": 5}})
        assert wrong_type.status_code == 422 and "valid string" in wrong_type.text
        no_session = requests.post(f"{url}/step", json={"action": {"text": "look"}})
        assert no_session.status_code == 409 and "/ws" in no_session.json()["detail"]
        bad_option = requests.post(f"{url}/reset", json={"options": {"bogus": 1}})
        assert bad_option.status_code == 400
        assert "unknown reset option(s) ['bogus']" in bad_option.json()["detail"]
        assert requests.post(f"{url}/reset", json={"seed": -1}).status_code == 422
        assert requests.get(f"{url}/nowhere").status_code == 404

        # The session protocol answers every bad message with an error and stays usable.
        with connect(url.replace("http", "ws") + "/ws") as ws:
            replies = []
            for message in (
                "{not json",
                json.dumps({"type": "teleport"}),
                json.dumps({"type": "step", "data": {"text": 5}}),
                json.dumps({"type": "step", "data": {"text": "look"}}),  # before any reset
                json.dumps({"type": "reset", "data": {"seed": 0}}),
            ):
                ws.send(message)
                replies.append(json.loads(ws.recv()))
        codes = [r["data"].get("code") if r["type"] == "error" else r["type"] for r in replies]
        assert codes == [
            "INVALID_JSON",
            "UNKNOWN_TYPE",
            "VALIDATION_ERROR",
            "EXECUTION_ERROR",
            "observation",
        ]
        assert "Unknown message type: teleport" in replies[1]["data"]["message"]

        remote = _remote(url)
        try:
            remote.reset(seed=0)
            with pytest.raises(ArgumentError, match="takes str actions, got int"):
                remote.step(5)
        finally:
            remote.close()
        assert served.wait_for_sessions(0) == 0
    assert served.made == served.closed


def test_unreachable_server_is_one_line_naming_aem_serve() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(RemoteEnvError, match=r"cannot reach .* `aem serve ENV_ID --port PORT`"):
        _remote(f"http://127.0.0.1:{port}")


def test_serve_an_unknown_id_or_keyword_fails_in_one_line(capsys) -> None:
    assert main(["serve", "aem/Nope-v0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unknown environment id 'aem/Nope-v0'" in err
    assert "`aem envs`" in err
    assert main(["serve", "aem/ALFWorld-v0", "--env-kwargs", '{"bogus": 1}']) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unexpected keyword argument 'bogus'" in err


def _aem_serve(env_id: str) -> tuple[subprocess.Popen[str], str]:
    """``aem serve env_id`` on a free loopback port, once it answers; the process and URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "aem_cli", "serve", env_id, "--port", str(port)]
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
    )  # fmt: skip
    banner = proc.stdout.readline() if proc.stdout else ""
    assert f"{env_id} at ws://127.0.0.1:{port}/ws" in banner, banner
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            requests.get(f"{url}/health", timeout=5).raise_for_status()
            return proc, url
        except requests.ConnectionError:
            assert time.monotonic() < deadline and proc.poll() is None, proc.stdout.read()
            time.sleep(0.2)


def test_aem_serve_plays_and_stops_with_no_process_left() -> None:
    proc, url = _aem_serve("aem/ALFWorld-v0")
    try:
        env = _remote(url)
        env.reset(seed=0)
        _, _, _, _, info = env.step("look")
        assert info["step"] == 1
        tree = process_tree(proc.pid)
        proc.send_signal(signal.SIGINT)  # with the session still open
        assert proc.wait(timeout=60) == 0
        env.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert left_after_grace(tree) == []


@pytest.mark.browser
def test_sigkilled_aem_serve_leaves_no_browser_or_driver() -> None:
    proc, url = _aem_serve("aem/WebShopBrowser-v0")
    try:
        sessions = [_remote(url), _remote(url)]
        for seed, env in enumerate(sessions):
            env.reset(seed=seed)
        assert kill_when_started(proc, {"chromedriver", "chromium"}, timeout_s=10) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_install_script_installs_the_scale_extras_no_deps_pins() -> None:
    script = (ROOT / "scripts" / "install.sh").read_text()
    assert "pip install -q --no-deps " + " ".join(NO_DEPS_PACKAGES["scale"]) in script
