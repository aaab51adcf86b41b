"""The WebShop data model shared by the loaders, the generator, the search engine and the site.

Fields follow what the original WebShop engine derives from its JSON files
(``items_shuffle*.json``, ``items_ins_v2*.json``, ``items_human_ins.json``), so that the
original data and our generated catalog flow through the same code.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar


@dataclass(frozen=True, slots=True)
class Product:
    """One product as the site shows it and the reward reads it."""

    asin: str
    name: str
    #: WebShop's top-level category: beauty, food, fashion, furniture or electronics.
    category: str
    #: The search query the product was scraped under (used by the reward's r_type rule).
    query: str
    #: The breadcrumb, levels joined by " › ".
    product_category: str
    #: The price list parsed from the price string: one value, or (low, high) for a range.
    prices: tuple[float, ...]
    #: The price the site shows and the reward compares; for a range a seeded uniform draw.
    price: float
    #: Option groups in page order, e.g. {"size": ("small", "large"), "color": (...)}.
    options: Mapping[str, tuple[str, ...]]
    attributes: tuple[str, ...]
    description: str
    bullet_points: tuple[str, ...]
    rating: float | None = None
    reviews: tuple[Mapping[str, str], ...] = ()
    main_image: str | None = None

    @property
    def price_text(self) -> str:
        """The price as the original site prints it: ``$a`` or ``$a to $b``."""
        if len(self.prices) > 1:
            return f"${self.prices[0]} to ${self.prices[1]}"
        return f"${self.prices[0]}"


@dataclass(frozen=True, slots=True)
class Goal:
    """One shopping instruction and what the reward checks against."""

    goal_id: str
    asin: str
    instruction: str
    attributes: tuple[str, ...]
    #: Option values the instruction asks for (the original's ``goal_options`` values).
    goal_options: tuple[str, ...]
    #: 1e6 when the instruction states no price bound.
    price_upper: float
    query: str
    category: str
    name: str
    product_category: str
    weight: float = 1.0


_Item = TypeVar("_Item")


class KeyedRecords(Sequence[_Item]):
    """Records read one at a time from storage, in order and by key.

    Why: the on-disk store (:mod:`~aem_envs.webshop.store`) serves a million products without
    holding them; a :class:`Catalog` over such a sequence looks records up through
    :attr:`by_key` instead of building a dict of them all.
    """

    @property
    @abstractmethod
    def by_key(self) -> Mapping[str, _Item]:
        """The records by asin (products) or goal id (goals)."""


@dataclass(frozen=True)
class Catalog:
    """Products, goals and the goal splits (goal ids per split: test / eval / train).

    The sequences are tuples when the catalog was loaded into memory and
    :class:`KeyedRecords` when it is read from the on-disk store.
    """

    products: Sequence[Product]
    goals: Sequence[Goal]
    splits: Mapping[str, Sequence[str]]
    #: Hash of the catalog's content; keys the on-disk store and search index.
    content_hash: str
    source: str = "bundled"
    by_asin: Mapping[str, Product] = field(init=False, repr=False, compare=False)
    goals_by_id: Mapping[str, Goal] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        products, goals = self.products, self.goals
        by_asin: Mapping[str, Product]
        goals_by_id: Mapping[str, Goal]
        if isinstance(products, KeyedRecords):
            by_asin = products.by_key
        else:
            by_asin = {p.asin: p for p in products}
        if isinstance(goals, KeyedRecords):
            goals_by_id = goals.by_key
        else:
            goals_by_id = {g.goal_id: g for g in goals}
        object.__setattr__(self, "by_asin", by_asin)
        object.__setattr__(self, "goals_by_id", goals_by_id)

    def split_goals(self, split: str) -> tuple[Goal, ...]:
        """The goals of one split, in split order."""
        return tuple(self.goals_by_id[goal_id] for goal_id in self.splits[split])
