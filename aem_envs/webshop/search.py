"""The WebShop search engine: BM25 over the product text the original indexes, memory-mapped.

The original searches with Lucene through pyserini (a JVM and a prebuilt index per catalog
size), which is what users fight with. BM25 with Lucene's parameters (``k1=0.9``, ``b=0.4``,
Lucene's idf and length normalisation) and Lucene's English stop words ranks like it, at
interactive speed and without Java (docs/envs.md has the agreement and speed measured).

Each document is what the original's ``convert_product_file_format.py`` writes: title,
description, the first bullet point and the option text (``name: v1, v2, and name: ...``),
lower-cased. :class:`IndexBuilder` computes the scores exactly as bm25s's ``method="lucene"``
does (the tests compare them bit for bit) but one product at a time, so a million products
are indexed in bounded memory. The index is a folder of arrays under the user cache
(``$AEM_CACHE_DIR``, else ``$XDG_CACHE_HOME/aem``, else ``~/.cache/aem``) named by the
catalog's ``content_hash`` (:mod:`~aem_envs.webshop.mapped`: built once, memory-mapped by
every process that searches the catalog, a damaged one rebuilt).
"""

from __future__ import annotations

import bisect
import math
import re
import threading
import warnings
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from aem_envs.webshop.catalog import Catalog, Product
from aem_envs.webshop.mapped import FolderWriter, open_or_build
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
#: Postings scored at a time when an index is built.
POSTINGS_BLOCK = 1 << 22
#: Bump when the document text, tokenization or file layout changes: indexes then rebuild.
INDEX_FORMAT = "bm25-v2"

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


class IndexBuilder:
    """Term frequencies gathered one product at a time, turned into BM25 postings at the end.

    Why not bm25s's ``index``: it holds every document's token list at once, several GB for
    a million products; here each document leaves only its (term, count) pairs behind.
    """

    def __init__(self) -> None:
        self._vocabulary: dict[str, int] = {}
        # Flat typed arrays: a few bytes per posting, not a Python object per document.
        self._terms = array("i")
        self._counts = array("f")
        self._per_doc = array("q")
        self._lengths = array("q")
        self._asins: list[bytes] = []

    def add(self, product: Product) -> None:
        # An empty-token document keeps the vocabulary non-empty for any corpus (as bm25s).
        tokens = tokenize(document_text(product)) or [""]
        counts = Counter(tokens)
        vocabulary = self._vocabulary
        self._terms.extend([vocabulary.setdefault(term, len(vocabulary)) for term in counts])
        self._counts.extend(counts.values())
        self._per_doc.append(len(counts))
        self._lengths.append(len(tokens))
        self._asins.append(product.asin.encode("utf-8"))

    def arrays(self) -> dict[str, np.ndarray]:
        """The index in memory: per term (sorted by text) its postings' documents and scores."""
        blocks: dict[str, list[np.ndarray]] = {}
        for name, block in self._blocks():
            blocks.setdefault(name, []).append(block)
        return {name: np.concatenate(parts) for name, parts in blocks.items()}

    def write(self, out: FolderWriter) -> dict[str, Any]:
        """Write the index into ``out`` block by block; the metadata for its manifest."""
        for name, block in self._blocks():
            out.append(name, block)
        return {"documents": len(self._lengths), "terms": len(self._vocabulary)}

    def _blocks(self) -> Iterator[tuple[str, np.ndarray]]:
        """The index's files as ``(file, block)`` pieces; a file is its blocks in order.

        Why blocks: the postings of a million products number tens of millions; scoring them
        in blocks bounds the float64 temporaries.
        """
        n_docs = len(self._lengths)
        words = sorted(self._vocabulary)
        rank = np.empty(len(words), dtype=np.int32)
        rank[[self._vocabulary[w] for w in words]] = np.arange(len(words), dtype=np.int32)
        terms = rank[np.frombuffer(self._terms, dtype=np.int32)]
        frequencies = np.bincount(terms, minlength=len(words))
        # Lucene's idf, in Python floats as bm25s computes it, stored as float32.
        idf = np.array(
            [math.log(1 + (n_docs - df + 0.5) / (df + 0.5)) for df in frequencies.tolist()],
            dtype=np.float32,
        )
        per_doc = np.frombuffer(self._per_doc, dtype=np.int64)
        docs = np.repeat(np.arange(n_docs, dtype=np.int32), per_doc)
        counts = np.frombuffer(self._counts, dtype=np.float32)
        lengths = np.frombuffer(self._lengths, dtype=np.int64)
        average = lengths.mean() if n_docs else 1.0
        order = np.argsort(terms, kind="stable")  # documents stay ascending within a term
        for at in range(0, max(len(order), 1), POSTINGS_BLOCK):  # an empty index has files too
            picked = order[at : at + POSTINGS_BLOCK]
            doc = docs[picked]
            # The same operations in the same precision as bm25s, vectorised: float64
            # throughout, rounded to float32 at the end.
            norm = K1 * ((1 - B) + (B * lengths[doc].astype(np.float64)) / average)
            tf = counts[picked].astype(np.float64)
            weight = idf[terms[picked]].astype(np.float64) * (tf / (norm + tf))
            yield "scores", weight.astype(np.float32)
            yield "docs", doc
        starts = np.zeros(len(words) + 1, dtype=np.int64)
        np.cumsum(frequencies, out=starts[1:])
        encoded = [w.encode("utf-8") for w in words]
        term_starts = np.zeros(len(words) + 1, dtype=np.int64)
        np.cumsum([len(w) for w in encoded], out=term_starts[1:])
        yield "starts", starts
        yield "terms", np.frombuffer(b"".join(encoded), dtype=np.uint8)
        yield "term_starts", term_starts
        yield "asins", np.array(self._asins, dtype=np.bytes_)


class _Terms:
    """The sorted vocabulary as a sequence :func:`bisect.bisect_left` can search in place."""

    def __init__(self, blob: np.ndarray, starts: np.ndarray) -> None:
        self._blob = blob.data
        self._starts = starts

    def __len__(self) -> int:
        return len(self._starts) - 1

    def __getitem__(self, i: int) -> bytes:
        return bytes(self._blob[int(self._starts[i]) : int(self._starts[i + 1])])


class SearchEngine:
    """BM25 retrieval of product asins, deterministic for equal scores (catalog order wins).

    Reads an index made by :class:`IndexBuilder`, in memory or memory-mapped from disk.
    """

    def __init__(self, arrays: Mapping[str, np.ndarray]) -> None:
        #: Asins (bytes) in catalog order: document ``i`` is product ``i``.
        self.asins: np.ndarray = arrays["asins"]
        self._scores = arrays["scores"]
        self._docs = arrays["docs"]
        self._starts = arrays["starts"]
        terms = _Terms(arrays["terms"], arrays["term_starts"])
        #: Term → id (``None`` when absent), cached: queries repeat their words.
        self._term_id = lru_cache(maxsize=65536)(lambda term: _find(terms, term))

    @classmethod
    def build(cls, products: Iterable[Product]) -> SearchEngine:
        """Index ``products`` in memory (no cache); :func:`engine_for` is what envs call."""
        builder = IndexBuilder()
        for product in products:
            builder.add(product)
        return cls(builder.arrays())

    def _postings(self, query: str) -> list[slice]:
        """Where each query term's postings are, in query order (Lucene sums one clause per
        query term, repeats included)."""
        starts = self._starts
        return [
            slice(int(starts[term_id]), int(starts[term_id + 1]))
            for term_id in map(self._term_id, tokenize(query))
            if term_id is not None
        ]

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every product for ``query``."""
        total = np.zeros(len(self.asins), dtype=np.float64)
        # Term by term: a product's postings are unique within a term, so each term is one
        # scatter-add, with no copy of the postings (faster on a large catalog than one
        # bincount over them all, with the same float64 sums in the same order).
        for where in self._postings(query):
            total[self._docs[where]] += self._scores[where]
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
        return [self.asins[i].decode("utf-8") for i in _best(matched, scores[matched], k)]


def _best(docs: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` best of ``docs`` by score, ties in catalog order."""
    if len(docs) > k:
        # Keep every product scoring at least the k-th best score: ties at the boundary
        # are then settled by catalog order below, not by the partition's whim.
        cutoff = np.partition(scores, len(scores) - k)[len(scores) - k]
        kept = scores >= cutoff
        docs, scores = docs[kept], scores[kept]
    return docs[np.lexsort((docs, -scores))[:k]]


def _find(terms: _Terms, term: str) -> int | None:
    key = term.encode("utf-8")
    at = bisect.bisect_left(terms, key)
    return at if at < len(terms) and terms[at] == key else None


_ENGINES: dict[str, SearchEngine] = {}
_LOCK = threading.Lock()


def index_dir(content_hash: str) -> Path:
    return aem_cache_root() / "webshop" / content_hash / INDEX_FORMAT


def engine_for(catalog: Catalog) -> SearchEngine:
    """The search engine of ``catalog``: from this process, else the disk cache, else built.

    Why a process-wide memo: vector envs in one process share one catalog, and its index
    should be mapped once.
    """
    with _LOCK:
        engine = _ENGINES.get(catalog.content_hash)
        if engine is None:
            engine = _open_or_build(catalog.content_hash, catalog.products)
            _ENGINES[catalog.content_hash] = engine
        return engine


def store_index(content_hash: str, builder: IndexBuilder) -> None:
    """Write ``builder``'s index for the catalog ``content_hash`` unless a sound one exists
    (the store builds it while converting a catalog, in the same pass over the products)."""
    open_or_build(index_dir(content_hash), INDEX_FORMAT, builder.write, "the WebShop index")


def _open_or_build(content_hash: str, products: Iterable[Product]) -> SearchEngine:
    def build(out: FolderWriter) -> dict[str, Any]:
        builder = IndexBuilder()
        for product in products:
            builder.add(product)
        return builder.write(out)

    target = index_dir(content_hash)
    try:
        folder = open_or_build(target, INDEX_FORMAT, build, "the WebShop search index")
    except OSError as exc:
        warnings.warn(
            f"could not cache the WebShop search index in {target} ({exc}); it will be rebuilt "
            "next time. Set AEM_CACHE_DIR to a writable folder to keep it.",
            stacklevel=4,
        )
        return SearchEngine.build(products)
    return SearchEngine(folder.arrays)
