"""Latency measurements of the Docker backend, for ``benchmarks/perf/swe.py`` and reports.

On one engine and image:

- :func:`measure_start`: ``start_s``, opening a :class:`DockerSandbox` (create + start,
  limits applied) until it can run commands, and ``close_s``, removing it, beside a bare
  ``containers.run`` + ``remove`` through the docker SDK;
- :func:`measure_exec`: the same command through ``Sandbox.exec``, through the docker SDK's
  raw ``container.exec_run`` and through the ``docker exec`` CLI, interleaved so that load on
  the host affects all alike; medians with the sandbox's overhead ratios.

- :func:`measure_late_reader`: outputs lost when the client reads a command's response late
  (:func:`late_reader`), through ``Sandbox.exec`` and through the SDK's ``exec_run``
  (docker-py's own stream reader), interleaved.

:func:`measure_docker` reports the first two. Run ``python -m sandboxes.perf [IMAGE]``.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from .docker_engine import client_session
from .docker_images import ensure_base_image
from .docker_sandbox import DockerSandbox


def _timed(action: Callable[[], Any]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def measure_start(image: str, *, repeats: int = 5, client: Any = None) -> dict[str, float]:
    """Median seconds to open a sandbox until it runs a command, and to close it, beside the
    bare SDK baseline ``raw_start_close_s`` (``containers.run`` + ``remove(force=True)``).

    The two paths alternate in each repetition, so load on the host affects both alike.
    """
    with client_session(client) as session:
        starts, closes, raws = [], [], []

        def raw() -> None:
            session.containers.run(image, ["sleep", "infinity"], detach=True).remove(force=True)

        for _ in range(repeats):
            start = time.perf_counter()
            box = DockerSandbox(image, client=session)
            box.exec("true")
            starts.append(time.perf_counter() - start)
            closes.append(_timed(box.close))
            raws.append(_timed(raw))
    return {
        "start_s": statistics.median(starts),
        "close_s": statistics.median(closes),
        "raw_start_close_s": statistics.median(raws),
    }


def measure_exec(
    image: str, *, repeats: int = 20, command: str = "true", client: Any = None
) -> dict[str, float]:
    """Median seconds of ``command`` through ``Sandbox.exec`` and the raw paths, with ratios.

    Each path runs once before timing (imports, connection pool). ``raw_cli_exec_s`` and
    ``overhead_vs_cli`` are left out where the ``docker`` CLI is not installed.
    """
    cli = shutil.which("docker")
    with client_session(client) as session, DockerSandbox(image, client=session) as box:
        container = session.containers.get(box.container_id)
        paths: dict[str, Callable[[], Any]] = {
            "sandbox_exec_s": lambda: box.exec(command),
            "raw_sdk_exec_s": lambda: container.exec_run(["bash", "-c", command]),
        }
        if cli is not None:
            argv = [cli, "exec", box.container_id, "bash", "-c", command]
            paths["raw_cli_exec_s"] = lambda: subprocess.run(argv, check=True)
        samples: dict[str, list[float]] = {key: [] for key in paths}
        for action in paths.values():
            action()
        for _ in range(repeats):
            for key, action in paths.items():
                samples[key].append(_timed(action))
    result = {key: statistics.median(times) for key, times in samples.items()}
    result["overhead_vs_sdk"] = result["sandbox_exec_s"] / result["raw_sdk_exec_s"]
    if "raw_cli_exec_s" in result:
        result["overhead_vs_cli"] = result["sandbox_exec_s"] / result["raw_cli_exec_s"]
    return result


@contextlib.contextmanager
def late_reader(switch_interval: float = 0.2) -> Iterator[None]:
    """As on a loaded host: a thread that starts a command gets the interpreter back only
    after the command's output has arrived, since a busy thread holds it for up to
    ``switch_interval`` seconds. Output that the HTTP response's buffer takes in with the
    response's headers is then lost by a reader of the raw socket (docs/sandboxes.md)."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    interval, spinner = sys.getswitchinterval(), threading.Thread(target=spin, daemon=True)
    sys.setswitchinterval(switch_interval)
    spinner.start()
    try:
        yield
    finally:
        stop.set()
        spinner.join()
        sys.setswitchinterval(interval)


def measure_late_reader(image: str, *, repeats: int = 20, client: Any = None) -> dict[str, int]:
    """How many of ``repeats`` outputs of ``echo hello`` came back other than ``hello`` under
    :func:`late_reader`, through ``Sandbox.exec`` (``sandbox_lost``) and the SDK's
    ``exec_run`` (``raw_sdk_lost``), alternating."""
    with client_session(client) as session, DockerSandbox(image, client=session) as box:
        container = session.containers.get(box.container_id)
        lost = {"sandbox_lost": 0, "raw_sdk_lost": 0}
        with late_reader():
            for _ in range(repeats):
                lost["sandbox_lost"] += box.exec("echo hello").output != "hello\n"
                lost["raw_sdk_lost"] += container.exec_run(["echo", "hello"]).output != b"hello\n"
    return lost


def measure_docker(image: str, *, repeats: int = 20, command: str = "true") -> dict[str, float]:
    """Return median seconds of sandbox start/close and of one command through each path."""
    with client_session() as client:
        return {
            **measure_start(image, repeats=max(3, repeats // 4), client=client),
            **measure_exec(image, repeats=repeats, command=command, client=client),
        }


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else ensure_base_image()
    print(json.dumps(measure_docker(target), indent=2))
