"""BM25 search: what is indexed, ranking rules, and the on-disk index cache."""

from __future__ import annotations

import dataclasses

import numpy as np
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
    engine = SearchEngine.build(catalog.products)
    for product in catalog.products[:20]:
        hits = engine.search(product.name)
        assert product.asin in hits[:10]
        assert len(hits) <= search.TOP_K


def test_search_returns_only_matching_products_best_first(catalog: Catalog) -> None:
    engine = SearchEngine.build(catalog.products)
    assert engine.search("zzzunknownword") == []
    hits = engine.search("shampoo")
    scores = engine.scores("shampoo")
    rows = {asin.decode(): i for i, asin in enumerate(engine.asins)}
    ranked = [scores[rows[a]] for a in hits]
    assert ranked == sorted(ranked, reverse=True) and min(ranked) > 0


def test_equal_scores_keep_catalog_order(catalog: Catalog) -> None:
    twin = catalog.products[0]
    clones = tuple(dataclasses.replace(twin, asin=f"C{i:09d}") for i in range(60))
    engine = SearchEngine.build(clones)
    assert engine.search(twin.name) == [p.asin for p in clones[: search.TOP_K]]


def test_scores_are_bm25s_lucene_scores_bit_for_bit(catalog: Catalog, monkeypatch) -> None:
    bm25s = pytest.importorskip("bm25s")
    monkeypatch.setattr(search, "POSTINGS_BLOCK", 1000)  # several blocks
    reference = bm25s.BM25(k1=search.K1, b=search.B, method="lucene")
    reference.index(
        [tokenize(document_text(p)) or [""] for p in catalog.products], show_progress=False
    )
    ours = SearchEngine.build(catalog.products)
    queries = [g.instruction for g in catalog.goals] + [p.name for p in catalog.products[:40]]
    for query in queries:
        ids = [reference.vocab_dict[t] for t in tokenize(query) if t in reference.vocab_dict]
        expected = reference.get_scores(ids) if ids else np.zeros(len(catalog.products))
        theirs = np.asarray(expected, dtype=np.float32)
        assert np.allclose(ours.scores(query), theirs, rtol=1e-6, atol=0)
        # Per term the postings are identical, so sums differ only in their order of addition.
    for term, term_id in reference.vocab_dict.items():
        if not term:
            continue
        column = slice(reference.scores["indptr"][term_id], reference.scores["indptr"][term_id + 1])
        ours_id = ours._term_id(term)
        assert ours_id is not None
        mine = slice(ours._starts[ours_id], ours._starts[ours_id + 1])
        assert np.array_equal(ours._docs[mine], reference.scores["indices"][column])
        assert np.array_equal(ours._scores[mine], reference.scores["data"][column])


def test_index_is_cached_on_disk_by_content_hash(catalog, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("AEM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(search, "_ENGINES", {})
    first = engine_for(catalog)
    target = tmp_path / "webshop" / catalog.content_hash / search.INDEX_FORMAT
    assert (target / "manifest.json").is_file()
    assert [p.name for p in target.parent.iterdir() if not p.name.startswith(".")] == [
        search.INDEX_FORMAT
    ]  # no staging folder left, only the build lock beside the index
    assert not [p for p in target.parent.iterdir() if ".staging-" in p.name]
    assert engine_for(catalog) is first  # memoised in the process

    monkeypatch.setattr(search, "_ENGINES", {})
    monkeypatch.setattr(search.IndexBuilder, "add", lambda self, p: pytest.fail("rebuilt"))
    loaded = engine_for(catalog)
    assert isinstance(loaded._docs.base, np.memmap)  # mapped from the cache, not read into memory
    query = catalog.goals[0].instruction
    assert loaded.search(query) == first.search(query)


def test_a_damaged_index_is_rebuilt_with_a_warning(catalog, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("AEM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(search, "_ENGINES", {})
    query = catalog.goals[0].instruction
    expected = engine_for(catalog).search(query)
    scores = tmp_path / "webshop" / catalog.content_hash / search.INDEX_FORMAT / "scores"
    scores.write_bytes(scores.read_bytes()[:-4])  # truncated
    monkeypatch.setattr(search, "_ENGINES", {})
    with pytest.warns(UserWarning, match=r"search index .* is damaged \(scores has"):
        assert engine_for(catalog).search(query) == expected


def test_an_unwritable_cache_still_gives_an_engine(catalog, tmp_path, monkeypatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("AEM_CACHE_DIR", str(blocker))
    monkeypatch.setattr(search, "_ENGINES", {})
    with pytest.warns(UserWarning, match="AEM_CACHE_DIR"):
        engine = engine_for(catalog)
    assert engine.search(catalog.products[0].name)[0] == catalog.products[0].asin
