"""BM25 search: what is indexed, ranking rules, and the on-disk index cache."""

from __future__ import annotations

import dataclasses

import pytest

from aem_envs.webshop import search
from aem_envs.webshop.catalog import Catalog
from aem_envs.webshop.generate.build import generate_catalog
from aem_envs.webshop.search import SearchEngine, document_text, engine_for, tokenize


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return generate_catalog(300, 40, 5)


def test_tokenize_lowercases_and_drops_lucene_stopwords() -> None:
    assert tokenize("The Shampoo for DRY hair, and a 3-Pack") == [
        "shampoo",
        "dry",
        "hair",
        "3",
        "pack",
    ]


def test_document_is_title_description_first_bullet_and_options(catalog: Catalog) -> None:
    product = next(p for p in catalog.products if p.options and len(p.bullet_points) > 1)
    text = document_text(product)
    assert text == text.lower()
    assert product.name.lower() in text and product.description.lower() in text
    assert product.bullet_points[0].lower() in text
    assert product.bullet_points[1].lower() not in text
    name, values = next(iter(product.options.items()))
    assert f"{name}: {', '.join(values)}".lower() in text


def test_search_finds_a_product_by_its_title(catalog: Catalog) -> None:
    engine = SearchEngine.build(catalog)
    for product in catalog.products[:20]:
        hits = engine.search(product.name)
        assert product.asin in hits[:10]
        assert len(hits) <= search.TOP_K


def test_search_returns_only_matching_products_best_first(catalog: Catalog) -> None:
    engine = SearchEngine.build(catalog)
    assert engine.search("zzzunknownword") == []
    hits = engine.search("shampoo")
    scores = engine.scores("shampoo")
    ranked = [scores[engine.asins.index(a)] for a in hits]
    assert ranked == sorted(ranked, reverse=True) and min(ranked) > 0


def test_equal_scores_keep_catalog_order(catalog: Catalog) -> None:
    twin = catalog.products[0]
    clones = tuple(dataclasses.replace(twin, asin=f"C{i:09d}") for i in range(60))
    engine = SearchEngine.build(
        dataclasses.replace(catalog, products=clones, content_hash="clones")
    )
    assert engine.search(twin.name) == [p.asin for p in clones[: search.TOP_K]]


def test_index_is_cached_on_disk_by_content_hash(catalog, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("AEM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(search, "_ENGINES", {})
    first = engine_for(catalog)
    target = tmp_path / "webshop" / catalog.content_hash / search.INDEX_FORMAT
    assert (target / "asins.json").is_file()
    assert [p.name for p in target.parent.iterdir()] == [search.INDEX_FORMAT]  # no staging left
    assert engine_for(catalog) is first  # memoised in the process

    monkeypatch.setattr(search, "_ENGINES", {})
    monkeypatch.setattr(SearchEngine, "build", classmethod(lambda cls, c: pytest.fail("rebuilt")))
    loaded = engine_for(catalog)
    query = catalog.goals[0].instruction
    assert loaded.search(query) == first.search(query)


def test_an_unwritable_cache_still_gives_an_engine(catalog, tmp_path, monkeypatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("AEM_CACHE_DIR", str(blocker))
    monkeypatch.setattr(search, "_ENGINES", {})
    with pytest.warns(UserWarning, match="AEM_CACHE_DIR"):
        engine = engine_for(catalog)
    assert engine.search(catalog.products[0].name)[0] == catalog.products[0].asin
