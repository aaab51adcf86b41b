"""The site: routes, page content, page views (text / text_rich / clickables) and the server."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from aem_envs.webshop.catalog import Catalog
from aem_envs.webshop.generate.build import generate_catalog
from aem_envs.webshop.grading import get_reward
from aem_envs.webshop.site.app import PER_PAGE, Site, normalize_query, price_tag
from aem_envs.webshop.site.page import parse_html
from aem_envs.webshop.site.server import SiteServer

SESSION = "fixed_0"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return generate_catalog(300, 20, 3)


@pytest.fixture()
def site(catalog: Catalog) -> Site:
    site = Site(catalog)
    site.open_session(SESSION, catalog.goals[0])
    return site


def _get(site: Site, path: str, method: str = "GET", form=None):
    response = site.handle(method, path, form)
    assert response.status == 200, response.body
    return parse_html(response.body)


def test_search_page_has_a_search_bar_and_the_instruction(site: Site, catalog: Catalog) -> None:
    view = _get(site, f"/{SESSION}")
    assert view.has_search_bar and view.search_action == f"/{SESSION}"
    assert view.page_name == "index"
    instruction = catalog.goals[0].instruction
    assert view.text() == f"WebShop [SEP] Instruction: [SEP] {instruction} [SEP] Search"
    assert dict(view.clickables) == {}  # the Search button is reached with search[...]


def test_search_redirects_to_paged_results(site: Site, catalog: Catalog) -> None:
    response = site.handle("POST", f"/{SESSION}", {"search_query": "  Shampoo\x00 FOR hair "})
    assert response.status == 303
    assert response.location == "/search_results/fixed_0/shampoo%20for%20hair/1"
    broad = " ".join(sorted({p.query for p in catalog.products}))
    view = _get(site, site.handle("POST", f"/{SESSION}", {"search_query": broad}).location)
    products = [c for c in view.clickables.values() if c.kind == "product"]
    assert len(products) == PER_PAGE
    assert list(view.clickables)[:2] == ["back to search", "next >"]
    assert "< prev" not in view.clickables
    assert "Page 1 (Total results: 50)" in view.text()
    second = _get(site, view.clickables["next >"].target, "POST")
    assert second.meta["pagenum"] == "2" and "< prev" in second.clickables
    assert not set(second.clickables) & {c.label for c in products}


def test_item_page_options_sub_pages_and_back(site: Site, catalog: Catalog) -> None:
    product = next(p for p in catalog.products if len(p.options) >= 2 and p.reviews)
    path = Site.url_for(
        "item_page", session=SESSION, asin=product.asin, keywords="x", page=1, options="{}"
    )
    view = _get(site, path)
    assert view.meta["asin"] == product.asin
    (name, values), *_ = product.options.items()
    radios = [c for c in view.clickables.values() if c.kind == "option"]
    assert {c.label for c in radios} >= set(values)
    assert not any(c.checked for c in radios)
    assert f"Price: {price_tag(product)}" in view.text()
    for button in ("back to search", "< prev", "description", "features", "reviews", "buy now"):
        assert button in view.clickables

    chosen = _get(site, view.clickables[values[1]].target)
    assert [c.label for c in chosen.clickables.values() if c.checked] == [values[1]]
    assert f"[clicked button] {values[1]} [clicked button_]" in chosen.text_rich()
    assert chosen.text_rich().startswith(f"You have clicked {values[1]}.\n")

    features = _get(site, chosen.clickables["features"].target, "POST")
    assert all(point in features.text() for point in product.bullet_points)
    reviews = _get(site, chosen.clickables["reviews"].target, "POST")
    assert product.reviews[0]["body"] in reviews.text()
    description = _get(site, chosen.clickables["description"].target, "POST")
    assert product.description in description.text()
    back = _get(site, description.clickables["< prev"].target, "POST")
    assert [c.label for c in back.clickables.values() if c.checked] == [values[1]]


def test_buying_shows_the_webshop_reward(site: Site, catalog: Catalog) -> None:
    goal = catalog.goals[0]
    product = catalog.by_asin[goal.asin]
    options = {name: values[0] for name, values in product.options.items()}
    path = Site.url_for("done", session=SESSION, asin=product.asin, options=json.dumps(options))
    view = _get(site, path, "POST")
    expected = get_reward(product, goal, product.price, options).total
    assert view.page_name == "done" and float(view.meta["reward"]) == expected
    assert site.sessions[SESSION].purchase.reward == expected


def test_visited_products_are_marked_until_back_to_search(site: Site) -> None:
    results = site.handle("POST", f"/{SESSION}", {"search_query": "shampoo"}).location
    view = _get(site, results)
    first = next(c for c in view.clickables.values() if c.kind == "product")
    _get(site, first.target)
    again = _get(site, results)
    assert f"[clicked button] {first.label.upper()} [clicked button_]" in again.text_rich()
    _get(site, f"/{SESSION}", "POST")
    assert "[clicked button]" not in _get(site, results).text_rich()


@pytest.mark.parametrize(
    "path",
    [
        "/no_such_session",
        "/search_results/fixed_0/x/0",
        "/item_page/fixed_0/NOPE/x/1/%7B%7D",
        "/item_page/fixed_0/{asin}/x/1/not-json",
        "/item_sub_page/fixed_0/{asin}/x/1/Secrets/%7B%7D",
        "/a/b/c/d/e/f/g/h",
        "/static/../app.py",
    ],
)
def test_bad_urls_are_404_pages(site: Site, catalog: Catalog, path: str) -> None:
    response = site.handle("GET", path.format(asin=catalog.products[0].asin))
    assert response.status == 404 and "Page not found" in response.body


def test_normalize_query() -> None:
    assert normalize_query(" Red\tSHOES\u200b\n x ") == "red shoes x"
    assert normalize_query("\x00\x01") == ""


def test_assets_are_local() -> None:
    site_dir = Path(__file__).parents[3] / "aem_envs" / "webshop" / "site"
    for file in [*site_dir.glob("templates/*.html"), *site_dir.glob("static/*")]:
        assert not re.search(r"(src|href)=\"(https?:)?//", file.read_text()), file


def test_server_serves_the_site_and_closes(site: Site) -> None:
    server = SiteServer(site)
    try:
        with urllib.request.urlopen(f"{server.base_url}/{SESSION}", timeout=10) as reply:
            assert reply.read().decode() == site.handle("GET", f"/{SESSION}").body
        with urllib.request.urlopen(f"{server.base_url}/static/style.css", timeout=10) as reply:
            assert reply.headers["Content-Type"].startswith("text/css")
    finally:
        server.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{server.base_url}/{SESSION}", timeout=5)
