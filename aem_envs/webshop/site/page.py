"""What an agent sees of a page and can click on it, read from HTML or from a live DOM.

The original env reads its observations and clickables out of the page HTML with
BeautifulSoup; we do the same with the standard library's parser for the text env, and with
``page_view.js`` (the same rules, run inside Chromium) for the browser env, so both modes turn
equal pages into equal observations. The rules, as in the original:

* visible text: every non-blank text node outside ``script``/``style``/``head``/``title``;
* clickables: elements of class ``btn`` and ``product-link`` (label = their text, lower-cased)
  and radio inputs (label = their value); the search button is not clickable (one searches
  with ``search[...]``); on a label clash, product links override buttons and options
  override both, as the original's dictionary does;
* ``text_rich`` marks buttons ``[button] x [button_]``, option labels ``[clicked button]``
  when their radio is checked, and product links ``[clicked button]`` once opened.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

#: Script that extracts a :class:`PageView` from the live DOM (see :meth:`PageView.from_dom`).
PAGE_VIEW_JS = (Path(__file__).parent / "page_view.js").read_text(encoding="utf-8")

_INVISIBLE = frozenset({"script", "style", "head", "title", "meta", "noscript"})
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                   "source", "track", "wbr"})  # fmt: skip


@dataclass(frozen=True)
class TextNode:
    """One visible text: ``kind`` is text / button / option / product; ``marked`` says the
    option is chosen or the product was opened."""

    text: str
    kind: str = "text"
    marked: bool = False


@dataclass(frozen=True)
class Clickable:
    """Something ``click[label]`` acts on: where it leads and how to find it in the DOM.

    ``index`` counts matches of :data:`CLICKABLE_SELECTOR` in document order, which is how the
    browser env locates the element to click.
    """

    label: str
    kind: str
    target: str
    method: str
    index: int
    checked: bool = False


CLICKABLE_SELECTOR = ".btn, .product-link, input[type=radio]"


@dataclass(frozen=True)
class PageView:
    nodes: tuple[TextNode, ...]
    clickables: Mapping[str, Clickable]
    has_search_bar: bool
    search_action: str | None
    #: The ``data-*`` attributes of ``<body>``: page name, asin, results page, reward.
    meta: Mapping[str, str]

    @property
    def page_name(self) -> str:
        return self.meta.get("page", "")

    def text(self) -> str:
        """The ``text`` observation: visible texts joined by `` [SEP] ``."""
        return " [SEP] ".join(node.text for node in self.nodes)

    def text_rich(self) -> str:
        """The ``text_rich`` observation (the original's ``simple=False`` rendering)."""
        lines: list[str] = []
        clicked: list[str] = []
        for node in self.nodes:
            if node.kind == "button":
                lines.append(f"[button] {node.text} [button_]")
            elif node.kind == "option":
                tag = "clicked button" if node.marked else "button"
                lines.append(f"  [{tag}] {node.text} [{tag}_]")
                if node.marked:
                    clicked.append(f"You have clicked {node.text}.\n")
            elif node.kind == "product":
                tag = "clicked button" if node.marked else "button"
                lines.append(f"\n[{tag}] {node.text} [{tag}_]")
            else:
                lines.append(node.text)
        return "".join(reversed(clicked)) + "".join(line + "\n" for line in lines)

    @classmethod
    def from_dom(cls, raw: Mapping[str, Any]) -> PageView:
        """Build a view from what :data:`PAGE_VIEW_JS` returns in the browser."""
        nodes = tuple(TextNode(str(t), str(k), bool(m)) for t, k, m in raw["nodes"])
        clickables = [
            Clickable(str(c[0]), str(c[1]), str(c[2]), str(c[3]), int(c[4]), bool(c[5]))
            for c in raw["clickables"]
        ]
        return cls(
            nodes,
            _clickable_map(clickables),
            bool(raw["has_search_bar"]),
            raw["search_action"],
            {str(k): str(v) for k, v in raw["meta"].items()},
        )


def _clickable_map(found: Sequence[Clickable]) -> dict[str, Clickable]:
    """Label → clickable with the original's precedence: buttons, then links, then options."""
    table: dict[str, Clickable] = {}
    for kind in ("button", "product", "option"):
        for item in found:
            if item.kind == kind and not (kind == "button" and item.label == "search"):
                table[item.label] = item
    return table


def parse_html(html: str) -> PageView:
    """The :class:`PageView` of an HTML page (the text env's path)."""
    parser = _ViewParser()
    parser.feed(html)
    parser.close()
    checked = parser.checked_ids
    nodes = tuple(
        TextNode(text, kind, (label_for in checked) if kind == "option" else marked)
        for text, kind, marked, label_for in parser.nodes
    )
    return PageView(
        nodes,
        _clickable_map(parser.clickables),
        parser.has_search_bar,
        parser.search_action,
        parser.meta,
    )


class _ViewParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, dict[str, str]]] = []
        self.forms: list[dict[str, str]] = []
        self.nodes: list[tuple[str, str, bool, str | None]] = []
        self.clickables: list[Clickable] = []
        self.checked_ids: set[str] = set()
        self.has_search_bar = False
        self.search_action: str | None = None
        self.meta: dict[str, str] = {}
        self._open_clickable: tuple[str, dict[str, str], int, list[str]] | None = None
        self._count = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v if v is not None else "" for k, v in attrs}
        classes = attributes.get("class", "").split()
        if tag == "body":
            self.meta = {k[5:]: v for k, v in attributes.items() if k.startswith("data-")}
        elif tag == "form":
            self.forms.append(attributes)
        elif tag == "input":
            if attributes.get("id") == "search_input":
                self.has_search_bar = True
                self.search_action = self.forms[-1].get("action") if self.forms else None
            if attributes.get("type") == "radio":
                value = attributes.get("value", "")
                if "checked" in attributes:
                    self.checked_ids.add(attributes.get("id", ""))
                self.clickables.append(
                    Clickable(value.lower(), "option", attributes.get("data-url", ""), "GET",
                              self._count, "checked" in attributes)
                )  # fmt: skip
                self._count += 1
        if ("btn" in classes or "product-link" in classes) and tag not in _VOID:
            self._open_clickable = (tag, attributes, self._count, [])
            self._count += 1
        if tag not in _VOID:
            self.stack.append((tag, attributes))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form" and self.forms:
            self.forms.pop()
        if self._open_clickable is not None and self._open_clickable[0] == tag:
            self._close_clickable()
        for depth in range(len(self.stack) - 1, -1, -1):
            if self.stack[depth][0] == tag:
                del self.stack[depth:]
                break

    def _close_clickable(self) -> None:
        assert self._open_clickable is not None
        tag, attributes, index, texts = self._open_clickable
        self._open_clickable = None
        label = "".join(texts).strip().lower()
        if "product-link" in attributes.get("class", "").split():
            self.clickables.append(
                Clickable(label, "product", attributes.get("href", ""), "GET", index)
            )
        else:
            form = self.forms[-1] if self.forms else {}
            method = form.get("method", "get").upper()
            self.clickables.append(
                Clickable(label, "button", form.get("action", ""), method, index)
            )

    def handle_data(self, data: str) -> None:
        if self._open_clickable is not None:
            self._open_clickable[3].append(data)
        if any(tag in _INVISIBLE for tag, _ in self.stack):
            return
        text = data.strip()
        if not text or not self.stack:
            return
        tag, attributes = self.stack[-1]
        if tag == "button":
            self.nodes.append((text, "button", False, None))
        elif tag == "label":
            self.nodes.append((text, "option", False, attributes.get("for")))
        elif attributes.get("class", "").split() == ["product-link"]:
            self.nodes.append((text, "product", "data-visited" in attributes, None))
        else:
            self.nodes.append((text, "text", False, None))
