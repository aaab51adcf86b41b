"""A generated WebShop catalog: product families, reviews and goals, in the original formats.

Every draw comes from one ``random.Random(seed)`` in a fixed order, so a seed fixes the
catalog byte for byte; the records go through the same loader as the original files.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aem_envs.core.errors import DataError
from aem_envs.core.io import atomic_write_json
from aem_envs.webshop.catalog import Catalog
from aem_envs.webshop.generate.vocabulary import Category, ProductType, vocabulary
from aem_envs.webshop.records import OriginalRecords, write_original
from aem_envs.webshop.tasks import build_catalog

BUNDLED_PRODUCTS = 10_000
BUNDLED_GOALS = 3_000
BUNDLED_SEED = 2022
#: "a" before a vowel, to be turned into "an".
_AN = re.compile(r"\ba (?=[aeiou])")


@dataclass
class _Listing:
    """A product record under construction, plus what goals need to know about it."""

    record: dict[str, Any]
    kind: ProductType
    attributes: list[str]
    #: The attribute that tells this family member apart from its siblings.
    distinct: str
    options: dict[str, list[str]]


def _brands(rng: random.Random, count: int) -> list[str]:
    names: set[str] = set()
    while len(names) < count:
        parts = rng.sample(vocabulary().brand_syllables, rng.choice((2, 2, 3)))
        names.add("".join(parts).capitalize())
    return sorted(names)


def _asin(rng: random.Random, taken: set[str]) -> str:
    alphabet = string.ascii_uppercase + string.digits
    while True:
        asin = "B0" + "".join(rng.choices(alphabet, k=8))
        if asin not in taken:
            taken.add(asin)
            return asin


def _title_case(text: str) -> str:
    return " ".join(word if word[:1].isdigit() else word.capitalize() for word in text.split())


def _price_string(rng: random.Random, kind: ProductType) -> str:
    """A price string like the scraped ones; ranges and an occasional missing price."""
    low, high = kind.price
    value = round(rng.uniform(low, high)) - 0.01
    roll = rng.random()
    if roll < 0.02:
        return ""
    if roll < 0.22:
        top = round(value * rng.uniform(1.1, 1.6)) - 0.01
        return f"${value:,.2f} to ${top:,.2f}"
    return f"${value:,.2f}"


def _listing(
    rng: random.Random,
    asins: set[str],
    category: Category,
    kind: ProductType,
    brand: str,
    shared: list[str],
    distinct: str,
) -> _Listing:
    attributes = [*shared, distinct]
    rng.shuffle(attributes)
    options: dict[str, list[str]] = {}
    for group, pool in kind.options.items():
        k = rng.randint(min(2, len(pool)), min(6, len(pool)))
        options[group] = sorted(rng.sample(pool, k), key=pool.index)
    title_attrs = " ".join(_title_case(a) for a in attributes[:2])
    title = f"{brand} {title_attrs} {_title_case(kind.noun)}"
    if kind.audiences and rng.random() < 0.6:
        title += f" {rng.choice(kind.audiences)}"
    if attributes[2:]:
        title += ", " + ", ".join(_title_case(a) for a in attributes[2:])
    noun = kind.noun
    sentences = [s.format(brand=brand, noun=noun) for s in rng.sample(category.sentences, 2)]
    description = " ".join(
        [
            sentences[0],
            f"This {noun} is {', '.join(attributes[:-1])} and {attributes[-1]}.",
            sentences[1],
        ]
    )
    bullets = [
        rng.choice(vocabulary().bullets).format(A=a.upper(), a=a, noun=noun)
        for a in rng.sample(attributes, len(attributes))
    ]
    pricing = _price_string(rng, kind)
    asin = _asin(rng, asins)
    record = {
        "asin": asin,
        "category": category.name,
        "query": kind.query,
        "name": title,
        "product_category": " › ".join((category.root, *kind.path)),
        "full_description": description,
        "small_description": bullets,
        "pricing": pricing,
        "customization_options": {
            group: [{"value": value} for value in values] for group, values in options.items()
        },
        "images": [],
    }
    return _Listing(record, kind, attributes, distinct, options)


def _reviews(rng: random.Random, listing: _Listing) -> dict[str, Any] | None:
    """Zero to three reviews; a listing without reviews has no entry (rating shown N.A.)."""
    n = rng.choice((0, 0, 1, 2, 3))
    if n == 0:
        return None
    words = vocabulary()
    reviews: list[dict[str, Any]] = []
    for _ in range(n):
        score = rng.choices((5, 4, 3, 2, 1), weights=(5, 3, 1, 1, 1))[0]
        attribute = rng.choice(listing.attributes)
        reviews.append(
            {
                "title": rng.choice(words.review_titles[score]),
                "score": score,
                "review": words.review_bodies[score].format(noun=listing.kind.noun, a=attribute),
            }
        )
    average = round(sum(r["score"] for r in reviews) / n, 1)
    return {"asin": listing.record["asin"], "average_rating": average, "reviews": reviews}


def _join(words: Sequence[str]) -> str:
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " and " + words[-1]


def _request(rng: random.Random, listing: _Listing) -> tuple[str, list[str]]:
    """An instruction naming the product type and some attributes (always the one that sets
    the listing apart from its siblings), and those attributes."""
    others = [a for a in listing.attributes if a != listing.distinct]
    extra = rng.randint(min(1, len(others)), min(2, len(others)))
    attributes = [listing.distinct, *rng.sample(others, extra)]
    rng.shuffle(attributes)
    noun = listing.kind.noun
    plural = noun.endswith("s")
    text = rng.choice(vocabulary().instruction_openings).format(
        a="" if plural else "a", attrs=_join(attributes), noun=noun, be="are" if plural else "is"
    )
    return _AN.sub("an ", " ".join(text.split())), attributes


def _human_instruction(rng: random.Random, listing: _Listing) -> dict[str, Any]:
    """A human-style instruction for one listing: type, attributes and option values."""
    text, attributes = _request(rng, listing)
    chosen = {
        group: rng.choice(values)
        for group, values in listing.options.items()
        if len(listing.options) == 1 or rng.random() < 0.8
    }
    if chosen:
        text += " " + _join([vocabulary().option_phrases[g].format(v=v) for g, v in chosen.items()])
    return {
        "instruction": text,
        "instruction_attributes": attributes,
        "instruction_options": list(chosen.values()),
    }


def generate_records(n_products: int, n_goals: int, seed: int) -> OriginalRecords:
    """The catalog's content in the original JSON structures (:mod:`~aem_envs.webshop.records`)."""
    if n_products < 1 or n_goals < 0 or n_goals > n_products:
        raise DataError(
            f"need 1 <= n_products and 0 <= n_goals <= n_products, got {n_products}, {n_goals}"
        )
    rng = random.Random(seed)
    asins: set[str] = set()
    brands = {c.name: _brands(rng, 60) for c in vocabulary().categories}
    listings: list[_Listing] = []
    while len(listings) < n_products:
        category = rng.choice(vocabulary().categories)
        kind = rng.choice(category.types)
        brand = rng.choice(brands[category.name])
        size = min(rng.choice((1, 2, 3, 3, 4)), n_products - len(listings))
        pool = rng.sample(kind.attributes, len(kind.attributes))
        shared, distinct = pool[:2], pool[2 : 2 + size]
        for attribute in distinct:
            listings.append(_listing(rng, asins, category, kind, brand, shared, attribute))
    rng.shuffle(listings)  # the original items_shuffle files are shuffled too
    human: dict[str, list[dict[str, Any]]] = {}
    for index in sorted(rng.sample(range(len(listings)), n_goals)):
        listing = listings[index]
        human[listing.record["asin"]] = [_human_instruction(rng, listing)]
    attributes: dict[str, dict[str, Any]] = {}
    for listing in listings:
        text, instruction_attributes = _request(rng, listing)
        attributes[listing.record["asin"]] = {
            "attributes": listing.attributes,
            "instruction": text,
            "instruction_attributes": instruction_attributes,
        }
    reviews = [r for r in (_reviews(rng, listing) for listing in listings) if r is not None]
    return OriginalRecords.from_content(
        products=[listing.record for listing in listings],
        attributes=attributes,
        human_instructions=human,
        reviews=reviews,
        files={
            "products": "items_shuffle.json",
            "attributes": "items_ins_v2.json",
            "human_instructions": "items_human_ins.json",
            "reviews": "reviews.json",
        },
    )


def generate_catalog(n_products: int, n_goals: int, seed: int) -> Catalog:
    """A generated catalog, equal to writing its records and loading them back."""
    records = generate_records(n_products, n_goals, seed)
    return build_catalog(records, human_goals=True, source=f"generated:{seed}")


def split_category_counts(catalog: Catalog) -> dict[str, dict[str, int]]:
    """Goals per split and category: what ``aem envs`` prints, kept in the manifest so that
    listing envs does not load 10,000 products."""
    counts: dict[str, dict[str, int]] = {}
    for split, goal_ids in catalog.splits.items():
        per_category: dict[str, int] = {}
        for goal_id in goal_ids:
            category = catalog.goals_by_id[goal_id].category
            per_category[category] = per_category.get(category, 0) + 1
        counts[split] = dict(sorted(per_category.items()))
    return counts


def write_catalog(
    n_products: int, n_goals: int, seed: int, out: str | Path, *, compress: bool
) -> None:
    """Write a generated catalog's files and a manifest recording how it was made.

    The manifest is written last, so its presence marks a complete folder.
    """
    out = Path(out)
    records = generate_records(n_products, n_goals, seed)
    write_original(records, out, compress=compress)
    catalog = build_catalog(records, human_goals=True, source=f"generated:{seed}")
    atomic_write_json(
        out / "manifest.json",
        {
            "generator": "python -m aem_envs.webshop.generate",
            "seed": seed,
            "products": len(catalog.products),
            "goals": len(catalog.goals),
            "splits": {name: len(ids) for name, ids in catalog.splits.items()},
            "task_types": split_category_counts(catalog),
            "content_hash": catalog.content_hash,
        },
    )
