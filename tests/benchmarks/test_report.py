"""The report: markdown and self-contained HTML with embedded plots and published numbers."""

from __future__ import annotations

import base64
import re

from benchmarks.published import published
from benchmarks.report import settings_rows, write_report

PNG = b"\x89PNG\r\n\x1a\n"


def test_markdown_has_statement_tables_plots_and_published_numbers(tmp_path, results) -> None:
    paths = write_report(tmp_path, results)
    text = paths["markdown"].read_text()
    assert "not the original ALFWorld, WebShop or SWE-bench benchmarks" in text
    assert "| smollm2 | aem/ALFWorld-v0 | 6 | 16.7 | 37.5 | 9.0 | 18.5 | 900 | 40 | 0.20 |" in text
    assert "| smollm2 | pick_and_place_simple | 1 | 100.0 |" in text
    # the GiGPO 7B GiGPO row, transcribed, then ours under the same columns
    assert (
        "| GiGPO — GiGPO paper (Feng et al. 2025) | Qwen2.5-7B-Instruct | 97.7 | 82.7 | 98.8 |"
        in text
    )
    assert (
        "| ours: smollm2 | aem/ALFWorld-v0 | 100.0 | 0.0 | 0.0 | 0.0 | 0.0 | 0.0 | 16.7 |" in text
    )
    assert "| ours: expert | aem/WebShop-v0 | 100.0 | 100.0 |" in text
    assert "SWE-bench-Verified (resolved" not in text  # no SWE env in this run
    for link in re.findall(r"\]\((plots/[^)]+\.png)\)", text):
        assert (tmp_path / link).read_bytes().startswith(PNG)
    assert len(list((tmp_path / "plots").glob("*.png"))) == 4


def test_html_is_self_contained_with_embedded_pngs(tmp_path, results) -> None:
    html = write_report(tmp_path, results)["html"].read_text()
    # links stay inside the page (the rows' episode lists) or the run folder (episode pages)
    assert not re.search(r"""(src|href)=["'](?!data:|#|episodes/)""", html)
    assert "<link" not in html and "<script" not in html
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert len(images) == 4
    assert all(base64.b64decode(image).startswith(PNG) for image in images)
    assert html.count('class="ours"') == 4
    assert "NOT the original benchmarks" in html


def test_published_file_matches_the_reference_transcription() -> None:
    rows = published()["rows"]
    gigpo_15 = next(
        r for r in rows if r["model"] == "Qwen2.5-1.5B-Instruct" and r["method"] == "GiGPO"
    )
    assert gigpo_15["alfworld"] == {
        "Pick": 94.4,
        "Look": 67.5,
        "Clean": 94.8,
        "Heat": 94.4,
        "Cool": 79.8,
        "Pick2": 76.4,
        "All": 86.7,
    }
    assert gigpo_15["webshop"] == {"score": 83.1, "success": 65.0}
    swe = {r["source"]: r["swe"]["resolved"] for r in rows if "swe" in r and r["method"] != "+AEM"}
    assert swe["DeepSWE-Preview"] == 42.2 and swe["SkyRL-Agent-7B-v0"] == 14.6
    assert len(rows) == 21


def test_the_step_limit_is_said_once_when_every_policy_shares_it(results) -> None:
    policies = {e["policy"] for e in results["episodes"] if e["env_id"] == "aem/ALFWorld-v0"}
    assert len(policies) > 1
    one = {**results, "episodes": [{**e, "max_steps": 30} for e in results["episodes"]]}
    text = dict(settings_rows(one))["tasks and step limits"]
    assert "tasks, step limit 30" in text and not any(p in text for p in policies)
    first, *_ = sorted(policies)
    apart = {
        **results,
        "episodes": [
            {**e, "max_steps": 15 if e["policy"] == first else 30} for e in results["episodes"]
        ],
    }
    text = dict(settings_rows(apart))["tasks and step limits"]
    assert f"{first}: 15" in text and ": 30" in text
