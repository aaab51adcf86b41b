"""The report links each row to its episodes; each episode page shows its steps.

A real run of the harness on the toy env writes the trajectories the pages are built from;
the batching policy's first reply on a ``down`` task holds no action, so a page shows a
rejected reply too.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from benchmarks.report import write_report
from benchmarks.results import build_results
from benchmarks.runner import PolicySource, run_bench
from benchmarks.suite import parse_suite
from tests.benchmarks.toy import ENV, BatchingExpert


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run")
    suite = parse_suite({"name": "toy", "envs": [{"env": ENV, "split": "eval", "tasks": 2}]})
    source = PolicySource("batching", BatchingExpert, True)
    bench = run_bench(suite, [source], out, progress=False)
    results = build_results(
        suite, [("batching", True)], bench.records, planned=len(bench.jobs), settings={}
    )
    write_report(out, results)
    return out


def _links(page: str) -> list[str]:
    return re.findall(r'href="([^"]+)"', page)


def test_each_row_links_to_its_episodes_and_each_episode_to_its_page(run_dir) -> None:
    report = (run_dir / "report.html").read_text()
    anchor = "episodes-batching-aemtest-Counter-v0"
    assert f'<td><a href="#{anchor}">2</a></td>' in report  # the row's "episodes" cell
    assert f'<h3 id="{anchor}">batching on aemtest/Counter-v0</h3>' in report
    pages = [link for link in _links(report) if link.endswith(".html")]
    assert len(pages) == 2
    for page in pages:
        assert (run_dir / page).is_file() and (run_dir / page).with_suffix(".jsonl").is_file()
    assert not [link for link in _links(report) if link.startswith(("http:", "https:", "/"))]


def test_an_episode_page_shows_observation_reply_parsed_action_and_reward(run_dir) -> None:
    (page,) = run_dir.glob("episodes/batching/*/eval/eval-3__seed0.html")  # target -3
    text = page.read_text()
    assert "<script" not in text and "<link" not in text  # self-contained, opens from disk
    back = next(link for link in _links(text) if link.endswith("report.html"))
    assert (page.parent / back).resolve() == (run_dir / "report.html").resolve()
    steps = re.findall(r'<section class="step[^"]*" id="step-(\d+)">(.*?)</section>', text, re.S)
    assert [number for number, _ in steps] == ["1", "2", "3", "4"]
    first = html.unescape(steps[0][1])
    assert "reward -0.10" in first and "invalid action" in first
    assert "bring the counter to -3. The counter shows 0." in first  # what the policy saw
    assert "I am not sure." in first  # its reply
    assert "none: Invalid action: no <action>...</action> found in the reply" in first
    second = html.unescape(steps[1][1])
    assert "Invalid action: no <action>" in second  # what the rejection told the policy
    assert "<action>dec</action>" in second
    assert '<code class="action">dec</code>' in steps[1][1]
    last = html.unescape(steps[3][1])
    assert "reward +10.00" in last and "score 1.000" in last
    assert 'id="last"' in text and "The counter shows -3." in text.split('id="last"')[1]
    assert '<span class="won">won</span>, score 1.000, return 9.90' in text
    assert "4 of at most 12, 1 invalid" in text


@pytest.mark.browser
def test_a_person_clicks_from_a_row_to_an_episode_in_chromium(run_dir, chromium) -> None:
    from selenium.webdriver.common.by import By

    chromium.get((run_dir / "report.html").as_uri())
    row = chromium.find_element(By.CSS_SELECTOR, "table.ours tbody tr:first-child")
    row.find_element(By.LINK_TEXT, "2").click()
    assert chromium.current_url.endswith("#episodes-batching-aemtest-Counter-v0")
    chromium.find_element(By.LINK_TEXT, "eval-3").click()
    assert chromium.current_url.endswith("/eval/eval-3__seed0.html")
    assert chromium.title == "batching on eval-3: aem bench toy"
    steps = chromium.find_elements(By.CSS_SELECTOR, "section.step[id^='step-']")
    assert [s.find_element(By.TAG_NAME, "h3").text for s in steps] == [
        "Step 1 · reward -0.10 · score 0.000 · invalid action",
        "Step 2 · reward +0.00 · score 0.000",
        "Step 3 · reward +0.00 · score 0.000",
        "Step 4 · reward +10.00 · score 1.000",
    ]
    assert all(s.is_displayed() and s.size["height"] > 60 for s in steps)
    first = steps[0].text
    assert "I am not sure." in first and "none: Invalid action" in first
    assert steps[1].find_element(By.CSS_SELECTOR, "code.action").text == "dec"
    chromium.find_element(By.PARTIAL_LINK_TEXT, "report of toy").click()
    assert chromium.current_url.endswith("/report.html")
