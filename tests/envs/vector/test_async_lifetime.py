"""Async vector-env workers, and the browsers they start, end when their owner is SIGKILLed."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from sandboxes.lifetime import descendants, identity, running

OWNER = """
import time
import gymnasium as gym
envs = gym.make_vec("aem_envs:aem/WebShopBrowser-v0", num_envs=2, vectorization_mode="async")
envs.reset(seed=[0, 1])
print("ready", flush=True)
time.sleep(600)
"""


@pytest.mark.browser
def test_async_workers_and_their_browsers_end_with_their_owner(browser: None) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "ready"
        tree = [mark for mark in map(identity, descendants(owner.pid)) if mark]
        assert len(tree) > 4  # two workers, their drivers and browsers
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    deadline = time.monotonic() + 15
    while (alive := [mark for mark in tree if running(mark)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert alive == []
