"""The on-disk WebShop catalog store: one per catalog, shared by every env that plays it.

A catalog folder (the original files, or the bundled generated ones) is converted once into a
folder of memory-mapped arrays (:mod:`~aem_envs.webshop.mapped`) at
``<cache>/webshop/<content_hash>/store-v1``:

- ``products`` holds each product as one JSON record (its fields in :class:`Product` order),
  ``product_starts`` where each record starts;
- ``asin_keys`` holds the asins sorted, ``asin_rows`` each one's position in the catalog, so an
  asin is found by binary search;
- ``goals`` / ``goal_starts`` hold the goals the same way (a goal's id is its position).

Products and goals are decoded only when a page or a reset needs one (a small per-process
cache keeps the recent ones), so an env over a million products starts at once and holds
little of its own: the pages are shared through the page cache by every process that maps
them. The search index is built in the same pass over the products
(:mod:`~aem_envs.webshop.search`), under the same content hash.

Why the source record: hashing the original files (about 1.3 GB for a million products)
takes seconds, so ``<cache>/webshop/sources/<key>.json`` remembers the content hash the files
had at a given size, inode, modification and change time. Files that changed in any of these
are hashed again, and new content means a new store: a stale one is never reused.
"""

from __future__ import annotations

import hashlib
import json
import operator
import random
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar, overload

import numpy as np

from aem_envs.core.io import atomic_write_json
from aem_envs.webshop.catalog import Catalog, Goal, KeyedRecords, Product
from aem_envs.webshop.goals import WEBSHOP_SEED, split_goals, split_ranges
from aem_envs.webshop.jsonstream import encode_json
from aem_envs.webshop.mapped import FolderWriter, MappedFolder, open_folder, open_or_build
from aem_envs.webshop.products import iter_products
from aem_envs.webshop.records import OriginalFiles, find_original, stream_original
from aem_envs.webshop.search import IndexBuilder, store_index
from aem_envs.webshop.tasks import catalog_hash, goal_maker, load_original
from sandboxes.cache import aem_cache_root

#: Bump when the record encoding or the files change: stores then rebuild.
STORE_FORMAT = "store-v1"
#: Decoded products (and goals) a process keeps; a results page shows ten.
CACHED_RECORDS = 4096

_Item = TypeVar("_Item")


# ------------------------------------------------------------------------ record encoding
def encode_product(product: Product) -> bytes:
    """One product as a JSON array of its fields (the order :func:`decode_product` reads)."""
    p = product
    return encode_json(
        [p.asin, p.name, p.category, p.query, p.product_category, p.prices, p.price, p.options,
         p.attributes, p.description, p.bullet_points, p.rating, p.reviews, p.main_image]
    )  # fmt: skip


def decode_product(raw: bytes) -> Product:
    (asin, name, category, query, crumbs, prices, price, options, attributes, description,
     bullets, rating, reviews, image) = json.loads(raw)  # fmt: skip
    return Product(
        asin=asin,
        name=name,
        category=category,
        query=query,
        product_category=crumbs,
        prices=tuple(prices),
        price=price,
        options={name: tuple(values) for name, values in options.items()},
        attributes=tuple(attributes),
        description=description,
        bullet_points=tuple(bullets),
        rating=rating,
        reviews=tuple(reviews),
        main_image=image,
    )


def encode_goal(goal: Goal) -> bytes:
    g = goal
    return encode_json(
        [g.goal_id, g.asin, g.instruction, g.attributes, g.goal_options, g.price_upper, g.query,
         g.category, g.name, g.product_category, g.weight]
    )  # fmt: skip


def decode_goal(raw: bytes) -> Goal:
    (goal_id, asin, instruction, attributes, options, upper, query, category, name, crumbs,
     weight) = json.loads(raw)  # fmt: skip
    return Goal(
        goal_id=goal_id,
        asin=asin,
        instruction=instruction,
        attributes=tuple(attributes),
        goal_options=tuple(options),
        price_upper=upper,
        query=query,
        category=category,
        name=name,
        product_category=crumbs,
        weight=weight,
    )


# ----------------------------------------------------------------------- lazy sequences
class DamagedStoreError(RuntimeError):
    """A record of an opened store cannot be read (the store was damaged while in use)."""


class _Records(KeyedRecords[_Item]):
    """Records of one kind in a mapped store folder, decoded on demand."""

    def __init__(self, folder: MappedFolder, kind: str, decode: Callable[[bytes], _Item]):
        self._folder = folder
        self._kind = kind
        self._blob = folder.arrays[kind].data
        self._starts = folder.arrays[f"{kind[:-1]}_starts"]
        self._decode = decode
        self._at = lru_cache(maxsize=CACHED_RECORDS)(self._read)

    def _read(self, i: int) -> _Item:
        raw = bytes(self._blob[int(self._starts[i]) : int(self._starts[i + 1])])
        try:
            return self._decode(raw)
        except (ValueError, TypeError) as exc:
            raise DamagedStoreError(
                f"the WebShop store at {self._folder.path} has an unreadable {self._kind[:-1]} "
                f"record {i} ({exc}); delete that folder and it is rebuilt on the next start"
            ) from None

    def __len__(self) -> int:
        return len(self._starts) - 1

    @overload
    def __getitem__(self, i: int) -> _Item: ...
    @overload
    def __getitem__(self, i: slice) -> list[_Item]: ...
    def __getitem__(self, i: int | slice) -> _Item | list[_Item]:
        if isinstance(i, slice):
            return [self._at(j) for j in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        return self._at(i % len(self))

    def __iter__(self) -> Iterator[_Item]:
        return (self._at(i) for i in range(len(self)))

    def __reduce__(self) -> tuple[Any, ...]:
        # Reopen by path in the other process: the maps are shared, never copied.
        return (_reopen, (str(self._folder.path), self._kind))


class _Products(_Records[Product]):
    @property
    def by_key(self) -> Mapping[str, Product]:
        return _ByAsin(self)


class _Goals(_Records[Goal]):
    @property
    def by_key(self) -> Mapping[str, Goal]:
        return _ById(self)


class _ByAsin(Mapping[str, Product]):
    """Products by asin, found by binary search in the sorted asins."""

    def __init__(self, products: _Products) -> None:
        self._products = products
        self._keys = products._folder.arrays["asin_keys"]
        self._rows = products._folder.arrays["asin_rows"]

    def __getitem__(self, asin: str) -> Product:
        if not isinstance(asin, str):
            raise KeyError(asin)
        key = asin.encode("utf-8")
        at = int(np.searchsorted(self._keys, key))
        if at == len(self._keys) or self._keys[at] != key:
            raise KeyError(asin)
        return self._products[int(self._rows[at])]

    def __iter__(self) -> Iterator[str]:
        return (p.asin for p in self._products)

    def __len__(self) -> int:
        return len(self._products)

    def __reduce__(self) -> tuple[Any, ...]:
        return (operator.attrgetter("by_key"), (self._products,))


class _ById(Mapping[str, Goal]):
    """Goals by id: the id is the goal's position, written in decimal."""

    def __init__(self, goals: _Goals) -> None:
        self._goals = goals

    def __getitem__(self, goal_id: str) -> Goal:
        if not (isinstance(goal_id, str) and goal_id.isdecimal() and str(int(goal_id)) == goal_id):
            raise KeyError(goal_id)
        if int(goal_id) >= len(self._goals):
            raise KeyError(goal_id)
        return self._goals[int(goal_id)]

    def __iter__(self) -> Iterator[str]:
        return (str(i) for i in range(len(self._goals)))

    def __len__(self) -> int:
        return len(self._goals)

    def __reduce__(self) -> tuple[Any, ...]:
        return (operator.attrgetter("by_key"), (self._goals,))


class GoalIds(Sequence[str]):
    """The ids of a split's goals: consecutive positions, kept as a range."""

    def __init__(self, positions: range) -> None:
        self._positions = positions

    def __len__(self) -> int:
        return len(self._positions)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> GoalIds: ...
    def __getitem__(self, i: int | slice) -> str | GoalIds:
        if isinstance(i, slice):
            return GoalIds(self._positions[i])
        return str(self._positions[i])

    def __contains__(self, goal_id: object) -> bool:
        return (
            isinstance(goal_id, str)
            and goal_id.isdecimal()
            and str(int(goal_id)) == goal_id
            and int(goal_id) in self._positions
        )


# -------------------------------------------------------------------------- the store
_CATALOGS: dict[str, Catalog] = {}
_LOCK = threading.Lock()


def store_dir(content_hash: str) -> Path:
    return aem_cache_root() / "webshop" / content_hash / STORE_FORMAT


def open_catalog(
    directory: str | Path,
    *,
    human_goals: bool = True,
    seed: int = WEBSHOP_SEED,
    num_products: int | None = None,
    source: str | None = None,
) -> Catalog:
    """The catalog of a WebShop data folder from its store, converting the folder first when
    no sound store of its content exists (the arguments are :func:`tasks.load_original`'s).

    Envs in one process share the returned catalog; processes share the store's pages. Where
    the cache cannot be written the folder is loaded into memory instead, with a warning.
    """
    files = find_original(directory)
    parameters = {"human_goals": human_goals, "seed": seed, "num_products": num_products}
    goal_maker(files.names(), human_goals=human_goals)  # refuse before any work
    source = source or f"original:{files.folder.resolve()}"
    try:
        content_hash = _content_hash(files, parameters)
        with _LOCK:
            catalog = _CATALOGS.get(content_hash)
            if catalog is None:
                folder = open_or_build(
                    store_dir(content_hash),
                    STORE_FORMAT,
                    lambda out: _convert(files, parameters, content_hash, out),
                    "the WebShop catalog store",
                )
                catalog = _CATALOGS[content_hash] = _catalog(folder, source)
            return catalog
    except OSError as exc:
        warnings.warn(
            f"could not keep the WebShop catalog store under {aem_cache_root()} ({exc}); "
            "loading the catalog into memory. Set AEM_CACHE_DIR to a writable folder.",
            stacklevel=2,
        )
        return load_original(
            files.folder, human_goals=human_goals, seed=seed, num_products=num_products
        )


def _content_hash(files: OriginalFiles, parameters: Mapping[str, Any]) -> str:
    """The catalog's content hash, from the source record while the files are unchanged."""
    folder = str(files.folder.resolve())
    key = hashlib.sha256(json.dumps([folder, parameters], sort_keys=True).encode()).hexdigest()
    record = aem_cache_root() / "webshop" / "sources" / f"{key[:24]}.json"
    fingerprint = files.fingerprint()
    try:
        known = json.loads(record.read_text(encoding="utf-8"))
        if known["fingerprint"] == fingerprint:
            return str(known["content_hash"])
    except (OSError, ValueError, KeyError, TypeError):
        pass  # no record yet, or an unreadable one: hash the files
    content_hash = catalog_hash(files.digest(), **parameters)
    atomic_write_json(record, {"fingerprint": fingerprint, "content_hash": content_hash})
    return content_hash


def _convert(
    files: OriginalFiles, parameters: Mapping[str, Any], content_hash: str, out: FolderWriter
) -> dict[str, Any]:
    """Write the store of ``files`` into ``out`` (and the search index beside it), reading
    the products once, one at a time; the metadata of the store's manifest."""
    records = stream_original(files)
    maker = goal_maker(records.files, human_goals=parameters["human_goals"])
    rng = random.Random(parameters["seed"])
    index = IndexBuilder()
    asins: list[bytes] = []
    # Goals come from the few products with instructions; only those stay in memory.
    instructed = records.human_instructions if parameters["human_goals"] else records.attributes
    goal_products: list[Product] = []
    starts = [0]
    for product in iter_products(records, rng, limit=parameters["num_products"]):
        record = encode_product(product)
        out.append("products", record)
        starts.append(starts[-1] + len(record))
        asins.append(product.asin.encode("utf-8"))
        index.add(product)
        if product.asin in instructed:
            goal_products.append(product)
    goals, _ = split_goals(maker(records, goal_products, rng))
    del records, goal_products  # the attribute entries and reviews: free before indexing
    out.array("product_starts", np.array(starts, dtype=np.int64))
    keys = np.array(asins, dtype=np.bytes_)
    order = np.argsort(keys, kind="stable")
    out.array("asin_keys", keys[order])
    out.array("asin_rows", order.astype(np.int64))
    goal_starts = [0]
    for goal in goals:
        record = encode_goal(goal)
        out.append("goals", record)
        goal_starts.append(goal_starts[-1] + len(record))
    out.array("goal_starts", np.array(goal_starts, dtype=np.int64))
    if not goals:
        out.append("goals", b"")
    if not asins:
        out.append("products", b"")
    store_index(content_hash, index)
    return {"content_hash": content_hash, "parameters": dict(parameters), "goals": len(goals)}


def _catalog(folder: MappedFolder, source: str) -> Catalog:
    goals = _Goals(folder, "goals", decode_goal)
    return Catalog(
        products=_Products(folder, "products", decode_product),
        goals=goals,
        splits={name: GoalIds(r) for name, r in split_ranges(len(goals)).items()},
        content_hash=folder.meta["content_hash"],
        source=source,
    )


_FOLDERS: dict[str, MappedFolder] = {}


def _reopen(path: str, kind: str) -> _Records[Any]:
    """The records ``kind`` of the store at ``path`` (how a pickled catalog comes back)."""
    with _LOCK:
        folder = _FOLDERS.get(path)
        if folder is None:
            opened = open_folder(Path(path), STORE_FORMAT)
            if opened is None:
                raise DamagedStoreError(f"the WebShop store at {path} is gone; reopen the env")
            folder = _FOLDERS[path] = opened
    return (
        _Products(folder, kind, decode_product)
        if kind == "products"
        else (_Goals(folder, kind, decode_goal))
    )
