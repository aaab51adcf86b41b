"""Where WebShop's tasks come from: the bundled generated catalog, or the original files.

Both are folders of the original file formats (:mod:`~aem_envs.webshop.records`), turned into
a :class:`~aem_envs.webshop.catalog.Catalog` by the same code: products
(:mod:`~aem_envs.webshop.products`), then goals and splits (:mod:`~aem_envs.webshop.goals`).
Randomness comes from one seeded generator instead of the original's global one, so a seed
fixes the whole catalog.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from aem_envs.core.errors import DataError
from aem_envs.webshop.catalog import Catalog
from aem_envs.webshop.goals import (
    WEBSHOP_SEED,
    GoalMaker,
    goals_from_human_instructions,
    goals_from_synthetic_instructions,
    split_goals,
)
from aem_envs.webshop.products import iter_products
from aem_envs.webshop.records import OriginalRecords, read_original

DATA_DIR = Path(__file__).with_name("data")


def catalog_hash(files_digest: str, **parameters: Any) -> str:
    """A hash of the files' content (:attr:`OriginalRecords.digest`) and the loading
    parameters (not of file names)."""
    digest = hashlib.sha256(files_digest.encode("ascii"))
    digest.update(json.dumps(parameters, sort_keys=True).encode("utf-8"))
    return digest.hexdigest()[:16]


def goal_maker(files: Mapping[str, str], *, human_goals: bool) -> GoalMaker:
    """The goal maker for ``human_goals``; an error, before any work, when the human
    instructions it needs are not among ``files`` (record kind → file)."""
    if human_goals and "human_instructions" not in files:
        raise DataError(
            f"{Path(files['products']).parent}: human goals need items_human_ins.json; "
            "add it or pass human_goals=False for the synthetic instructions"
        )
    return goals_from_human_instructions if human_goals else goals_from_synthetic_instructions


def build_catalog(
    records: OriginalRecords,
    *,
    human_goals: bool = True,
    seed: int = WEBSHOP_SEED,
    num_products: int | None = None,
    source: str,
) -> Catalog:
    """Turn raw records into a :class:`Catalog`: products, goals and the paper splits.

    ``seed`` drives the price draws for ranges and the price bounds of goals;
    ``num_products`` keeps only the first products (the files are pre-shuffled).
    """
    maker = goal_maker(records.files, human_goals=human_goals)
    rng = random.Random(seed)
    products = tuple(iter_products(records, rng, limit=num_products))
    goals, splits = split_goals(maker(records, products, rng))
    return Catalog(
        products=products,
        goals=goals,
        splits=splits,
        content_hash=catalog_hash(
            records.digest, human_goals=human_goals, seed=seed, num_products=num_products
        ),
        source=source,
    )


def load_original(
    directory: str | Path,
    *,
    human_goals: bool = True,
    seed: int = WEBSHOP_SEED,
    num_products: int | None = None,
) -> Catalog:
    """Load the original WebShop files (or files in their format) from ``directory``.

    ``human_goals`` picks ``items_human_ins.json`` (the paper's 12,087 human instructions)
    over the synthetic instructions of ``items_ins_v2*.json``.
    """
    records = read_original(directory)
    return build_catalog(
        records,
        human_goals=human_goals,
        seed=seed,
        num_products=num_products,
        source=f"original:{Path(directory).expanduser().resolve()}",
    )


@lru_cache(maxsize=1)
def bundled_catalog() -> Catalog:
    """The generated catalog that ships with aem (cached per process)."""
    return build_catalog(read_original(DATA_DIR), human_goals=True, source="bundled")
