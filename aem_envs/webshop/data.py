"""Reading and writing WebShop catalogs in the original file formats.

The original WebShop ships its data as JSON files (``items_shuffle*.json`` for products,
``items_ins_v2*.json`` for attributes and synthetic instructions, ``items_human_ins.json`` for
human instructions, ``reviews.json`` for reviews). Users who have them point
:func:`load_original` at their folder; the bundled catalog is the same set of files, made by
:mod:`aem_envs.webshop.generate` and shipped gzipped, read through the very same code.

Parsing follows the original engine (``web_agent_site/engine/engine.py`` and ``goal.py``):
price strings ``$a`` / ``$a to $b`` (a missing price counts as 100, a range is priced by a
uniform draw), option values lower-cased with ``/`` shown as `` | ``, ``DUMMY_ATTR`` for
products without attributes, the ``price_upper`` rule and goal weights. Randomness comes from
one seeded generator instead of the global one, so a seed fixes the whole catalog; the split
shuffle uses the original's fixed seed, so goal ``i`` is the original's goal ``i`` when the
original files are given.
"""

from __future__ import annotations

import bisect
import gzip
import hashlib
import itertools
import json
import random
import re
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from pathlib import Path
from typing import Any

from aem_envs.core.errors import DataError
from aem_envs.core.io import atomic_write_bytes
from aem_envs.webshop.catalog import Catalog, Goal, Product

#: The seed the original environments shuffle goals with before splitting them.
WEBSHOP_SEED = 233
#: Goals per split, in order after the shuffle; the rest are ``train``.
SPLIT_SIZES: tuple[tuple[str, int], ...] = (("test", 500), ("eval", 1000))
SPLITS: tuple[str, ...] = ("test", "eval", "train")
#: The price a product without a price string gets.
MISSING_PRICE = 100.0
#: Candidate price bounds: multiples of 10 up to 990; the bound is drawn from the first four
#: above the product's price.
PRICE_BOUNDS: tuple[float, ...] = tuple(10.0 * i for i in range(1, 100))
#: ``price_upper`` of a goal whose instruction states no price.
NO_PRICE_BOUND = 1_000_000.0
#: What a product without attributes in the ins file gets (as in the original).
DUMMY_ATTRIBUTE = "DUMMY_ATTR"

PRODUCTS_STEM = "items_shuffle"
ATTRIBUTES_STEM = "items_ins_v2"
HUMAN_FILE = "items_human_ins"
REVIEWS_FILE = "reviews"

BUNDLED_DIR = Path(__file__).with_name("data")

_NOT_PRICE_CHARS = re.compile(r"[^\d.]")
_PLAIN_PRICE = re.compile(r"\$(\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class OriginalRecords:
    """The raw JSON content of one WebShop data folder (or of a generated catalog).

    Why a separate stage: the generator produces these records directly, so generating a
    catalog and writing-then-loading it run the same parsing code and give equal catalogs.
    """

    #: Product records in file order; read from a file, each is decoded when iterated.
    products: Iterable[dict[str, Any]]
    attributes: dict[str, dict[str, Any]]
    human_instructions: dict[str, list[dict[str, Any]]]
    reviews: list[dict[str, Any]]
    #: Record kind → the file name it came from, for error messages.
    files: Mapping[str, str]
    #: Hash of the files' bytes (of their encoding, for records made in memory).
    digest: str

    @classmethod
    def from_content(
        cls,
        products: list[dict[str, Any]],
        attributes: dict[str, dict[str, Any]],
        human_instructions: dict[str, list[dict[str, Any]]],
        reviews: list[dict[str, Any]],
        files: Mapping[str, str],
    ) -> OriginalRecords:
        """Records made in memory, hashed as :func:`write_original` would write them."""
        parts = (products, attributes, human_instructions, reviews)
        digest = _digest([_file_digest(encode_json(part)) for part in parts])
        return cls(products, attributes, human_instructions, reviews, files, digest)

    def encoded(self) -> dict[str, bytes]:
        """File stem → the bytes :func:`write_original` writes (before compression)."""
        return {
            PRODUCTS_STEM: encode_json(list(self.products)),
            ATTRIBUTES_STEM: encode_json(self.attributes),
            HUMAN_FILE: encode_json(self.human_instructions),
            REVIEWS_FILE: encode_json(self.reviews),
        }


def encode_json(content: Any) -> bytes:
    """The compact JSON encoding the writer uses (and the digest of in-memory records hashes)."""
    return json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _file_digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def _digest(file_digests: Sequence[str]) -> str:
    return hashlib.sha256(" ".join(file_digests).encode("ascii")).hexdigest()


# ---------------------------------------------------------------------------------- files


def _candidates(directory: Path, stem: str) -> list[Path]:
    return sorted(
        path
        for pattern in (f"{stem}*.json", f"{stem}*.json.gz")
        for path in directory.glob(pattern)
        if path.is_file()
    )


def _pick(directory: Path, stem: str) -> Path | None:
    """The one file of a kind; the unsuffixed name wins when several variants are present."""
    found = _candidates(directory, stem)
    exact = [p for p in found if p.name in (f"{stem}.json", f"{stem}.json.gz")]
    if exact:
        return exact[0]
    if len(found) <= 1:
        return found[0] if found else None
    names = ", ".join(p.name for p in found)
    raise DataError(
        f"{directory}: several {stem}*.json files ({names}); keep one of them in the folder "
        f"or rename the one to use to {stem}.json"
    )


def _read_text(path: Path) -> tuple[str, str]:
    """A file's (decompressed) text and the digest of its bytes.

    Why not keep the bytes: a large catalog's file is hundreds of MB, freed here at once.
    """
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        return raw.decode("utf-8"), _file_digest(raw)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise DataError(f"{path}: cannot read the file ({exc})") from exc
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc}); re-download or regenerate it") from exc


def _invalid_json(file: str, exc: Exception) -> DataError:
    return DataError(f"{file}: not valid JSON ({exc}); re-download or regenerate it")


def _read_json(path: Path) -> tuple[Any, str]:
    """A file's parsed content and the digest of its bytes."""
    text, digest = _read_text(path)
    try:
        return json.loads(text), digest
    except json.JSONDecodeError as exc:
        raise _invalid_json(str(path), exc) from exc


_JSON_SPACE = re.compile(r"[ \t\n\r]*")


def _skip_space(text: str, at: int) -> int:
    match = _JSON_SPACE.match(text, at)
    return match.end() if match else at


class JsonArrayText:
    """The elements of a JSON array, decoded one at a time each time it is iterated.

    Why: decoding a products file whole holds every record's dict at once — for 100k
    products about twice the memory of the finished catalog, left fragmented afterwards.
    Decoding element by element keeps one record alive at a time.
    """

    def __init__(self, text: str, file: str) -> None:
        self._text = text
        self._file = file

    def __iter__(self) -> Iterator[Any]:
        text, file = self._text, self._file
        decoder = json.JSONDecoder()
        at = _skip_space(text, 0)
        if not text.startswith("[", at):
            raise DataError(
                f"{file}: field 'top level' should be a list of products; "
                "the file is not in the WebShop format"
            )
        at = _skip_space(text, at + 1)
        if text.startswith("]", at):
            return
        while True:
            try:
                element, at = decoder.raw_decode(text, at)
            except json.JSONDecodeError as exc:
                raise _invalid_json(file, exc) from exc
            yield element
            at = _skip_space(text, at)
            if text.startswith(",", at):
                at = _skip_space(text, at + 1)
            elif text.startswith("]", at) and not text[at + 1 :].strip():
                return
            else:
                raise _invalid_json(file, ValueError(f"expected ',' or ']' at character {at}"))


def read_original(directory: str | Path) -> OriginalRecords:
    """Read the JSON files of a WebShop data folder without interpreting them yet."""
    folder = Path(directory).expanduser()
    if not folder.is_dir():
        raise DataError(f"{folder}: not a folder; give the folder holding items_shuffle*.json")
    products_path = _pick(folder, PRODUCTS_STEM)
    attributes_path = _pick(folder, ATTRIBUTES_STEM)
    human_path = _pick(folder, HUMAN_FILE)
    reviews_path = _pick(folder, REVIEWS_FILE)
    if products_path is None or attributes_path is None:
        missing = PRODUCTS_STEM if products_path is None else ATTRIBUTES_STEM
        raise DataError(
            f"{folder}: no {missing}*.json file; point the loader at the folder holding "
            "the WebShop data files (items_shuffle*.json, items_ins_v2*.json)"
        )
    files = {"products": str(products_path), "attributes": str(attributes_path)}
    products_text, products_digest = _read_text(products_path)
    products = JsonArrayText(products_text, files["products"])
    attributes, attributes_digest = _read_json(attributes_path)
    _expect(attributes, dict, files["attributes"], "top level", "an object keyed by asin")
    human: dict[str, list[dict[str, Any]]] = {}
    human_digest = _file_digest(encode_json(human))
    if human_path is not None:
        files["human_instructions"] = str(human_path)
        human, human_digest = _read_json(human_path)
        _expect(human, dict, files["human_instructions"], "top level", "an object keyed by asin")
    reviews: list[dict[str, Any]] = []
    reviews_digest = _file_digest(encode_json(reviews))
    if reviews_path is not None:
        files["reviews"] = str(reviews_path)
        reviews, reviews_digest = _read_json(reviews_path)
        _expect(reviews, list, files["reviews"], "top level", "a list")
    digest = _digest([products_digest, attributes_digest, human_digest, reviews_digest])
    return OriginalRecords(products, attributes, human, reviews, files, digest)


def write_original(records: OriginalRecords, directory: str | Path, *, compress: bool) -> None:
    """Write records as the original files (gzipped ``.json.gz`` when ``compress``)."""
    folder = Path(directory)
    for stem, raw in records.encoded().items():
        if compress:
            atomic_write_bytes(folder / f"{stem}.json.gz", gzip.compress(raw, 9, mtime=0))
        else:
            atomic_write_bytes(folder / f"{stem}.json", raw)


# -------------------------------------------------------------------------------- parsing


def _expect(value: Any, kind: type | tuple[type, ...], file: str, field: str, what: str) -> None:
    if not isinstance(value, kind):
        raise DataError(
            f"{file}: field '{field}' should be {what}, got {type(value).__name__}; "
            "the file is not in the WebShop format"
        )


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
    _expect(text, str, file, where, 'a price string such as "$12.99" or "$10 to $20"')
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
    _expect(raw, dict, file, where, "an object of option name → list of {value: ...}")
    options: dict[str, tuple[str, ...]] = {}
    for name, contents in raw.items():
        if contents is None:
            continue
        _expect(contents, list, file, f"{where}.{name}", "a list of {value: ...}")
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
        _expect(raw[key], str, file, f"{where}.{key}", "a string")
    _expect(raw.get("full_description") or "", str, file, f"{where}.full_description", "a string")


def _required_text(record: Mapping[str, Any], key: str, file: str, where: str) -> str:
    if key not in record:
        raise DataError(f"{file}: field '{where}.{key}' is missing; every entry needs it")
    _expect(record[key], str, file, f"{where}.{key}", "a string")
    return record[key]


def _reviews_by_asin(
    reviews: Sequence[Any], file: str
) -> dict[str, tuple[float | None, tuple[dict[str, str], ...]]]:
    out: dict[str, tuple[float | None, tuple[dict[str, str], ...]]] = {}
    for i, entry in enumerate(reviews):
        where = f"[{i}]"
        _expect(entry, dict, file, where, "an object with asin and reviews")
        asin = _required_text(entry, "asin", file, where)
        rating = entry.get("average_rating")
        if rating is not None and not isinstance(rating, int | float):
            try:
                rating = float(rating)
            except ValueError:
                rating = None
        items = entry.get("reviews") or []
        _expect(items, list, file, f"{where}.reviews", "a list of reviews")
        parsed = []
        for j, review in enumerate(items):
            _expect(review, dict, file, f"{where}.reviews[{j}]", "an object")
            parsed.append(
                {
                    "title": str(review.get("title") or ""),
                    "score": str(review.get("score", review.get("stars", ""))),
                    "body": str(review.get("review", review.get("body", "")) or ""),
                }
            )
        out[asin] = (None if rating is None else float(rating), tuple(parsed))
    return out


def parse_products(
    records: OriginalRecords, rng: random.Random, limit: int | None = None
) -> list[Product]:
    """Products as the original engine derives them, in file order, duplicates dropped.

    Why the shape of this loop: it runs once per product (1.18M in the original data), so
    types are checked in one pass and the detailed error is only built when one is wrong,
    and the strings products share (categories, options, attributes) are interned.
    """
    file = records.files["products"]
    attributes_file = records.files["attributes"]
    reviews = _reviews_by_asin(records.reviews, records.files.get("reviews", "reviews.json"))
    products: list[Product] = []
    seen: set[str] = set()
    for i, raw in enumerate(itertools.islice(records.products, limit)):
        if type(raw) is not dict:
            _expect(raw, dict, file, f"[{i}]", "a product object")
        asin = raw.get("asin")
        if type(asin) is not str:
            _expect(asin, str, file, f"[{i}].asin", "a string")
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
        prices = parse_price(raw.get("pricing"), file=file, where=f"[{i}].pricing")
        price = prices[0] if len(prices) == 1 else rng.uniform(prices[0], prices[1])
        bullets = raw.get("small_description")
        if bullets is None:
            bullets = ()
        elif type(bullets) is str:
            bullets = (bullets,)
        else:
            _expect(bullets, list, file, f"[{i}].small_description", "a list of strings")
        ins = records.attributes.get(asin)
        attributes = ins.get("attributes") if type(ins) is dict else None
        if attributes is None:
            attributes = (DUMMY_ATTRIBUTE,)
        else:
            _expect(attributes, list, attributes_file, f"{asin}.attributes", "a list")
        images = raw.get("images")
        rating, product_reviews = reviews.get(asin, (None, ()))
        products.append(
            Product(
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
        )
    return products


def price_bound(price: float, rng: random.Random) -> tuple[float, str]:
    """The original ``price_upper`` rule: two of the four multiples of 10 above the price are
    drawn and the larger one is the bound; with fewer than two candidates there is no bound."""
    first = bisect.bisect_right(PRICE_BOUNDS, price)
    candidates = list(PRICE_BOUNDS[first : first + 4])
    if len(candidates) < 2:
        return NO_PRICE_BOUND, ""
    _, upper = sorted(rng.sample(candidates, 2))
    return upper, f", and price lower than {upper:.2f} dollars"


#: A goal's fields before the split gives it an id.
GoalFields = dict[str, Any]


def _goal(product: Product, **fields: Any) -> GoalFields:
    return {
        "asin": product.asin,
        "query": product.query,
        "category": product.category,
        "name": product.name,
        "product_category": product.product_category,
        **fields,
    }


def _option_values(raw: Any, file: str, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, dict):
        raw = list(raw.values())
    _expect(raw, list, file, where, "a list of option values")
    return tuple(str(v) for v in raw)


def goals_from_human_instructions(
    records: OriginalRecords, products: Sequence[Product], rng: random.Random
) -> list[GoalFields]:
    """Goals from ``items_human_ins.json``; instructions without attributes are skipped."""
    file = records.files.get("human_instructions", "items_human_ins.json")
    goals: list[GoalFields] = []
    for product in products:
        entries = records.human_instructions.get(product.asin)
        if not entries:
            continue
        _expect(entries, list, file, product.asin, "a list of instructions")
        for k, entry in enumerate(entries):
            where = f"{product.asin}[{k}]"
            _expect(entry, dict, file, where, "an instruction object")
            attributes = entry.get("instruction_attributes")
            _expect(attributes, list, file, f"{where}.instruction_attributes", "a list")
            if not attributes:
                continue
            instruction = entry.get("instruction")
            _expect(instruction, str, file, f"{where}.instruction", "a string")
            upper, price_text = price_bound(product.price, rng)
            goals.append(
                _goal(
                    product,
                    instruction=instruction.strip(".") + price_text,
                    attributes=tuple(str(a) for a in attributes),
                    goal_options=_option_values(
                        entry.get("instruction_options"), file, f"{where}.instruction_options"
                    ),
                    price_upper=upper,
                )
            )
    return goals


def goals_from_synthetic_instructions(
    records: OriginalRecords, products: Sequence[Product], rng: random.Random
) -> list[GoalFields]:
    """Goals from the ins file's synthetic instructions: one per option combination, weighted
    by the inverse frequency of their attributes as in the original."""
    file = records.files["attributes"]
    goals: list[GoalFields] = []
    for product in products:
        ins = records.attributes.get(product.asin)
        if not isinstance(ins, dict) or ins.get("instruction") is None:
            continue
        instruction = ins["instruction"]
        _expect(instruction, str, file, f"{product.asin}.instruction", "a string")
        attributes = ins.get("instruction_attributes")
        _expect(attributes, list, file, f"{product.asin}.instruction_attributes", "a list")
        if not attributes:
            raise DataError(
                f"{file}: field '{product.asin}.instruction_attributes' is empty; a synthetic "
                "instruction needs at least one attribute"
            )
        upper, price_text = price_bound(product.price, rng)
        names = sorted(product.options)
        for combination in itertools.product(*(product.options[n] for n in names)):
            pairs = zip(names, combination, strict=True)
            option_text = ", and ".join(f"{name}: {value}" for name, value in pairs)
            option_text = f" with {option_text}" if option_text else ""
            goals.append(
                _goal(
                    product,
                    instruction=f"{instruction}{option_text}{price_text}",
                    attributes=tuple(str(a) for a in attributes),
                    goal_options=tuple(combination),
                    price_upper=upper,
                )
            )
    counts = Counter(att for goal in goals for att in goal["attributes"])
    for goal in goals:
        wanted = goal["attributes"]
        goal["weight"] = sum(1.0 / counts[a] for a in wanted) / len(wanted)
    return goals


def split_goals(
    goals: Sequence[GoalFields],
) -> tuple[tuple[Goal, ...], dict[str, tuple[str, ...]]]:
    """Shuffle goals once with the original's fixed seed and cut the paper splits.

    Goal ids are the positions after the shuffle, as the original's ``fixed_<i>`` sessions.
    """
    order = list(goals)
    random.Random(WEBSHOP_SEED).shuffle(order)
    numbered = tuple(Goal(goal_id=str(i), **fields) for i, fields in enumerate(order))
    ids = [g.goal_id for g in numbered]
    splits: dict[str, tuple[str, ...]] = {}
    start = 0
    for name, size in SPLIT_SIZES:
        splits[name] = tuple(ids[start : start + size])
        start += size
    splits["train"] = tuple(ids[start:])
    return numbered, splits


def catalog_hash(records: OriginalRecords, **parameters: Any) -> str:
    """A hash of the records' content and the loading parameters (not of file names)."""
    digest = hashlib.sha256(records.digest.encode("ascii"))
    digest.update(json.dumps(parameters, sort_keys=True).encode("utf-8"))
    return digest.hexdigest()[:16]


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
    rng = random.Random(seed)
    products = parse_products(records, rng, limit=num_products)
    if human_goals and "human_instructions" not in records.files:
        raise DataError(
            f"{Path(records.files['products']).parent}: human goals need items_human_ins.json; "
            "add it or pass human_goals=False for the synthetic instructions"
        )
    maker = goals_from_human_instructions if human_goals else goals_from_synthetic_instructions
    goals, splits = split_goals(maker(records, products, rng))
    return Catalog(
        products=tuple(products),
        goals=goals,
        splits=splits,
        content_hash=catalog_hash(
            records, human_goals=human_goals, seed=seed, num_products=num_products
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
    return build_catalog(read_original(BUNDLED_DIR), human_goals=True, source="bundled")
