"""``aem/WebShop-v0``: the WebShop shopping site as a text environment, in-process.

The site (:mod:`~aem_envs.webshop.site`) runs in this process and the env reads its pages the
way the original ``WebAgentTextEnv`` does; :class:`SiteClient` is the seam the browser env
(:mod:`~aem_envs.webshop.browser`) replaces with Chromium.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from aem_envs.core.base import TextEnv
from aem_envs.core.errors import AEMError
from aem_envs.core.outcome import Outcome, Task
from aem_envs.webshop import expert, store, tasks
from aem_envs.webshop.catalog import Catalog, Goal
from aem_envs.webshop.nouns import NounTagger, noun_tagger_factory
from aem_envs.webshop.site.app import Site, normalize_query
from aem_envs.webshop.site.page import Clickable, PageView, parse_html

OBSERVATION_MODES = ("text", "text_rich", "html", "url")
#: Stands for "any query" in ``admissible_actions`` (see :class:`WebShopEnv`).
SEARCH_TEMPLATE = "search[<query>]"
_ACTION = re.compile(r"\s*(\w+)\s*\[(.*)\]\s*", re.DOTALL)


def parse_action(action: str) -> tuple[str, str] | None:
    """``("search" | "click", argument)``, or ``None`` when ``action`` has neither shape."""
    match = _ACTION.fullmatch(action)
    if match is None or match.group(1).lower() not in ("search", "click"):
        return None
    return match.group(1).lower(), match.group(2)


def is_win(reward: float) -> bool:
    return abs(reward - 1.0) < 1e-9


class SiteClient:
    """A simulated browser on an in-process :class:`Site`: requests, redirects, page views.

    The browser env swaps this for a Selenium-driven Chromium with the same methods.
    """

    #: The original text env's base URL; ``url`` observations are reported under it.
    base_url = "http://127.0.0.1:3000"

    def __init__(self, site: Site) -> None:
        self.site = site
        self._path = ""
        self._html = ""
        self._view: PageView | None = None

    @property
    def url(self) -> str:
        return self.base_url + self._path

    @property
    def html(self) -> str:
        return self._html

    @property
    def view(self) -> PageView:
        if self._view is None:
            self._view = parse_html(self.html)
        return self._view

    def open(self, path: str) -> None:
        self._request("GET", path)

    def search(self, query: str) -> None:
        assert self.view.search_action is not None
        self._request("POST", self.view.search_action, {"search_query": query})

    def click(self, clickable: Clickable) -> None:
        self._request(clickable.method, clickable.target)

    def close(self) -> None:
        """Nothing to release: the site lives in this process."""

    def _request(self, method: str, path: str, form: Mapping[str, str] | None = None) -> None:
        response = self.site.handle(method, path, form)
        while response.location is not None:
            path = response.location
            response = self.site.handle("GET", path)
        self._path, self._html, self._view = path, response.body, None


def _load_catalog(data_dir: str | Path | None) -> Catalog:
    """The catalog from its on-disk store, converted on first use (:mod:`.store`)."""
    if data_dir is None:
        return store.open_catalog(tasks.DATA_DIR, source="bundled")
    return store.open_catalog(data_dir)


class WebShopEnv(TextEnv):
    """WebShop (Yao et al. 2022) in text mode: find and buy the product an instruction asks for.

    ## Description

    An episode is one goal, a shopping instruction such as "i need a sulfate free shampoo
    for dry hair in size 16 fl oz, and price lower than 30.00 dollars". The agent searches the
    catalog (BM25, top 50, 10 per page), opens products, chooses options and buys. Goals come
    from the bundled generated catalog, ``catalog=`` (a :class:`Catalog`) or ``data_dir=`` (a
    folder of the original JSON files, see :func:`aem_envs.webshop.tasks.load_original`).
    Splits are paper-style: ``test`` = the first 500 shuffled goals, ``eval`` = the next 1000,
    ``train`` = the rest; ``reset`` without options draws from ``train`` (a catalog under
    1,500 goals has none: pass ``options={"split": "test"}``). ``task_type`` is the goal's
    category (beauty, food, fashion, furniture, electronics). Keywords:
    ``observation_mode``, ``catalog``, ``data_dir``, ``noun_tagger``, plus the common
    ``reward_scheme``, ``max_steps`` and ``render_mode``.

    ## Action space

    Text, one of:

    * ``search[query]`` where the page shows a search bar (the search page); the query is
      lower-cased with control characters dropped;
    * ``click[label]`` on one of the page's clickables, lower-cased: buttons (``back to
      search``, ``next >``, ``< prev``, ``description``, ``features``, ``reviews``, ``buy
      now``), product asins on result pages and option values on item pages. ``< prev`` goes
      back one level (results page − 1, item → results, sub-page → item); clicking an option
      selects it.

    Anything else changes nothing and is an invalid action: the observation says why,
    followed by the unchanged page. ``info["admissible_actions"]`` lists ``click[...]`` for
    every clickable and, where a search bar is shown, the template ``search[<query>]``: it
    stands for any query (sent literally it searches for "<query>"), since the space of
    queries is open.

    ## Observation

    The current page, by ``observation_mode``: ``text`` (default; visible text joined by
    ``[SEP]``), ``text_rich`` (``[button] x [button_]``, ``[clicked button] ...``), ``html``
    or ``url`` (under the original's ``http://127.0.0.1:3000``).

    ## Rewards

    ``buy now`` is graded with WebShop's reward (:mod:`~aem_envs.webshop.grading`): the
    share of the goal's attributes, options and price bound the bought product meets, scaled
    by a product-type match; ``info["score"]`` is that reward in [0, 1], ``won`` ⇔ it is 1,
    and ``info`` also carries the ``asin``, the ``options`` and the ``reward_breakdown``. The
    step reward follows ``reward_scheme``: by default +10 for a win, 0 otherwise, and -0.1
    per invalid action; ``"native"`` gives the score itself. The reward's ``title_score``
    tags nouns with ``noun_tagger=``: ``"lexicon"`` (default, built in), ``"spacy"`` /
    ``"spacy:<model>"`` (the original's tagging, when spaCy and ``en_core_web_sm`` are
    installed) or any object with a ``nouns(text)`` method (:mod:`aem_envs.webshop.nouns`).

    ## Termination

    ``terminated`` on ``buy now``; ``truncated`` after ``max_steps`` actions (default 15).

    ## Registered ids

    - ``aem/WebShop-v0`` (this class); ``aem/WebShopBrowser-v0`` is
      :class:`~aem_envs.webshop.browser.WebShopBrowserEnv`.
    """

    splits: ClassVar[tuple[str, ...]] = ("test", "eval", "train")
    default_max_steps: ClassVar[int] = 15
    action_vocabulary: ClassVar[Sequence[str]] = (
        "search[", "click[", "]", "back to search", "next >", "< prev", "buy now",
        "description", "features", "reviews", "shampoo", "red", "large",
    )  # fmt: skip

    def __init__(
        self,
        *,
        observation_mode: str = "text",
        catalog: Catalog | None = None,
        data_dir: str | Path | None = None,
        noun_tagger: str | NounTagger = "lexicon",
        reward_scheme: Any = None,
        max_steps: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(reward_scheme=reward_scheme, max_steps=max_steps, render_mode=render_mode)
        if isinstance(noun_tagger, str):
            self._noun_tagger = noun_tagger_factory(noun_tagger)
        elif isinstance(noun_tagger, NounTagger):
            self._noun_tagger = lambda: noun_tagger
        else:
            raise AEMError(
                f"noun_tagger={noun_tagger!r:.60} is neither a name ('lexicon', 'spacy', "
                "'spacy:<model>') nor an object with a nouns(text) method"
            )
        if observation_mode not in OBSERVATION_MODES:
            raise AEMError(
                f"observation_mode={observation_mode!r} is not supported; "
                f"choose one of {list(OBSERVATION_MODES)}"
            )
        if catalog is not None and data_dir is not None:
            raise AEMError("give either catalog= or data_dir=, not both")
        if data_dir is not None and not Path(data_dir).expanduser().is_dir():
            raise AEMError(
                f"data_dir={str(data_dir)!r} is not a folder; point it at the folder holding "
                "the original WebShop files (items_shuffle*.json, items_ins_v2*.json, ...)"
            )
        self.observation_mode = observation_mode
        self._catalog = catalog
        self._data_dir = data_dir
        self._site: Site | None = None
        self._client: SiteClient | None = None
        self._goal: Goal | None = None
        self._session_id = ""
        self._expert_query: str | None = None

    # ---------------------------------------------------------------------- lazy state
    @property
    def catalog(self) -> Catalog:
        """The catalog, loaded on first use so that constructing the env stays cheap."""
        if self._catalog is None:
            self._catalog = _load_catalog(self._data_dir)
        return self._catalog

    @property
    def site(self) -> Site:
        if self._site is None:
            self._site = Site(self.catalog, self._noun_tagger)
        return self._site

    @property
    def client(self) -> SiteClient:
        if self._client is None:
            self._client = self._make_client()
        return self._client

    def _make_client(self) -> SiteClient:
        return SiteClient(self.site)

    # ------------------------------------------------------------------ TextEnv hooks
    def task_ids(self, split: str) -> Sequence[str]:
        return self.catalog.splits.get(split, ())

    def _start(self, task_id: str, split: str) -> tuple[Task, str]:
        goal = self.catalog.goals_by_id[task_id]
        self._goal = goal
        self._expert_query = None
        self._session_id = "fixed_" + re.sub(r"[^\w.-]", "_", goal.goal_id)
        self.site.open_session(self._session_id, goal)
        self.client.open(Site.url_for("index", session=self._session_id))
        task = Task(task_id=goal.goal_id, task_type=goal.category, instruction=goal.instruction)
        return task, self._observe()

    def _act(self, action: str) -> Outcome:
        parsed = parse_action(action)
        view = self.client.view
        if parsed is None:
            return self._invalid(f"{action[:80]!r} is neither search[<query>] nor click[<label>].")
        name, argument = parsed
        if name == "search":
            if not view.has_search_bar:
                return self._invalid(
                    "there is no search bar on this page; click[back to search] first."
                )
            query = normalize_query(argument)
            if not query:
                return self._invalid("the search query is empty.")
            self.client.search(query)
        else:
            label = argument.strip().lower()
            clickable = view.clickables.get(label)
            if clickable is None:
                return self._invalid(
                    f"{label[:80]!r} is not clickable on this page; clickables: "
                    + ", ".join(view.clickables)
                )
            self.client.click(clickable)
        return self._outcome()

    def _admissible(self) -> list[str] | None:
        if self._client is None:
            return []
        view = self.client.view
        actions = [SEARCH_TEMPLATE] if view.has_search_bar else []
        return actions + [f"click[{label}]" for label in view.clickables]

    def expert_action(self) -> str:
        assert self._goal is not None, "call reset() first"
        if self._expert_query is None:
            self._expert_query = expert.plan_query(self._goal, self.catalog, self.site.engine)
        return expert.expert_action(
            self.client.view, self._goal, self._expert_query, self.site.engine
        )

    @classmethod
    def task_set_summary(cls) -> dict[str, dict[str, int]]:
        """Goals of the bundled catalog per split and category, from its manifest."""
        counts = json.loads((tasks.DATA_DIR / "manifest.json").read_text())["task_types"]
        return {split: counts.get(split, {}) for split in cls.splits}

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        super().close()

    # ------------------------------------------------------------------------ helpers
    def _observe(self) -> str:
        client = self.client
        if self.observation_mode == "html":
            return client.html
        if self.observation_mode == "url":
            return client.url
        if self.observation_mode == "text_rich":
            return client.view.text_rich()
        return client.view.text()

    def _invalid(self, reason: str) -> Outcome:
        return Outcome(f"Invalid action: {reason}\n{self._observe()}", valid=False)

    def _outcome(self) -> Outcome:
        view = self.client.view
        info: dict[str, Any] = {"url": self.client.url}
        if view.page_name != "done":
            return Outcome(self._observe(), info=info)
        reward = float(view.meta["reward"])
        purchase = self.site.sessions[self._session_id].purchase
        if purchase is not None:
            info.update(asin=purchase.asin, options=dict(purchase.options))
            info["reward_breakdown"] = dataclasses.asdict(purchase.breakdown)
        return Outcome(self._observe(), done=True, won=is_win(reward), score=reward, info=info)
