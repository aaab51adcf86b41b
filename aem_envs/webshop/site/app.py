"""The WebShop site: a route table over jinja2 templates, with per-session shopping state.

One implementation serves both modes: the text env calls :meth:`Site.handle` in-process, the
browser env serves the very same object over HTTP (:mod:`aem_envs.webshop.site.server`). The
URL scheme is the original's (``/search_results/<session>/<keywords>/<page>``,
``/item_page/<session>/<asin>/<keywords>/<page>/<options>``, ``/item_sub_page/...``,
``/done/<session>/<asin>/<options>``), so a URL names the whole page state; the server keeps
only what the original keeps per session: the goal, the products opened since the last
search page (for ``text_rich``'s ``[clicked button]``) and the purchase.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from aem_envs.core.errors import require
from aem_envs.webshop.catalog import Catalog, Goal, Product
from aem_envs.webshop.nouns import NounTagger
from aem_envs.webshop.search import TOP_K, SearchEngine, engine_for

#: Products per results page (the original's ``PRODUCT_WINDOW``).
PER_PAGE = 10
#: Item sub-pages, in the order their buttons appear.
SUB_PAGES = ("Description", "Features", "Reviews")

HERE = Path(__file__).parent
STATIC_DIR = HERE / "static"
_STATIC_TYPES = {".css": "text/css; charset=utf-8"}

_SEGMENT = r"([^/]+)"
#: name → (path pattern, parameter names); :meth:`Site.url_for` builds the same shapes.
ROUTES: dict[str, tuple[str, tuple[str, ...]]] = {
    "static": ("/static/{}", ("name",)),
    "search_results": ("/search_results/{}/{}/{}", ("session", "keywords", "page")),
    "item_page": ("/item_page/{}/{}/{}/{}/{}", ("session", "asin", "keywords", "page", "options")),
    "item_sub_page": (
        "/item_sub_page/{}/{}/{}/{}/{}/{}",
        ("session", "asin", "keywords", "page", "sub_page", "options"),
    ),
    "done": ("/done/{}/{}/{}", ("session", "asin", "options")),
    "index": ("/{}", ("session",)),
}
_PATTERNS = {
    name: re.compile(re.escape(shape).replace(re.escape("{}"), _SEGMENT))
    for name, (shape, _) in ROUTES.items()
}


def normalize_query(text: str) -> str:
    """A search query as the site runs it: lower-case, control characters dropped, one space.

    Why here: the text env and a real browser submitting the form must search the same string.
    """
    kept = "".join(" " if unicodedata.category(c).startswith("C") else c for c in text)
    return " ".join(kept.lower().split())


def price_tag(product: Product) -> str:
    """The price as the original shows it: ``$a`` or ``$a to $b``."""
    return " to ".join(f"${p}" for p in product.prices[:2]) if product.prices else "$100.0"


def stars(score: str) -> str:
    try:
        filled = max(0, min(5, int(float(score))))
    except ValueError:
        return ""
    return "★" * filled + "☆" * (5 - filled)


@dataclass(frozen=True)
class Response:
    """What a route returns: a page, a redirect (``location``) or a static file."""

    status: int
    body: str
    content_type: str = "text/html; charset=utf-8"
    location: str | None = None


@dataclass(frozen=True)
class Purchase:
    asin: str
    options: dict[str, str]
    reward: float
    breakdown: Any


@dataclass
class Session:
    goal: Goal
    visited: set[str] = field(default_factory=set)
    purchase: Purchase | None = None


class _NotFound(Exception):
    """A request for a page that does not exist; rendered as a 404 page."""


def _page_number(text: str) -> int:
    if not text.isdigit():
        raise _NotFound(f"page {text!r} is not a number")
    return int(text)


@cache
def _templates() -> Any:
    jinja2 = require("webshop", "jinja2", feature="The WebShop site")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(url_for=Site.url_for, price_tag=price_tag, stars=stars)
    return env


class Site:
    """The shopping site over one catalog; sessions are opened by the env that owns them.

    ``noun_tagger`` builds the tagger the reward's ``title_score`` uses (default: the lexicon
    tagger); it is called on the first purchase, so an optional spaCy loads only if needed.
    """

    def __init__(
        self, catalog: Catalog, noun_tagger: Callable[[], NounTagger] | None = None
    ) -> None:
        self.catalog = catalog
        self._tagger_factory = noun_tagger
        self._tagger: NounTagger | None = None
        self.sessions: dict[str, Session] = {}
        self._engine: SearchEngine | None = None

    # -------------------------------------------------------------- sessions and search
    def open_session(self, session_id: str, goal: Goal) -> None:
        """Start (or restart) ``session_id`` shopping for ``goal``."""
        if not re.fullmatch(r"[\w.-]+", session_id):
            raise ValueError(f"session ids are word characters, '.' and '-'; got {session_id!r}")
        self.sessions[session_id] = Session(goal)

    @property
    def engine(self) -> SearchEngine:
        if self._engine is None:
            self._engine = engine_for(self.catalog)
        return self._engine

    def grade(self, product: Product, goal: Goal, options: Mapping[str, str]) -> Any:
        """The WebShop reward breakdown of buying ``product`` with ``options`` for ``goal``."""
        # Imported here so that the package imports without the 'webshop' extra (rapidfuzz).
        require("webshop", "rapidfuzz", feature="The WebShop reward")
        from aem_envs.webshop.grading import get_reward

        if self._tagger is None and self._tagger_factory is not None:
            self._tagger = self._tagger_factory()
        return get_reward(product, goal, product.price, options, noun_tagger=self._tagger)

    # -------------------------------------------------------------------------- routing
    @staticmethod
    def url_for(name: str, **params: Any) -> str:
        shape, names = ROUTES[name]
        return shape.format(*(quote(str(params[key]), safe="") for key in names))

    def handle(self, method: str, path: str, form: Mapping[str, str] | None = None) -> Response:
        """Answer one request; ``path`` is the raw (percent-encoded) URL path."""
        path = path.split("?", 1)[0].split("#", 1)[0]
        for name, pattern in _PATTERNS.items():
            match = pattern.fullmatch(path)
            if match is None:
                continue
            params = dict(zip(ROUTES[name][1], map(unquote, match.groups()), strict=True))
            try:
                return getattr(self, f"_{name}")(method.upper(), dict(form or {}), **params)
            except _NotFound as exc:
                return self._not_found(params.get("session"), str(exc))
        return self._not_found(None, f"no page at {path}")

    # --------------------------------------------------------------------------- routes
    def _static(self, method: str, form: dict[str, str], *, name: str) -> Response:
        file = STATIC_DIR / name
        if file.suffix not in _STATIC_TYPES or not file.is_file():
            raise _NotFound(f"no static file {name}")
        return Response(200, file.read_text(encoding="utf-8"), _STATIC_TYPES[file.suffix])

    def _index(self, method: str, form: dict[str, str], *, session: str) -> Response:
        state = self._session(session)
        query = normalize_query(form.get("search_query", ""))
        if method == "POST" and query:
            target = self.url_for("search_results", session=session, keywords=query, page=1)
            return Response(303, "", location=target)
        state.visited.clear()
        return self._page("search_page.html", "index", session, state)

    def _search_results(
        self, method: str, form: dict[str, str], *, session: str, keywords: str, page: str
    ) -> Response:
        state = self._session(session)
        number = _page_number(page)
        if number < 1:
            raise _NotFound(f"page {number} does not exist")
        hits = self.engine.search(keywords, TOP_K)
        shown = [self.catalog.by_asin[a] for a in hits[(number - 1) * PER_PAGE : number * PER_PAGE]]
        return self._page(
            "results_page.html",
            "results",
            session,
            state,
            keywords=keywords,
            page=number,
            total=len(hits),
            per_page=PER_PAGE,
            products=shown,
            visited=state.visited,
        )

    def _item_page(
        self,
        method: str,
        form: dict[str, str],
        *,
        session: str,
        asin: str,
        keywords: str,
        page: str,
        options: str,
    ) -> Response:
        state = self._session(session)
        product = self._product(asin)
        chosen = self._options(options)
        state.visited.add(product.asin)

        def with_option(name: str, value: str) -> str:
            return json.dumps({**chosen, name: value})

        return self._page(
            "item_page.html",
            "item",
            session,
            state,
            product=product,
            keywords=keywords,
            page=_page_number(page),
            options=chosen,
            options_json=json.dumps(chosen),
            with_option=with_option,
            sub_pages=SUB_PAGES,
        )

    def _item_sub_page(
        self,
        method: str,
        form: dict[str, str],
        *,
        session: str,
        asin: str,
        keywords: str,
        page: str,
        sub_page: str,
        options: str,
    ) -> Response:
        state = self._session(session)
        if sub_page not in SUB_PAGES:
            raise _NotFound(f"no sub-page {sub_page!r}")
        return self._page(
            "sub_page.html",
            "sub_page",
            session,
            state,
            product=self._product(asin),
            keywords=keywords,
            page=_page_number(page),
            sub_page=sub_page,
            options_json=json.dumps(self._options(options)),
        )

    def _done(
        self, method: str, form: dict[str, str], *, session: str, asin: str, options: str
    ) -> Response:
        state = self._session(session)
        product = self._product(asin)
        chosen = self._options(options)
        if state.purchase is None:
            breakdown = self.grade(product, state.goal, chosen)
            state.purchase = Purchase(product.asin, chosen, float(breakdown.total), breakdown)
        return self._page(
            "done_page.html",
            "done",
            session,
            state,
            asin=state.purchase.asin,
            options_json=json.dumps(state.purchase.options),
            reward=state.purchase.reward,
        )

    # -------------------------------------------------------------------------- helpers
    def _session(self, session: str) -> Session:
        state = self.sessions.get(session)
        if state is None:
            raise _NotFound(f"no session {session!r}")
        return state

    def _product(self, asin: str) -> Product:
        product = self.catalog.by_asin.get(asin)
        if product is None:
            raise _NotFound(f"no product {asin!r}")
        return product

    @staticmethod
    def _options(text: str) -> dict[str, str]:
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise _NotFound(f"options {text!r} are not a JSON object") from exc
        if not isinstance(value, dict):
            raise _NotFound(f"options {text!r} are not a JSON object")
        return {str(k): str(v) for k, v in value.items()}

    def _page(
        self, template: str, page_name: str, session: str, state: Session, **context: Any
    ) -> Response:
        html = (
            _templates()
            .get_template(template)
            .render(
                page_name=page_name,
                session_id=session,
                instruction_text=state.goal.instruction,
                **context,
            )
        )
        return Response(200, html)

    def _not_found(self, session: str | None, reason: str) -> Response:
        state = self.sessions.get(session or "")
        html = (
            _templates()
            .get_template("not_found.html")
            .render(
                page_name="not_found",
                session_id=session,
                instruction_text=state.goal.instruction if state else "",
                reason=reason,
            )
        )
        return Response(404, html)
