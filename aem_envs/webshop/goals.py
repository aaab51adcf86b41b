"""WebShop goals from the instruction records, and the paper's train/eval/test splits.

Follows the original ``web_agent_site/engine/goal.py``: the ``price_upper`` rule, goal
weights for synthetic instructions, and the split shuffle with the original's fixed seed, so
goal ``i`` is the original's goal ``i`` when the original files are given.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from aem_envs.core.errors import DataError
from aem_envs.webshop.catalog import Goal, Product
from aem_envs.webshop.records import OriginalRecords, expect

#: The seed the original environments shuffle goals with before splitting them.
WEBSHOP_SEED = 233
#: Goals per split, in order after the shuffle; the rest are ``train``.
SPLIT_SIZES: tuple[tuple[str, int], ...] = (("test", 500), ("eval", 1000))
SPLITS: tuple[str, ...] = ("test", "eval", "train")
#: Candidate price bounds: multiples of 10 up to 990; the bound is drawn from the first four
#: above the product's price.
PRICE_BOUNDS: tuple[float, ...] = tuple(10.0 * i for i in range(1, 100))
#: ``price_upper`` of a goal whose instruction states no price.
NO_PRICE_BOUND = 1_000_000.0


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
#: Goals from the instruction records for the products they may come from, in order.
GoalMaker = Callable[[OriginalRecords, Sequence[Product], random.Random], list[GoalFields]]


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
    expect(raw, list, file, where, "a list of option values")
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
        expect(entries, list, file, product.asin, "a list of instructions")
        for k, entry in enumerate(entries):
            where = f"{product.asin}[{k}]"
            expect(entry, dict, file, where, "an instruction object")
            attributes = entry.get("instruction_attributes")
            expect(attributes, list, file, f"{where}.instruction_attributes", "a list")
            if not attributes:
                continue
            instruction = entry.get("instruction")
            expect(instruction, str, file, f"{where}.instruction", "a string")
            assert isinstance(instruction, str)  # expect raised otherwise
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
        expect(instruction, str, file, f"{product.asin}.instruction", "a string")
        attributes = ins.get("instruction_attributes")
        expect(attributes, list, file, f"{product.asin}.instruction_attributes", "a list")
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


def split_ranges(n_goals: int) -> dict[str, range]:
    """The positions of each split's goals among ``n_goals`` shuffled goals."""
    ranges: dict[str, range] = {}
    start = 0
    for name, size in SPLIT_SIZES:
        ranges[name] = range(min(start, n_goals), min(start + size, n_goals))
        start += size
    ranges["train"] = range(min(start, n_goals), n_goals)
    return ranges


def split_goals(
    goals: Sequence[GoalFields],
) -> tuple[tuple[Goal, ...], dict[str, tuple[str, ...]]]:
    """Shuffle goals once with the original's fixed seed and cut the paper splits.

    Goal ids are the positions after the shuffle, as the original's ``fixed_<i>`` sessions.
    """
    order = list(goals)
    random.Random(WEBSHOP_SEED).shuffle(order)
    numbered = tuple(Goal(goal_id=str(i), **fields) for i, fields in enumerate(order))
    splits = {
        name: tuple(str(i) for i in positions)
        for name, positions in split_ranges(len(numbered)).items()
    }
    return numbered, splits
