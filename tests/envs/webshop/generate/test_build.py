"""The catalog generator: determinism, realism of products and goals, distractors, CLI."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

from aem_envs.core.errors import DataError
from aem_envs.webshop.catalog import Catalog
from aem_envs.webshop.generate.__main__ import main
from aem_envs.webshop.generate.build import (
    BUNDLED_GOALS,
    BUNDLED_PRODUCTS,
    BUNDLED_SEED,
    generate_catalog,
    generate_records,
)
from aem_envs.webshop.generate.vocabulary import vocabulary
from aem_envs.webshop.goals import NO_PRICE_BOUND
from aem_envs.webshop.grading import get_reward
from aem_envs.webshop.tasks import DATA_DIR, bundled_catalog, load_original


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return generate_catalog(2000, 600, seed=11)


def test_same_seed_same_catalog_and_hash(catalog: Catalog) -> None:
    again = generate_catalog(2000, 600, seed=11)
    assert again.content_hash == catalog.content_hash
    assert again.products == catalog.products and again.goals == catalog.goals
    other = generate_catalog(2000, 600, seed=12)
    assert other.content_hash != catalog.content_hash
    assert [p.name for p in other.products[:20]] != [p.name for p in catalog.products[:20]]


def test_requested_sizes(catalog: Catalog) -> None:
    assert len(catalog.products) == 2000
    assert len(catalog.goals) == 600
    assert len({p.asin for p in catalog.products}) == 2000
    assert all(re.fullmatch(r"B0[A-Z0-9]{8}", p.asin) for p in catalog.products)


def test_products_look_like_webshop_products(catalog: Catalog) -> None:
    roots = {c.name: c.root for c in vocabulary().categories}
    assert {p.category for p in catalog.products} == set(roots)
    for p in catalog.products:
        levels = p.product_category.split(" › ")
        assert levels[0] == roots[p.category] and len(levels) >= 3
        assert p.options and all(p.options.values())
        assert len(p.attributes) >= 3
        assert p.bullet_points and p.description
        assert p.query == p.query.lower().strip()
        for attribute in p.attributes:
            assert attribute in p.description
    ranges = [p for p in catalog.products if len(p.prices) == 2]
    missing = [p for p in catalog.products if p.prices == (100.0,)]
    assert len(ranges) > 200 and missing
    assert all(p.prices[0] <= p.price <= p.prices[1] for p in ranges)
    rated = [p for p in catalog.products if p.reviews]
    assert len(rated) > 500
    assert all(1.0 <= p.rating <= 5.0 for p in rated if p.rating is not None)


def test_goal_instructions_name_type_attributes_options_and_price(catalog: Catalog) -> None:
    nouns = {t.query: t.noun for c in vocabulary().categories for t in c.types}
    for goal in catalog.goals:
        product = catalog.by_asin[goal.asin]
        text = goal.instruction
        assert nouns[goal.query] in text
        assert goal.attributes and all(a in text for a in goal.attributes)
        assert all(option in text for option in goal.goal_options)
        assert goal.name == product.name
        if goal.price_upper == NO_PRICE_BOUND:
            assert "price lower than" not in text
        else:
            assert text.endswith(f", and price lower than {goal.price_upper:.2f} dollars")
            assert goal.price_upper % 10 == 0
            assert 0 < goal.price_upper - product.price <= 40


def test_near_duplicate_distractors_make_choice_matter(catalog: Catalog) -> None:
    """Most goals have a sibling (same brand, same type) that does not satisfy them."""
    families: dict[tuple[str, str], list[str]] = defaultdict(list)
    for p in catalog.products:
        families[(p.name.split()[0], p.query)].append(p.asin)
    with_failing_sibling = 0
    for goal in catalog.goals:
        target = catalog.by_asin[goal.asin]
        for asin in families[(target.name.split()[0], target.query)]:
            if asin == goal.asin:
                continue
            sibling = catalog.by_asin[asin]
            best = {
                name: next((v for v in goal.goal_options if v in values), values[0])
                for name, values in sibling.options.items()
            }
            if not get_reward(sibling, goal, sibling.price, best).won:
                with_failing_sibling += 1
                break
    assert with_failing_sibling > 0.6 * len(catalog.goals)


def test_catalog_without_goals() -> None:
    catalog = generate_catalog(30, 0, seed=1)
    assert len(catalog.products) == 30 and catalog.goals == ()
    assert catalog.splits == {"test": (), "eval": (), "train": ()}


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(DataError, match="n_goals"):
        generate_records(10, 11, seed=0)
    with pytest.raises(DataError, match="n_products"):
        generate_records(0, 0, seed=0)


def test_command_line_writes_loadable_files(tmp_path: Path) -> None:
    main(["--out", str(tmp_path), "--products", "150", "--goals", "40", "--seed", "3"])
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "items_human_ins.json.gz",
        "items_ins_v2.json.gz",
        "items_shuffle.json.gz",
        "manifest.json",
        "reviews.json.gz",
    ]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    loaded = load_original(tmp_path)
    assert manifest["content_hash"] == loaded.content_hash
    assert manifest["products"] == 150 and manifest["goals"] == 40
    assert loaded.content_hash == generate_catalog(150, 40, seed=3).content_hash
    # Synthetic goals from the same files work too.
    assert load_original(tmp_path, human_goals=False).goals


def test_command_line_plain_json(tmp_path: Path) -> None:
    main(["--out", str(tmp_path), "--products", "20", "--goals", "5", "--no-compress"])
    assert (tmp_path / "items_shuffle.json").exists()
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path), "--products", "5", "--goals", "6"])


@pytest.mark.slow
def test_bundled_files_are_the_generators_output() -> None:
    """The shipped catalog is reproducible: regenerating it gives the same content."""
    bundled = bundled_catalog()
    manifest = json.loads((DATA_DIR / "manifest.json").read_text())
    regenerated = generate_catalog(BUNDLED_PRODUCTS, BUNDLED_GOALS, BUNDLED_SEED)
    assert manifest["seed"] == BUNDLED_SEED
    assert regenerated.content_hash == bundled.content_hash
