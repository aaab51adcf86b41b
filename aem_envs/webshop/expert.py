"""The WebShop expert: search, open the goal's product, choose the goal's options, buy.

It acts from the page in front of it (a :class:`PageView`), so the same expert drives the text
and the browser env and recovers from any page an episode was left on. Its one piece of
foresight is the query: of a few natural candidates (the goal's product query, the instruction
without its price clause, the product's title) it picks the first that brings the target into
the top results, preferring one that shows it on the first page.
"""

from __future__ import annotations

import re

from aem_envs.webshop.catalog import Catalog, Goal
from aem_envs.webshop.search import SearchEngine
from aem_envs.webshop.site.app import PER_PAGE, normalize_query
from aem_envs.webshop.site.page import PageView

_PRICE_CLAUSE = re.compile(r",?\s*and price lower than .*$", re.IGNORECASE)


def candidate_queries(goal: Goal, catalog: Catalog) -> list[str]:
    """Queries the expert considers, most natural first."""
    product = catalog.by_asin.get(goal.asin)
    candidates = [goal.query, _PRICE_CLAUSE.sub("", goal.instruction)]
    if product is not None:
        candidates.append(product.name)
    unique: list[str] = []
    for text in map(normalize_query, candidates):
        if text and text not in unique:
            unique.append(text)
    return unique


def plan_query(goal: Goal, catalog: Catalog, engine: SearchEngine) -> str:
    """The query to search: the first candidate ranking the target on page one, else the
    first ranking it anywhere in the results, else the product title."""
    candidates = candidate_queries(goal, catalog)
    ranks = [_rank(engine, query, goal.asin) for query in candidates]
    for limit in (PER_PAGE, len(engine.asins) + 1):
        for query, rank in zip(candidates, ranks, strict=True):
            if rank is not None and rank < limit:
                return query
    return candidates[-1]


def _rank(engine: SearchEngine, query: str, asin: str) -> int | None:
    hits = engine.search(query)
    return hits.index(asin) if asin in hits else None


def expert_action(view: PageView, goal: Goal, query: str, engine: SearchEngine) -> str:
    """The expert's next action on the page ``view`` for ``goal``, searching ``query``."""
    page = view.page_name
    clickables = view.clickables
    target = goal.asin.lower()
    if view.has_search_bar:
        return f"search[{query}]"
    if page == "results":
        if target in clickables:
            return f"click[{target}]"
        rank = _rank(engine, query, goal.asin)
        current = int(view.meta.get("pagenum", "1"))
        if rank is not None and rank // PER_PAGE + 1 > current and "next >" in clickables:
            return "click[next >]"
        if rank is not None and rank // PER_PAGE + 1 < current and "< prev" in clickables:
            return "click[< prev]"
        return "click[back to search]"
    if page == "item" and view.meta.get("asin", "").lower() == target:
        option = _next_option(view, goal)
        return f"click[{option}]" if option is not None else "click[buy now]"
    if "< prev" in clickables:
        return "click[< prev]"
    return "click[back to search]"


def _next_option(view: PageView, goal: Goal) -> str | None:
    """The next goal option value to select on the item page, or ``None`` when all are."""
    options = [c for c in view.clickables.values() if c.kind == "option"]
    for wanted in goal.goal_options:
        value = wanted.lower()
        match = next((c for c in options if c.label == value), None)
        if match is not None and not match.checked:
            return match.label
    return None
