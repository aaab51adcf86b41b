from __future__ import annotations

import pytest


@pytest.mark.docker
def test_measure_docker_reports_every_latency_and_the_ratios(instance_image: str) -> None:
    from sandboxes.perf import measure_docker

    result = measure_docker(instance_image, repeats=3)
    for key in (
        "start_s",
        "close_s",
        "raw_start_close_s",
        "sandbox_exec_s",
        "raw_sdk_exec_s",
        "raw_cli_exec_s",
    ):
        assert result[key] > 0
    assert result["overhead_vs_sdk"] == result["sandbox_exec_s"] / result["raw_sdk_exec_s"]
