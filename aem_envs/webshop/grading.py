"""WebShop's reward for buying a product, exactly as the original environment computes it.

total = r_type · (n_att + n_opt + [price ≤ price_upper]) / (|goal attributes| + |goal options| + 1)

* ``n_att``: goal attributes matched by a product attribute (token-set ratio > 85) or found
  as a substring of the lower-cased title, bullet points or description.
* ``n_opt``: goal options matched (token-set ratio > 85) by one of the chosen option values,
  both sides first mapped to a canonical colour word when they contain one.
* ``r_type``: 1, or 0.5 when neither the queries are equal, nor two breadcrumb levels are
  shared, nor ``title_score`` > 0.2; then 0.1 when ``title_score`` < 0.1 and 0 when it is 0.
  ``title_score`` is the share of the goal name's nouns found among the bought product's
  nouns (0.2 when the goal name has none); the noun tagger is pluggable (:mod:`.nouns`).

Fuzzy scores follow ``thefuzz`` (which the original calls): both strings lose the Latin-1
range, are reduced to lower-case letters, digits and spaces, and the score is rounded to an
integer before the ``> 85`` test.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

from aem_envs.webshop.catalog import Goal, Product
from aem_envs.webshop.nouns import NounTagger, default_noun_tagger

#: A fuzzy match needs a token-set ratio above this.
FUZZY_THRESHOLD = 85

#: The original's canonical colours (``web_agent_site/engine/normalize.py``), in its order:
#: a value is mapped to the first of these it contains.
COLOR_SET: tuple[str, ...] = (
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure", "banana", "beige", "black",
    "blue", "blush", "bordeaux", "bronze", "brown", "burgundy", "camel", "camo", "caramel",
    "champagne", "charcoal", "cheetah", "chestnut", "chocolate", "christmas", "coffee",
    "cognac", "copper", "coral", "cranberry", "cream", "crystal", "dark", "denim", "eggplant",
    "elephant", "espresso", "fuchsia", "gold", "granite", "grape", "graphite", "grass", "gray",
    "green", "grey", "heather", "indigo", "ivory", "ivy", "khaki", "lavender", "lemon",
    "leopard", "light", "lilac", "lime", "magenta", "maroon", "mauve", "merlot", "midnight",
    "mint", "mocha", "multicolor", "mushroom", "mustard", "natural", "navy", "nude", "olive",
    "orange", "peach", "pewter", "pink", "plum", "purple", "rainbow", "red", "rose", "royal",
    "rust", "sand", "sapphire", "seashell", "silver", "skull", "slate", "steel", "stone",
    "stonewash", "sunflower", "tan", "taupe", "teal", "tiger", "turquoise", "violet", "walnut",
    "wheat", "white", "wine", "yellow",
)  # fmt: skip


@dataclass(frozen=True)
class RewardBreakdown:
    """The reward and every part of it, for the done page, logs and tests."""

    total: float
    r_type: float
    #: Share of goal attributes matched (1.0 when the goal has none).
    r_att: float
    #: Share of goal options matched; None when the goal asks for no options.
    r_option: float | None
    r_price: bool
    title_score: float
    query_match: bool
    category_match: bool
    n_att: int
    n_opt: int
    n_goal_att: int
    n_goal_opt: int

    @property
    def won(self) -> bool:
        """Success as the benchmark defines it: the full reward."""
        return self.total == 1.0


def normalize_color(value: str) -> str:
    """The first canonical colour contained in ``value``, else ``value`` unchanged."""
    for color in COLOR_SET:
        if color in value:
            return color
    return value


#: thefuzz's ``force_ascii`` drops the Latin-1 range only (code points 128-255).
_DROP_LATIN1 = dict.fromkeys(range(128, 256))


def _process(text: str) -> str:
    return default_process(text.translate(_DROP_LATIN1))


def fuzzy_match(a: str, b: str) -> bool:
    """Token-set ratio above 85, scored as ``thefuzz.fuzz.token_set_ratio`` scores it."""
    pa, pb = _process(a), _process(b)
    if not pa or not pb:
        return False
    return round(fuzz.token_set_ratio(pa, pb)) > FUZZY_THRESHOLD


def title_score(product_name: str, goal_name: str, tagger: NounTagger) -> float:
    """Share of the goal name's nouns found in the product name (0.2 if it has none)."""
    desired = tagger.nouns(goal_name)
    if not desired:
        return 0.2
    bought = set(tagger.nouns(product_name))
    return len(bought & set(desired)) / len(desired)


def type_reward(
    product: Product, goal: Goal, tagger: NounTagger
) -> tuple[float, float, bool, bool]:
    """``(r_type, title_score, query_match, category_match)``."""
    query_match = product.query == goal.query
    bought_levels = {level.strip() for level in product.product_category.split("›")}
    goal_levels = {level.strip() for level in goal.product_category.split("›")}
    category_match = len(bought_levels & goal_levels) >= 2
    score = title_score(product.name, goal.name, tagger)
    r_type = 1.0
    if not (query_match or category_match or score > 0.2):
        r_type = 0.5
    if score < 0.1:
        r_type = 0.1
    if score == 0.0:
        r_type = 0.0
    return r_type, score, query_match, category_match


def attribute_matches(product: Product, attributes: Iterable[str]) -> int:
    """How many goal attributes the product has, by fuzzy match or by substring."""
    title = product.name.lower()
    bullets = " ".join(product.bullet_points).lower()
    description = product.description.lower()
    count = 0
    for wanted in attributes:
        if any(fuzzy_match(have, wanted) for have in product.attributes) or (
            wanted in title or wanted in bullets or wanted in description
        ):
            count += 1
    return count


def option_matches(goal_options: Iterable[str], chosen: Iterable[str]) -> int:
    """How many goal options one of the chosen values matches, colours normalised."""
    chosen_values = [normalize_color(value) for value in chosen]
    return sum(
        any(fuzzy_match(value, normalize_color(wanted)) for value in chosen_values)
        for wanted in goal_options
    )


def get_reward(
    product: Product,
    goal: Goal,
    price: float,
    options: Mapping[str, str],
    *,
    noun_tagger: NounTagger | None = None,
) -> RewardBreakdown:
    """The reward for buying ``product`` at ``price`` with the chosen ``options``
    (option group → value) under ``goal``."""
    tagger = noun_tagger if noun_tagger is not None else default_noun_tagger()
    r_type, score, query_match, category_match = type_reward(product, goal, tagger)
    n_att = attribute_matches(product, goal.attributes)
    n_opt = option_matches(goal.goal_options, options.values())
    r_price = price <= goal.price_upper
    n_goal_att, n_goal_opt = len(goal.attributes), len(goal.goal_options)
    # Same operation order as the original, so totals agree to the last bit.
    total = (n_att + n_opt + int(r_price)) / (n_goal_att + n_goal_opt + 1) * r_type
    return RewardBreakdown(
        total=total,
        r_type=r_type,
        r_att=n_att / n_goal_att if n_goal_att else 1.0,
        r_option=n_opt / n_goal_opt if n_goal_opt else None,
        r_price=r_price,
        title_score=score,
        query_match=query_match,
        category_match=category_match,
        n_att=n_att,
        n_opt=n_opt,
        n_goal_att=n_goal_att,
        n_goal_opt=n_goal_opt,
    )
