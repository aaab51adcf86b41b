"""WebShop products as the original engine derives them from the product records.

Parsing follows the original engine (``web_agent_site/engine/engine.py``): price strings
``$a`` / ``$a to $b`` (a missing price counts as 100, a range is priced by a uniform draw of
the caller's seeded generator), option values lower-cased with ``/`` shown as `` | ``, and
``DUMMY_ATTR`` for products without attributes.
"""

from __future__ import annotations

import itertools
import random
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from aem_envs.core.errors import DataError
from aem_envs.webshop.catalog import Product
from aem_envs.webshop.records import OriginalRecords, expect

#: The price a product without a price string gets.
MISSING_PRICE = 100.0
#: What a product without attributes in the ins file gets (as in the original).
DUMMY_ATTRIBUTE = "DUMMY_ATTR"

_NOT_PRICE_CHARS = re.compile(r"[^\d.]")
_PLAIN_PRICE = re.compile(r"\$(\d+(?:\.\d+)?)")


def parse_price(text: Any, *, file: str = "<price>", where: str = "pricing") -> list[float]:
    """The price list of a price string, as the original engine reads it.

    ``"$12.99"`` → ``[12.99]``; ``"$10.00 to $25.50"`` → ``[10.0, 25.5]``; thousands separators
    and stray text are dropped; ``None`` or an empty string is a missing price (``[100.0]``).
    Parts without digits (``"$ "``) are skipped rather than crashing as the original would.
    """
    if text is None or text == "":
        return [MISSING_PRICE]
    plain = _PLAIN_PRICE.fullmatch(text) if isinstance(text, str) else None
    if plain:  # the common case, parsed as below but without the general machinery
        return [float(plain.group(1))]
    expect(text, str, file, where, 'a price string such as "$12.99" or "$10 to $20"')
    values: list[float] = []
    for part in text.split("$")[1:]:
        digits = _NOT_PRICE_CHARS.sub("", part).strip(".")
        if not digits:
            continue
        try:
            values.append(float(Decimal(digits)))
        except InvalidOperation as exc:
            raise DataError(
                f"{file}: field '{where}' has an unreadable price {text!r}; "
                'write it as "$12.99" or "$10 to $20"'
            ) from exc
    return values[:2] if values else [MISSING_PRICE]


def _parse_options(raw: Any, file: str, where: str) -> dict[str, tuple[str, ...]]:
    if not raw:
        return {}
    expect(raw, dict, file, where, "an object of option name → list of {value: ...}")
    options: dict[str, tuple[str, ...]] = {}
    for name, contents in raw.items():
        if contents is None:
            continue
        expect(contents, list, file, f"{where}.{name}", "a list of {value: ...}")
        try:
            values = tuple(
                sys.intern(c["value"].strip().replace("/", " | ").lower()) for c in contents
            )
        except (TypeError, KeyError, AttributeError):
            raise DataError(
                f"{file}: field '{where}.{name}' has an entry without a string 'value'; "
                'each option entry must look like {"value": "large"}'
            ) from None
        options[sys.intern(name.lower())] = values
    return options


#: Product fields every record must have, as strings.
_REQUIRED_TEXT = ("name", "category", "query", "product_category")


def _check_text_fields(raw: Mapping[str, Any], file: str, where: str) -> None:
    """Raise for the first required text field that is missing or not a string."""
    for key in _REQUIRED_TEXT:
        if key not in raw:
            raise DataError(f"{file}: field '{where}.{key}' is missing; every product needs it")
        expect(raw[key], str, file, f"{where}.{key}", "a string")
    expect(raw.get("full_description") or "", str, file, f"{where}.full_description", "a string")


def _required_text(record: Mapping[str, Any], key: str, file: str, where: str) -> str:
    if key not in record:
        raise DataError(f"{file}: field '{where}.{key}' is missing; every entry needs it")
    expect(record[key], str, file, f"{where}.{key}", "a string")
    return record[key]


def _reviews_by_asin(
    reviews: Iterable[Any], file: str
) -> dict[str, tuple[float | None, tuple[dict[str, str], ...]]]:
    out: dict[str, tuple[float | None, tuple[dict[str, str], ...]]] = {}
    for i, entry in enumerate(reviews):
        where = f"[{i}]"
        expect(entry, dict, file, where, "an object with asin and reviews")
        asin = _required_text(entry, "asin", file, where)
        rating = entry.get("average_rating")
        if rating is not None and not isinstance(rating, int | float):
            try:
                rating = float(rating)
            except ValueError:
                rating = None
        items = entry.get("reviews") or []
        expect(items, list, file, f"{where}.reviews", "a list of reviews")
        parsed = []
        for j, review in enumerate(items):
            expect(review, dict, file, f"{where}.reviews[{j}]", "an object")
            parsed.append(
                {
                    "title": str(review.get("title") or ""),
                    "score": str(review.get("score", review.get("stars", ""))),
                    "body": str(review.get("review", review.get("body", "")) or ""),
                }
            )
        out[asin] = (None if rating is None else float(rating), tuple(parsed))
    return out


def iter_products(
    records: OriginalRecords, rng: random.Random, limit: int | None = None
) -> Iterator[Product]:
    """Products as the original engine derives them, in file order, duplicates dropped.

    Why the shape of this loop: it runs once per product (1.18M in the original data), so
    types are checked in one pass and the detailed error is only built when one is wrong,
    and the strings products share (categories, options, attributes) are interned.
    """
    file = records.files["products"]
    attributes_file = records.files["attributes"]
    reviews = _reviews_by_asin(records.reviews, records.files.get("reviews", "reviews.json"))
    seen: set[str] = set()
    for i, raw in enumerate(itertools.islice(records.products, limit)):
        if type(raw) is not dict:
            expect(raw, dict, file, f"[{i}]", "a product object")
        asin = raw.get("asin")
        if type(asin) is not str:
            expect(asin, str, file, f"[{i}].asin", "a string")
        assert isinstance(asin, str)  # expect raised otherwise
        if asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        name, category, query, crumbs = (raw.get(key) for key in _REQUIRED_TEXT)
        description = raw.get("full_description") or ""
        if not (
            type(name) is str
            and type(category) is str
            and type(query) is str
            and type(crumbs) is str
            and type(description) is str
        ):
            _check_text_fields(raw, file, f"[{i}]")
        # _check_text_fields raised otherwise.
        assert isinstance(name, str) and isinstance(category, str)
        assert isinstance(query, str) and isinstance(crumbs, str)
        prices = parse_price(raw.get("pricing"), file=file, where=f"[{i}].pricing")
        price = prices[0] if len(prices) == 1 else rng.uniform(prices[0], prices[1])
        bullets = raw.get("small_description")
        if bullets is None:
            bullets = ()
        elif type(bullets) is str:
            bullets = (bullets,)
        else:
            expect(bullets, list, file, f"[{i}].small_description", "a list of strings")
        ins = records.attributes.get(asin)
        attributes = ins.get("attributes") if type(ins) is dict else None
        if attributes is None:
            attributes = (DUMMY_ATTRIBUTE,)
        else:
            expect(attributes, list, attributes_file, f"{asin}.attributes", "a list")
        images = raw.get("images")
        rating, product_reviews = reviews.get(asin, (None, ()))
        yield Product(
            asin=asin,
            name=name,
            category=sys.intern(category),
            query=sys.intern(query.lower().strip()),
            product_category=sys.intern(crumbs),
            prices=tuple(prices),
            price=price,
            options=_parse_options(
                raw.get("customization_options"), file, f"[{i}].customization_options"
            ),
            attributes=tuple(sys.intern(str(a)) for a in attributes),
            description=description,
            bullet_points=tuple(map(str, bullets)),
            rating=rating,
            reviews=product_reviews,
            main_image=images[0] if images and type(images[0]) is str else None,
        )
