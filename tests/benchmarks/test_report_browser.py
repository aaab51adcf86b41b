"""The HTML report, opened in headless Chromium: tables and plots are really shown."""

from __future__ import annotations

import io

import pytest

from benchmarks.report import write_report

pytestmark = pytest.mark.browser


def test_report_shows_tables_and_plots_in_chromium(tmp_path, results, chromium) -> None:
    from selenium.webdriver.common.by import By

    html = write_report(tmp_path / "run", results)["html"]
    chromium.get(html.as_uri())
    assert chromium.title == "aem bench: s"
    images = chromium.find_elements(By.CSS_SELECTOR, "figure img")
    assert len(images) == 4
    for image in images:
        assert (
            chromium.execute_script(
                "return arguments[0].complete && arguments[0].naturalWidth", image
            )
            > 100
        )
        assert image.size["height"] > 100
    summary = chromium.find_element(By.CSS_SELECTOR, "table.ours")
    cells = [td.text for td in summary.find_elements(By.CSS_SELECTOR, "tbody tr:first-child td")]
    assert cells[:4] == ["expert", "aem/ALFWorld-v0", "6", "100.0"]
    assert len(chromium.find_elements(By.CSS_SELECTOR, "table.published tr.ours")) == 4
    assert chromium.find_element(By.ID, "data-statement").is_displayed()

    png = chromium.get_screenshot_as_png()
    image_module = pytest.importorskip("matplotlib.image")
    pixels = image_module.imread(io.BytesIO(png))
    assert pixels.shape[0] > 500 and pixels.shape[1] > 500
    # not blank: many distinct colours (text, table borders, bars)
    flat = (pixels[..., :3] * 255).astype(int).reshape(-1, 3)
    assert len({tuple(p) for p in flat[::97]}) > 20
