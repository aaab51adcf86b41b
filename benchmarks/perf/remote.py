"""Serving cost: ALFWorld steps through ``aem serve`` + ``aem/Remote-v0`` beside the local env.

The same seeded episodes (random admissible actions) are played on a local
``gym.make("aem_envs:aem/ALFWorld-v0")`` and through the Gymnasium client against an
``aem serve aem/ALFWorld-v0`` process on loopback (OpenEnv's WebSocket protocol, one session),
in one run; then 32 clients at once step their own sessions (the load of a GRPO batch).
Client and server share this machine's cores, so the latencies include both sides' CPU.
``ratio`` is remote ÷ local for latencies (the overhead factor) and remote ÷ local for steps/s.

Run ``python -m benchmarks.perf.remote [--quick]``; ``aem bench perf`` gathers the rows.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import gymnasium as gym
import numpy as np

from benchmarks.perf import perf_main, perf_row

BENCHMARK = "aem serve"
ENV_ID = "aem/ALFWorld-v0"
MAX_STEPS = 20
SESSIONS = 32


def _plays(episodes: int) -> list[tuple[int, list[str]]]:
    """Per seed, a random walk over the admissible actions, recorded on a local env."""
    env = gym.make(f"aem_envs:{ENV_ID}")
    plays = []
    try:
        for seed in range(episodes):
            rng = np.random.default_rng(seed)
            _, info = env.reset(seed=seed)
            actions: list[str] = []
            done = False
            while not done and len(actions) < MAX_STEPS:
                actions.append(str(rng.choice(info["admissible_actions"])))
                _, _, terminated, truncated, info = env.step(actions[-1])
                done = terminated or truncated
            plays.append((seed, actions))
    finally:
        env.close()
    return plays


def _time_steps(env: gym.Env[str, str], plays: list[tuple[int, list[str]]]) -> list[float]:
    steps = []
    for seed, actions in plays:
        env.reset(seed=seed)
        for action in actions:
            tic = time.perf_counter()
            env.step(action)
            steps.append(time.perf_counter() - tic)
    return steps


@contextmanager
def _server() -> Iterator[str]:
    """``aem serve ENV_ID`` in its own process on a free loopback port; its base URL."""
    import requests

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "aem_cli", "serve", ENV_ID, "--port", str(port)]
    command += ["--max-sessions", str(SESSIONS)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                requests.get(f"{url}/health", timeout=5).raise_for_status()
                break
            except requests.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"aem serve did not start: {proc.stderr}") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _load(url: str, plays: list[tuple[int, list[str]]]) -> tuple[float, list[float]]:
    """``SESSIONS`` clients replaying ``plays`` at once: overall steps/s and step latencies."""

    def run(_: int) -> list[float]:
        env = gym.make("aem_envs:aem/Remote-v0", url=url)
        try:
            return _time_steps(env, plays)
        finally:
            env.close()

    tic = time.perf_counter()
    with ThreadPoolExecutor(SESSIONS) as pool:
        latencies = [x for run_steps in pool.map(run, range(SESSIONS)) for x in run_steps]
    return len(latencies) / (time.perf_counter() - tic), latencies


def measure(quick: bool = False) -> list[dict[str, Any]]:
    """Rows: step p50/p95 (ms) and steps/s, remote vs local; steps/s of 32 sessions."""
    plays = _plays(3 if quick else 10)
    local_env = gym.make(f"aem_envs:{ENV_ID}")
    try:
        local = _time_steps(local_env, plays)
    finally:
        local_env.close()
    with _server() as url:
        remote_env = gym.make("aem_envs:aem/Remote-v0", url=url)
        try:
            remote = _time_steps(remote_env, plays)
        finally:
            remote_env.close()
        load_rate, load = _load(url, plays[:2])
    note = (
        f"{ENV_ID}, {len(local)} steps of {len(plays)} seeded episodes, same actions; "
        f"one session over loopback WebSocket, client and server on the same {os.cpu_count()} "
        "cores"
    )
    rows = []
    for q in (50, 95):
        o, b = (float(np.percentile(x, q)) * 1e3 for x in (remote, local))
        rows.append(perf_row(BENCHMARK, f"step p{q}", o, b, "ms", note, ratio=o / b))
    o, b = len(remote) / sum(remote), len(local) / sum(local)
    rows.append(perf_row(BENCHMARK, "steps/s", o, b, "steps/s", note, ratio=o / b))
    load_note = (
        f"{SESSIONS} sessions at once, {len(load)} steps; step p50 "
        f"{np.percentile(load, 50) * 1e3:.1f} ms, p95 {np.percentile(load, 95) * 1e3:.1f} ms; "
        "baseline: one local env"
    )
    metric = f"steps/s, {SESSIONS} sessions"
    rows.append(
        perf_row(BENCHMARK, metric, load_rate, b, "steps/s", load_note, ratio=load_rate / b)
    )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    return perf_main(measure, __doc__, "3 episodes instead of 10", argv)


if __name__ == "__main__":
    raise SystemExit(main())
