"""Synthetic runs for the report tests: records shaped like the runner's, numbers chosen."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.results import build_results
from benchmarks.suite import parse_suite

ALFWORLD_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)


def record(policy: str, env_id: str, task_type: str, i: int, *, won: bool, **extra) -> dict:
    base: dict[str, Any] = {
        "key": f"s/{env_id}/{policy}/{task_type}-{i}/0",
        "suite": "s",
        "env_id": env_id,
        "policy": policy,
        "task_id": f"{task_type}-{i}",
        "task_type": task_type,
        "split": "eval",
        "seed": 0,
        "won": won,
        "score": 1.0 if won else 0.25,
        "steps": 4 if won else 10,
        "max_steps": 10,
        "terminated": won,
        "truncated": not won,
        "return": 10.0 if won else 0.0,
        "invalid_actions": 0 if won else 2,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "policy_time_s": 0.0,
        "env_time_s": 0.1,
        "wall_time_s": 0.2,
        "error": None,
    }
    return {**base, **extra}


def make_results(model_wins: int = 1) -> dict:
    """expert wins everything; ``smollm2`` wins the first ``model_wins`` ALFWorld types."""
    suite = parse_suite(
        {
            "name": "s",
            "envs": [
                {"env": "aem/ALFWorld-v0", "split": "eval"},
                {"env": "aem/WebShop-v0", "split": "eval"},
            ],
        }
    )
    records = []
    for i, task_type in enumerate(ALFWORLD_TYPES):
        records.append(record("expert", "aem/ALFWorld-v0", task_type, 0, won=True))
        records.append(
            record(
                "smollm2",
                "aem/ALFWorld-v0",
                task_type,
                0,
                won=i < model_wins,
                prompt_tokens=900,
                completion_tokens=40,
            )
        )
    for category in ("fashion", "beauty"):
        records.append(record("expert", "aem/WebShop-v0", category, 0, won=True))
        records.append(record("smollm2", "aem/WebShop-v0", category, 0, won=False))
    return build_results(
        suite,
        [("expert", False), ("smollm2", True)],
        records,
        planned=len(records),
        settings={"workers": 2, "batch_size": 8},
    )


@pytest.fixture
def results() -> dict:
    return make_results()


@pytest.fixture
def chromium(tmp_path):
    """A headless Debian Chromium driven by Selenium (the report tests open pages in it)."""
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1280,2400",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        yield driver
    finally:
        driver.quit()
