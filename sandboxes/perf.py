"""Latency measurements of the Docker backend, for ``benchmarks/perf/swe.py`` and reports.

``measure_docker(image)`` times, on one engine and image:
- ``start_s``: opening a :class:`DockerSandbox` (create + start, limits applied) until it can
  run commands, and ``close_s`` removing it;
- the same command through ``Sandbox.exec`` and through the docker SDK's raw
  ``container.exec_run`` (and the ``docker exec`` CLI), interleaved so load on the host
  affects both alike; medians are reported with their ratio.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from typing import Any

from .docker_sandbox import DockerSandbox, client_session


def _median_seconds(samples: list[float]) -> float:
    return statistics.median(samples)


def _timed(action: Callable[[], Any]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def measure_docker(image: str, *, repeats: int = 20, command: str = "true") -> dict[str, float]:
    """Return median seconds of sandbox start/close and of one command through each path."""
    with client_session() as client:
        starts, closes = [], []
        for _ in range(max(3, repeats // 4)):
            start = time.perf_counter()
            box = DockerSandbox(image, client=client)
            box.exec("true")
            starts.append(time.perf_counter() - start)
            closes.append(_timed(box.close))
        sandbox_exec, raw_exec, cli_exec = [], [], []
        with DockerSandbox(image, client=client) as box:
            container = client.containers.get(box.container_id)
            cli = shutil.which("docker")
            for _ in range(repeats):
                sandbox_exec.append(_timed(lambda: box.exec(command)))
                raw_exec.append(_timed(lambda: container.exec_run(["bash", "-c", command])))
                if cli is not None:
                    argv = [cli, "exec", box.container_id, "bash", "-c", command]
                    cli_exec.append(_timed(lambda argv=argv: subprocess.run(argv, check=True)))
    result = {
        "start_s": _median_seconds(starts),
        "close_s": _median_seconds(closes),
        "sandbox_exec_s": _median_seconds(sandbox_exec),
        "raw_sdk_exec_s": _median_seconds(raw_exec),
    }
    result["overhead_vs_sdk"] = result["sandbox_exec_s"] / result["raw_sdk_exec_s"]
    if cli_exec:
        result["raw_cli_exec_s"] = _median_seconds(cli_exec)
        result["overhead_vs_cli"] = result["sandbox_exec_s"] / result["raw_cli_exec_s"]
    return result


if __name__ == "__main__":
    import json
    import sys

    from .images import ensure_base_image

    target = sys.argv[1] if len(sys.argv) > 1 else ensure_base_image()
    print(json.dumps(measure_docker(target), indent=2))
