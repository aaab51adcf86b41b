"""aem/WebShopBrowser-v0 in Debian's headless Chromium: same episodes as text mode, cleanup."""

from __future__ import annotations

import os
import pickle
import urllib.error
import urllib.request

import numpy as np
import psutil
import pytest

from aem_envs.webshop.browser import WebShopBrowserEnv
from aem_envs.webshop.env import WebShopEnv

pytestmark = pytest.mark.browser

#: Bundled test goals the browser plays (the text env plays all of them in test_expert.py).
SAMPLE = 3


def _children() -> set[int]:
    return {p.pid for p in psutil.Process(os.getpid()).children(recursive=True)}


@pytest.fixture(scope="module")
def browser_env():
    env = WebShopBrowserEnv(observation_mode="text_rich", render_mode="rgb_array")
    yield env
    env.close()


def _play(env, task_id: str, actions: list[str] | None = None) -> tuple[list, dict]:
    """Replay ``actions`` (or the expert's) on ``task_id``; return observations and last info."""
    obs, info = env.reset(options={"split": "test", "task_id": task_id})
    seen = [obs]
    for i in range(env.max_steps):
        action = actions[i] if actions is not None else env.expert_action()
        obs, _, terminated, truncated, info = env.step(action)
        seen.append((action, obs, info["action_valid"], info["score"]))
        if terminated or truncated or (actions is not None and i + 1 == len(actions)):
            break
    return seen, info


def test_construction_starts_no_browser() -> None:
    before = _children()
    env = WebShopBrowserEnv()
    assert _children() == before
    env.close()


def test_expert_wins_in_the_browser_like_in_text_mode(browser_env) -> None:
    text_env = WebShopEnv(observation_mode="text_rich")
    for task_id in text_env.task_ids("test")[:SAMPLE]:
        text_seen, text_info = _play(text_env, task_id)
        browser_seen, browser_info = _play(browser_env, task_id)
        assert browser_info["won"] and browser_info["score"] == 1.0
        assert browser_seen == text_seen


def test_partial_reward_and_invalid_actions_match_text_mode(browser_env) -> None:
    text_env = WebShopEnv(observation_mode="text")
    browser_env.observation_mode = "text"
    try:
        task_id = text_env.task_ids("test")[SAMPLE]
        goal = text_env.catalog.goals_by_id[task_id]
        product = text_env.catalog.by_asin[goal.asin]
        last_option = next(iter(product.options.values()))[-1] if product.options else "x"
        actions = [
            "click[buy now]",
            f"search[{product.name} 🛒]",
            f"click[{goal.asin.lower()}]",
            "click[features]",
            "click[< prev]",
            f"click[{last_option}]",
            "click[buy now]",
        ]
        text_seen, text_info = _play(text_env, task_id, actions)
        browser_seen, browser_info = _play(browser_env, task_id, actions)
        assert browser_seen == text_seen
        assert text_info["asin"] == goal.asin and text_seen[1][2] is False
        assert browser_info["score"] == text_info["score"]
        assert browser_info["reward_breakdown"] == text_info["reward_breakdown"]
    finally:
        browser_env.observation_mode = "text_rich"


def test_render_returns_a_screenshot(browser_env) -> None:
    browser_env.reset(seed=0)
    frame = browser_env.render()
    assert isinstance(frame, np.ndarray) and frame.dtype == np.uint8
    assert frame.ndim == 3 and frame.shape[2] == 3 and frame.shape[0] > 100
    assert frame.std() > 0  # a page, not a blank frame


def test_html_and_url_modes_read_the_live_page(browser_env) -> None:
    browser_env.observation_mode = "url"
    try:
        obs, _ = browser_env.reset(seed=0)
        assert obs.startswith("http://127.0.0.1:") and "/fixed_" in obs
        browser_env.observation_mode = "html"
        obs, *_ = browser_env.step("search[shampoo]")
        assert 'class="product-link"' in obs
    finally:
        browser_env.observation_mode = "text_rich"


def test_pickle_replays_into_a_new_browser_and_close_leaves_nothing() -> None:
    before = _children()
    env = WebShopBrowserEnv()
    env.reset(seed=1)
    env.step("search[shampoo]")
    clone = pickle.loads(pickle.dumps(env))
    assert clone.client.view.text() == env.client.view.text()
    started = _children() - before
    assert any("chrom" in psutil.Process(pid).name() for pid in started)
    base_url = env.client.base_url
    env.close()
    clone.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(base_url, timeout=5)
    _, alive = psutil.wait_procs(
        [psutil.Process(pid) for pid in started if psutil.pid_exists(pid)], timeout=10
    )
    assert not alive, "processes left alive after close()"
    assert not _children() - before
