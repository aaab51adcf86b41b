"""A served aem env on loopback, in a thread of the test process, and the envs it made."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import requests
import uvicorn

from aem_envs.remote.server import build_app


class Tracked(gym.Wrapper[str, str, str, str]):
    """An env that records its own ``close()`` in the server's ledger."""

    def __init__(self, env: gym.Env[str, str], ledger: Served) -> None:
        super().__init__(env)
        self.ledger = ledger
        ledger.made += 1

    def close(self) -> None:
        self.ledger.closed += 1
        super().close()


@dataclass
class Served:
    url: str
    made: int = 0
    closed: int = 0
    server: Any = field(default=None, repr=False)

    def sessions(self) -> int:
        return int(requests.get(f"{self.url}/sessions", timeout=10).json()["active_sessions"])

    def wait_for_sessions(self, count: int, within: float = 30.0) -> int:
        """Poll until ``count`` sessions are live (or ``within`` s pass); the last count."""
        deadline = time.monotonic() + within
        while (now := self.sessions()) != count and time.monotonic() < deadline:
            time.sleep(0.1)
        return now


@contextmanager
def serving(env_id: str, **app_kwargs: Any) -> Iterator[Served]:
    """``env_id`` served on 127.0.0.1 (a free port) until the block ends, then stopped."""
    served = Served(url="")

    def make() -> gym.Env[str, str]:
        return Tracked(gym.make(f"aem_envs:{env_id}"), served)

    app = build_app(make, env_id, **app_kwargs)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, name="aem-serve", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    served.url, served.server = f"http://127.0.0.1:{port}", server
    try:
        yield served
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        assert not thread.is_alive(), "the test server did not stop"
