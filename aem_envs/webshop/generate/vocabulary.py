"""The vocabulary the WebShop catalog generator draws from, loaded from ``vocabulary.json``.

Why a data file: the vocabulary (five categories, their product types with attributes,
option pools and price ranges, and the phrases titles, bullets, reviews and instructions are
written with) is a table, most of the generator by size; as JSON it reads as data and the
generator's code stays short. Order matters: the seeded draws index into these sequences.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

VOCABULARY_FILE = Path(__file__).with_name("vocabulary.json")


@dataclass(frozen=True)
class ProductType:
    """One kind of product and the vocabulary its listings draw from."""

    noun: str
    #: The query the original products were scraped under.
    query: str
    #: Breadcrumb levels below the category's root.
    path: tuple[str, ...]
    attributes: tuple[str, ...]
    #: Option group name (as on the product page) → the pool of values.
    options: Mapping[str, tuple[str, ...]]
    price: tuple[float, float]
    #: Phrases appended to some titles, e.g. "for Women".
    audiences: tuple[str, ...] = ()


@dataclass(frozen=True)
class Category:
    """One of WebShop's five top-level categories."""

    name: str
    root: str
    #: Description sentences; ``{noun}`` and ``{brand}`` are filled in.
    sentences: tuple[str, ...]
    types: tuple[ProductType, ...]


@dataclass(frozen=True)
class Vocabulary:
    """Everything the generator writes listings, reviews and instructions with."""

    categories: tuple[Category, ...]
    #: Brand names are two or three of these run together.
    brand_syllables: tuple[str, ...]
    #: Instruction templates; ``{a}``, ``{attrs}``, ``{noun}`` and ``{be}`` are filled in.
    instruction_openings: tuple[str, ...]
    #: Option group → how an instruction asks for a value ``{v}`` of it.
    option_phrases: Mapping[str, str]
    #: Bullet-point templates; ``{A}``, ``{a}`` and ``{noun}`` are filled in.
    bullets: tuple[str, ...]
    #: Review score → titles, and → the body template.
    review_titles: Mapping[int, tuple[str, ...]]
    review_bodies: Mapping[int, str]


def _product_type(raw: Mapping[str, Any]) -> ProductType:
    return ProductType(
        noun=raw["noun"],
        query=raw["query"],
        path=tuple(raw["path"]),
        attributes=tuple(raw["attributes"]),
        options={group: tuple(values) for group, values in raw["options"].items()},
        price=(raw["price"][0], raw["price"][1]),
        audiences=tuple(raw["audiences"]),
    )


@cache
def vocabulary() -> Vocabulary:
    """The generator's vocabulary (read once per process)."""
    raw = json.loads(VOCABULARY_FILE.read_text(encoding="utf-8"))
    return Vocabulary(
        categories=tuple(
            Category(
                name=c["name"],
                root=c["root"],
                sentences=tuple(c["sentences"]),
                types=tuple(map(_product_type, c["types"])),
            )
            for c in raw["categories"]
        ),
        brand_syllables=tuple(raw["brand_syllables"]),
        instruction_openings=tuple(raw["instruction_openings"]),
        option_phrases=raw["option_phrases"],
        bullets=tuple(raw["bullets"]),
        review_titles={int(k): tuple(v) for k, v in raw["review_titles"].items()},
        review_bodies={int(k): v for k, v in raw["review_bodies"].items()},
    )
