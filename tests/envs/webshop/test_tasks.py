"""Loading WebShop data in the original formats: parsing, goals, splits, errors, bundled data."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import pytest

from aem_envs.core.errors import DataError
from aem_envs.webshop import records
from aem_envs.webshop.env import WebShopEnv
from aem_envs.webshop.generate.build import (
    generate_catalog,
    generate_records,
    split_category_counts,
)
from aem_envs.webshop.goals import NO_PRICE_BOUND, price_bound
from aem_envs.webshop.jsonstream import EncodedEntries
from aem_envs.webshop.products import DUMMY_ATTRIBUTE, iter_products, parse_price
from aem_envs.webshop.records import read_original, write_original
from aem_envs.webshop.tasks import DATA_DIR, bundled_catalog, load_original


def product(asin: str, **fields: Any) -> dict[str, Any]:
    record = {
        "asin": asin,
        "name": f"Acme Shampoo {asin}",
        "category": "beauty",
        "query": " Shampoo ",
        "product_category": "Beauty › Hair Care › Shampoo",
        "pricing": "$12.99",
        "customization_options": {
            "Size": [{"value": "Small "}, {"value": "Large"}],
            "Color": [{"value": "Navy/Blue", "image": "x.jpg"}],
            "Empty": None,
        },
        "full_description": "A gentle shampoo.",
        "small_description": ["SULFATE FREE - gentle"],
        "images": ["https://example.invalid/a.jpg"],
    }
    record.update(fields)
    return record


def write_folder(
    folder: Path,
    products: list[dict[str, Any]],
    attributes: dict[str, Any] | None = None,
    human: dict[str, Any] | None = None,
    reviews: list[dict[str, Any]] | None = None,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "items_shuffle_1000.json").write_text(json.dumps(products))
    (folder / "items_ins_v2_1000.json").write_text(json.dumps(attributes or {}))
    if human is not None:
        (folder / "items_human_ins.json").write_text(json.dumps(human))
    if reviews is not None:
        (folder / "reviews.json").write_text(json.dumps(reviews))
    return folder


HUMAN = {
    "A1": [
        {
            "instruction": "i need a sulfate free shampoo in large size.",
            "instruction_attributes": ["sulfate free"],
            "instruction_options": ["large"],
        },
        {"instruction": "skipped: no attributes", "instruction_attributes": []},
    ],
    "A3": [
        {
            "instruction": "an expensive shampoo",
            "instruction_attributes": ["luxury"],
            "instruction_options": {"size": "small"},
        }
    ],
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return write_folder(
        tmp_path / "webshop",
        [
            product("A1"),
            product("A1", name="duplicate, dropped"),
            product("nan"),
            product("A2345678901"),  # longer than 10 characters: dropped
            product("A2", pricing="$10.00 to $20.00", small_description="one bullet"),
            product("A3", pricing="$985.50", customization_options=None),
            product("A4", pricing=None, images=[]),
        ],
        attributes={"A1": {"attributes": ["sulfate free", "tea tree"]}, "A2": {}},
        human=HUMAN,
        reviews=[
            {
                "asin": "A1",
                "average_rating": 4.5,
                "reviews": [
                    {"title": "Nice", "stars": 5, "review": "Lovely"},
                    {"title": "Ok", "score": 4},
                ],
            }
        ],
    )


# -------------------------------------------------------------------------------- prices


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$12.99", [12.99]),
        ("$1,299.00", [1299.0]),
        ("$10.00 to $25.50", [10.0, 25.5]),
        ("$12.99 - $15.99 - $20.00", [12.99, 15.99]),
        ("$", [100.0]),
        ("", [100.0]),
        (None, [100.0]),
    ],
)
def test_parse_price_follows_the_original(text: str | None, expected: list[float]) -> None:
    assert parse_price(text) == expected


def test_unreadable_price_names_the_field() -> None:
    with pytest.raises(DataError, match=r"items\.json: field '\[3\]\.pricing'"):
        parse_price("$1.2.3", file="items.json", where="[3].pricing")


def test_price_bound_rule() -> None:
    rng = random.Random(0)
    bounds = {price_bound(23.5, rng)[0] for _ in range(200)}
    # Two of the four multiples of ten above the price are drawn; the larger one is kept.
    assert bounds == {40.0, 50.0, 60.0}
    upper, text = price_bound(23.5, rng)
    assert text == f", and price lower than {upper:.2f} dollars"
    assert price_bound(985.0, rng) == (NO_PRICE_BOUND, "")
    assert price_bound(975.0, rng)[0] == 990.0


# ------------------------------------------------------------------------------ products


def test_products_are_parsed_like_the_original(folder: Path) -> None:
    catalog = load_original(folder, seed=7)
    assert [p.asin for p in catalog.products] == ["A1", "A2", "A3", "A4"]
    a1, a2, a3, a4 = catalog.products
    assert a1.query == "shampoo"
    assert a1.options == {"size": ("small", "large"), "color": ("navy | blue",)}
    assert a1.attributes == ("sulfate free", "tea tree")
    assert a1.prices == (12.99,) and a1.price == 12.99 and a1.price_text == "$12.99"
    assert a1.main_image == "https://example.invalid/a.jpg"
    assert a1.rating == 4.5
    assert [dict(r) for r in a1.reviews] == [
        {"title": "Nice", "score": "5", "body": "Lovely"},
        {"title": "Ok", "score": "4", "body": ""},
    ]
    assert a2.prices == (10.0, 20.0) and 10.0 <= a2.price <= 20.0
    assert a2.price_text == "$10.0 to $20.0"
    assert a2.bullet_points == ("one bullet",)
    assert a2.attributes == (DUMMY_ATTRIBUTE,)
    assert a3.options == {}
    assert a4.prices == (100.0,) and a4.price == 100.0 and a4.main_image is None
    assert a4.rating is None and a4.reviews == ()


def test_range_prices_are_a_seeded_draw(folder: Path) -> None:
    first = load_original(folder, seed=1).by_asin["A2"].price
    assert load_original(folder, seed=1).by_asin["A2"].price == first
    assert load_original(folder, seed=2).by_asin["A2"].price != first


def test_num_products_keeps_the_first_products(folder: Path) -> None:
    catalog = load_original(folder, num_products=1)
    assert [p.asin for p in catalog.products] == ["A1"]


# --------------------------------------------------------------------------------- goals


def test_human_goals(folder: Path) -> None:
    catalog = load_original(folder, seed=3)
    goals = sorted(catalog.goals, key=lambda g: g.asin)
    assert [g.asin for g in goals] == ["A1", "A3"]  # the attribute-less instruction is skipped
    g1, g3 = goals
    assert g1.instruction.startswith("i need a sulfate free shampoo in large size, and price")
    assert g1.price_upper in (30.0, 40.0, 50.0)
    assert g1.instruction.endswith(f"price lower than {g1.price_upper:.2f} dollars")
    assert g1.attributes == ("sulfate free",) and g1.goal_options == ("large",)
    assert (g1.name, g1.query, g1.weight) == ("Acme Shampoo A1", "shampoo", 1.0)
    # A price of 985.50 leaves one bound candidate: no price text, no bound.
    assert g3.price_upper == NO_PRICE_BOUND and g3.instruction == "an expensive shampoo"
    assert g3.goal_options == ("small",)


def test_synthetic_goals_cover_option_combinations_with_weights(tmp_path: Path) -> None:
    folder = write_folder(
        tmp_path,
        [product("A1"), product("A2", customization_options=None)],
        attributes={
            "A1": {
                "attributes": ["x"],
                "instruction": "i want a shampoo",
                "instruction_attributes": ["sulfate free", "tea tree"],
            },
            "A2": {"instruction": "i want a conditioner", "instruction_attributes": ["tea tree"]},
        },
    )
    catalog = load_original(folder, human_goals=False)
    texts = sorted(g.instruction.split(", and price")[0] for g in catalog.goals)
    assert texts == [
        "i want a conditioner",
        "i want a shampoo with color: navy | blue, and size: large",
        "i want a shampoo with color: navy | blue, and size: small",
    ]
    weights = {g.asin: g.weight for g in catalog.goals}
    # "sulfate free" occurs in 2 goals, "tea tree" in 3.
    assert weights["A1"] == pytest.approx((1 / 2 + 1 / 3) / 2)
    assert weights["A2"] == pytest.approx(1 / 3)


def test_human_goals_need_the_human_file(tmp_path: Path) -> None:
    folder = write_folder(tmp_path, [product("A1")])
    with pytest.raises(DataError, match=r"items_human_ins\.json"):
        load_original(folder)


# -------------------------------------------------------------------------------- splits


def test_paper_splits(tmp_path: Path) -> None:
    human = {
        f"B{i:04d}": [{"instruction": f"goal {i}", "instruction_attributes": ["a"]}]
        for i in range(1600)
    }
    folder = write_folder(tmp_path, [product(asin) for asin in human], human=human)
    catalog = load_original(folder)
    assert {k: len(v) for k, v in catalog.splits.items()} == {
        "test": 500,
        "eval": 1000,
        "train": 100,
    }
    assert [g.goal_id for g in catalog.goals] == [str(i) for i in range(1600)]
    assert catalog.splits["test"] == tuple(str(i) for i in range(500))
    # Shuffled once with a fixed seed: independent of the loader's seed.
    assert [g.asin for g in catalog.goals[:20]] != sorted(human)[:20]
    assert [g.asin for g in load_original(folder, seed=9).goals] == [g.asin for g in catalog.goals]
    assert catalog.split_goals("eval")[0].goal_id == "500"


# -------------------------------------------------------------------------------- errors


def _corrupt(folder: Path, file: str, mutate: Any) -> None:
    path = folder / file
    content = json.loads(path.read_text())
    mutate(content)
    path.write_text(json.dumps(content))


@pytest.mark.parametrize(
    ("file", "mutate", "message"),
    [
        ("items_shuffle_1000.json", lambda c: c[0].pop("name"), r"'\[0\]\.name' is missing"),
        (
            "items_shuffle_1000.json",
            lambda c: c[4].__setitem__("pricing", [12]),
            r"'\[4\]\.pricing' should be a price string",
        ),
        (
            "items_shuffle_1000.json",
            lambda c: c[0]["customization_options"]["Size"].append({"val": "x"}),
            r"'\[0\]\.customization_options\.Size' has an entry without a string 'value'",
        ),
        (
            "items_shuffle_1000.json",
            lambda c: c[0].__setitem__("asin", 5),
            r"'\[0\]\.asin' should be a string",
        ),
        (
            "items_ins_v2_1000.json",
            lambda c: c["A1"].__setitem__("attributes", "tea tree"),
            r"'A1\.attributes' should be a list",
        ),
        (
            "items_human_ins.json",
            lambda c: c["A1"][0].pop("instruction"),
            r"'A1\[0\]\.instruction' should be a string",
        ),
        ("reviews.json", lambda c: c[0].pop("asin"), r"'\[0\]\.asin' is missing"),
    ],
)
def test_malformed_file_names_file_and_field(
    folder: Path, file: str, mutate: Any, message: str
) -> None:
    _corrupt(folder, file, mutate)
    with pytest.raises(DataError, match=message) as caught:
        load_original(folder)
    assert file in str(caught.value)


def test_invalid_json_names_the_file(folder: Path) -> None:
    (folder / "items_ins_v2_1000.json").write_text("{not json")
    with pytest.raises(DataError, match=r"items_ins_v2_1000\.json: not valid JSON"):
        load_original(folder)


def test_streaming_reads_the_large_files_in_blocks(folder: Path, monkeypatch) -> None:
    whole = read_original(folder)
    read_whole = records._read_text

    def refuse_large(path: Path) -> tuple[str, str]:
        assert not path.name.startswith(("items_shuffle", "items_ins")), f"{path} read whole"
        return read_whole(path)

    monkeypatch.setattr(records, "_read_text", refuse_large)
    streamed = records.stream_original(records.find_original(folder))
    assert isinstance(streamed.attributes, EncodedEntries)
    assert streamed.digest == whole.digest
    assert list(iter_products(streamed, random.Random(1))) == list(
        iter_products(whole, random.Random(1))
    )


def test_wrong_top_level_names_the_file(folder: Path) -> None:
    (folder / "items_shuffle_1000.json").write_text("{}")
    with pytest.raises(DataError, match=r"items_shuffle_1000\.json: field 'top level'"):
        load_original(folder)


def test_missing_folder_and_files(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not a folder"):
        load_original(tmp_path / "absent")
    with pytest.raises(DataError, match=r"no items_shuffle\*\.json"):
        load_original(tmp_path)


def test_file_variants(folder: Path) -> None:
    (folder / "items_shuffle_100.json").write_text("[]")
    with pytest.raises(DataError, match="several items_shuffle"):
        read_original(folder)
    # The unsuffixed full file wins over variants.
    (folder / "items_shuffle.json").write_text(json.dumps([product("Z1")]))
    assert [p["asin"] for p in read_original(folder).products] == ["Z1"]


def test_gzipped_files_are_read(folder: Path) -> None:
    path = folder / "items_shuffle_1000.json"
    plain = load_original(folder)
    (folder / "items_shuffle_1000.json.gz").write_bytes(gzip.compress(path.read_bytes()))
    path.unlink()
    assert load_original(folder).products == plain.products


# --------------------------------------------------------------------- round trip, bundle


@pytest.mark.parametrize("compress", [True, False])
def test_generated_catalog_round_trips_through_original_files(
    tmp_path: Path, compress: bool
) -> None:
    records = generate_records(300, 120, seed=5)
    write_original(records, tmp_path, compress=compress)
    loaded = load_original(tmp_path)
    generated = generate_catalog(300, 120, seed=5)
    assert loaded.products == generated.products
    assert loaded.goals == generated.goals
    assert loaded.splits == generated.splits
    assert loaded.content_hash == generated.content_hash
    assert loaded.source.startswith("original:") and generated.source == "generated:5"


def test_bundled_catalog() -> None:
    catalog = bundled_catalog()
    assert bundled_catalog() is catalog
    assert len(catalog.products) >= 10_000
    assert len(catalog.goals) >= 2_000
    assert len(catalog.splits["test"]) == 500 and len(catalog.splits["eval"]) == 1000
    assert len(catalog.splits["train"]) == len(catalog.goals) - 1500
    assert {p.category for p in catalog.products} == {
        "beauty",
        "food",
        "fashion",
        "furniture",
        "electronics",
    }
    assert all(goal.asin in catalog.by_asin for goal in catalog.goals)
    manifest = json.loads((DATA_DIR / "manifest.json").read_text())
    assert manifest["content_hash"] == catalog.content_hash
    assert manifest["products"] == len(catalog.products)
    # `aem envs` reads the per-split counts from the manifest instead of the catalog.
    assert manifest["task_types"] == split_category_counts(catalog)
    assert WebShopEnv.task_set_summary() == manifest["task_types"]
