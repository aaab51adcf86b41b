"""The WebShop search engine: BM25 over the product text the original indexes, cached on disk.

The original searches with Lucene through pyserini (a JVM and a prebuilt index per catalog
size), which is what users fight with. bm25s with Lucene's parameters (``k1=0.9``, ``b=0.4``,
``method="lucene"``) and Lucene's English stop words ranks like it (98% top-10 agreement
measured on 100k products) at ~1 ms a query without Java.

Each document is what the original's ``convert_product_file_format.py`` writes: title,
description, the first bullet point and the option text (``name: v1, v2, and name: ...``),
lower-cased. The index is built once per catalog and stored under the user cache
(``$AEM_CACHE_DIR``, else ``$XDG_CACHE_HOME/aem``, else ``~/.cache/aem``) in a folder named
by the catalog's ``content_hash``, written to a temporary folder and renamed into place so a
killed or concurrent build never leaves a half index behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from aem_envs.core.errors import require
from aem_envs.webshop.catalog import Catalog, Product
from sandboxes.cache import aem_cache_root

#: Hits a search returns (the original's ``SEARCH_RETURN_N``).
TOP_K = 50
#: Lucene's classic BM25 parameters as pyserini sets them.
K1, B = 0.9, 0.4
#: Lucene's ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET``.
LUCENE_STOPWORDS: frozenset[str] = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
    "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
    "these", "they", "this", "to", "was", "will", "with",
))  # fmt: skip
#: Bump when the document text or tokenization changes: cached indexes then rebuild.
INDEX_FORMAT = "bm25s-v1"

_TOKEN = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens without Lucene's stop words (used for documents and queries)."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in LUCENE_STOPWORDS]


def document_text(product: Product) -> str:
    """The text the original indexes for ``product`` (see the module docstring)."""
    option_text = ", and ".join(
        f"{name}: {', '.join(values)}" for name, values in product.options.items()
    )
    first_bullet = product.bullet_points[0] if product.bullet_points else ""
    return " ".join((product.name, product.description, first_bullet, option_text)).lower()


class SearchEngine:
    """BM25 retrieval of product asins, deterministic for equal scores (catalog order wins)."""

    def __init__(self, retriever: object, asins: Sequence[str]) -> None:
        self._retriever = retriever
        self.asins: tuple[str, ...] = tuple(asins)
        scores = retriever.scores  # type: ignore[attr-defined]
        # The index is a CSC matrix: term t's postings are indices/data[indptr[t]:indptr[t+1]].
        self._data = np.asarray(scores["data"], dtype=np.float32)
        self._indices = np.asarray(scores["indices"])
        self._indptr = np.asarray(scores["indptr"])
        self._vocab: dict[str, int] = retriever.vocab_dict  # type: ignore[attr-defined]

    @classmethod
    def build(cls, catalog: Catalog) -> SearchEngine:
        """Index ``catalog`` in memory (no cache); :func:`engine_for` is what envs call."""
        bm25s = require("webshop", "bm25s", feature="WebShop search")
        products = catalog.products
        retriever = bm25s.BM25(k1=K1, b=B, method="lucene")
        # An empty-token document keeps bm25s's vocabulary non-empty for any corpus.
        tokens = [tokenize(document_text(p)) or [""] for p in products]
        retriever.index(tokens, show_progress=False)
        return cls(retriever, [p.asin for p in products])

    def save(self, directory: Path) -> None:
        self._retriever.save(str(directory), show_progress=False)  # type: ignore[attr-defined]
        (directory / "asins.json").write_text(json.dumps(self.asins), encoding="utf-8")

    @classmethod
    def load(cls, directory: Path) -> SearchEngine:
        bm25s = require("webshop", "bm25s", feature="WebShop search")
        retriever = bm25s.BM25.load(str(directory), mmap=True, show_progress=False)
        asins = json.loads((directory / "asins.json").read_text(encoding="utf-8"))
        return cls(retriever, asins)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every product for ``query`` (Lucene sums one clause per query term)."""
        postings = [
            slice(self._indptr[term_id], self._indptr[term_id + 1])
            for term_id in (self._vocab.get(term) for term in tokenize(query))
            if term_id is not None
        ]
        if not postings:
            return np.zeros(len(self.asins), dtype=np.float32)
        # One pass over all the query's postings (twice as fast as adding term by term).
        documents = np.concatenate([self._indices[p] for p in postings])
        weights = np.concatenate([self._data[p] for p in postings])
        total = np.bincount(documents, weights=weights, minlength=len(self.asins))
        return total.astype(np.float32)

    def search(self, query: str, k: int = TOP_K) -> list[str]:
        """Asins of the ``k`` best products with a positive score, best first."""
        scores = self.scores(query)
        best = scores.max(initial=0.0)
        # Most queries match most of a large catalog; the top k usually all score above half
        # the best, so look there first and fall back to every match only when needed.
        matched = np.flatnonzero(scores > best / 2)
        if len(matched) < k:
            matched = np.flatnonzero(scores > 0)
        if len(matched) > k:
            # Keep every product scoring at least the k-th best score: ties at the boundary
            # are then settled by catalog order below, not by the partition's whim.
            values = scores[matched]
            cutoff = np.partition(values, len(values) - k)[len(values) - k]
            matched = matched[values >= cutoff]
        order = np.lexsort((matched, -scores[matched]))[:k]
        return [self.asins[i] for i in matched[order]]


_ENGINES: dict[str, SearchEngine] = {}
_LOCK = threading.Lock()


def index_dir(catalog: Catalog) -> Path:
    return aem_cache_root() / "webshop" / catalog.content_hash / INDEX_FORMAT


def engine_for(catalog: Catalog) -> SearchEngine:
    """The search engine of ``catalog``: from this process, else the disk cache, else built.

    Why a process-wide memo: vector envs in one process share one catalog, and the index
    of 100k products should be held once.
    """
    with _LOCK:
        engine = _ENGINES.get(catalog.content_hash)
        if engine is None:
            engine = _load_or_build(catalog)
            _ENGINES[catalog.content_hash] = engine
        return engine


def _load_or_build(catalog: Catalog) -> SearchEngine:
    target = index_dir(catalog)
    if (target / "asins.json").is_file():
        return SearchEngine.load(target)
    engine = SearchEngine.build(catalog)
    try:
        _store(engine, target)
    except OSError as exc:
        warnings.warn(
            f"could not cache the WebShop search index in {target} ({exc}); it will be rebuilt "
            "next time. Set AEM_CACHE_DIR to a writable folder to keep it.",
            stacklevel=3,
        )
        return engine
    # Memory-mapped from the cache: processes that share a catalog share its pages.
    return SearchEngine.load(target)


def _store(engine: SearchEngine, target: Path) -> None:
    """Write the index to a staging folder beside ``target`` and rename it into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        engine.save(staging)
        os.replace(staging, target)
    except OSError:
        # Another process renamed its complete index into place first; ours is redundant.
        if not (target / "asins.json").is_file():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
