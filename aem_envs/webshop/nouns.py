"""Noun tagging for the reward's ``title_score``: a pluggable tagger and a built-in default.

The original reward parses product names with spaCy (``en_core_web_sm``, the model WebShop's
``setup.sh`` installs and its released ``goal.py`` loads) and keeps tokens tagged NOUN or
PROPN. spaCy and its model are downloads, which aem must not need, so the reward
takes any :class:`NounTagger` and defaults to :class:`LexiconNounTagger`: deterministic,
instant and dependency-free. Its rule mirrors how spaCy tags shopping titles — title-cased
content words come out as NOUN/PROPN — by keeping every word that is not a function word,
a number, a known adjective (colours, sizes, common product descriptors) or an adjective /
adverb / participle by its suffix; a list of known nouns overrides the suffix rules
(``cable``, ``table``, ``bed``). :meth:`LexiconNounTagger.from_catalog` adds the catalog's
own type vocabulary (queries and breadcrumb levels) to those known nouns.

On the five title pairs of the original test suite (``tests/web-agent-site/engine/
test_goal.py``) the default's ``title_score`` differs from the published spaCy values by at
most 0.05 (0.80 for 0.85; 0.33 for 0.31; 0.18 for 0.17; the exact and the unrelated pair
match) and gives the same ``r_type`` on every pair (tested). It can misread a name's words,
so a bought product's ``r_type`` can differ from the original's in rare cases.

Users who want the original tagging install spaCy and its model themselves and pass
``noun_tagger="spacy"`` to the env (or ``get_noun_tagger("spacy")`` to :func:`get_reward`);
spaCy is never imported otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

from aem_envs.core.errors import DataError, require
from aem_envs.webshop.catalog import Catalog

#: The spaCy model of the original reward (``get_noun_tagger("spacy")``).
SPACY_MODEL = "en_core_web_sm"


@runtime_checkable
class NounTagger(Protocol):
    """Finds the nouns (common and proper) of a product name."""

    def nouns(self, text: str) -> list[str]:
        """The lower-cased noun tokens of ``text``, in order, duplicates kept."""
        ...


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_TOKEN = re.compile(r"[a-z0-9]+(?:['’.][a-z0-9]+)*")

#: Determiners, pronouns, prepositions, conjunctions, auxiliaries and other closed classes.
FUNCTION_WORDS = _words(
    """
    a an the this that these those my your his her its our their all any each every both some
    no none other another such what which who whom whose i me we us you he him she it they them
    of in on at by for with without from to into onto upon over under above below between
    among through during before after about against along around across behind beyond near
    off out up down per via than as like unlike plus minus
    and or but nor so yet either neither if then else while because though although whether
    is are was were be been being am do does did has have had having will would shall should
    can could may might must not very too also just only more most less least much many
    few several again ever even still already here there where when how why
    """
)
#: Adjectives and adverbs common in product names that carry no noun-like suffix.
ADJECTIVES = _words(
    """
    new old big small tiny large medium mini long short tall high low wide narrow thick thin
    slim soft hard light dark heavy lasting deep full half extra super ultra best better good great
    fine fast quick slow smart top hot cold warm cool dry wet fresh clean pure natural organic
    free safe real true raw sweet sour spicy bitter mild strong gentle rich plain simple
    classic modern vintage retro casual formal basic premium deluxe royal original genuine
    multi single double triple dual men's women's kid's unisex adult portable compact
    mens womens kids girls boys baby junior senior tight loose open closed round square flat
    black white red blue green yellow orange purple pink brown grey gray beige ivory navy
    teal khaki burgundy maroon silver golden gold bronze rose cream tan violet lavender
    plum coral mauve nude charcoal turquoise magenta cyan lilac mint peach ruby
    x-small x-large xx-large xxl xl xs s m l
    inch inches feet ft cm mm oz ounce ounces fl lb lbs pound pounds pack count pcs piece pieces
    """
)
#: Nouns whose endings look like adjective or verb endings.
KNOWN_NOUNS = _words(
    """
    cable table vegetable turntable label bed shed sled seed feed speed head bread thread
    tweed polish finish radish archive olive charging bedding clothing lighting seasoning
    stuffing topping dressing flooring ceiling railing earring stocking legging jerky
    butterfly family belly jelly lily supply assembly
    """
)
#: Adjective, adverb and participle endings ("-eed" words are nouns: seed, tweed, speed).
_NON_NOUN_SUFFIXES = (
    "ally", "ily", "ely", "tly", "ous", "ful", "less", "able", "ible", "ive", "ied", "ted",
    "red", "sed", "zed", "ned", "led", "ked", "ped", "ced", "ged", "ish",
)  # fmt: skip


class LexiconNounTagger:
    """The default tagger: closed-class and adjective lexicons plus suffix rules.

    ``nouns`` and ``non_nouns`` extend the built-in lists; a word in ``nouns`` is always a
    noun, one in ``non_nouns`` never is.
    """

    def __init__(self, nouns: Iterable[str] = (), non_nouns: Iterable[str] = ()) -> None:
        extra_nouns = {n.lower() for n in nouns}
        extra_non_nouns = {n.lower() for n in non_nouns}
        self._nouns = (KNOWN_NOUNS - extra_non_nouns) | extra_nouns
        self._non_nouns = (FUNCTION_WORDS | ADJECTIVES | extra_non_nouns) - extra_nouns
        self._cached = lru_cache(maxsize=65536)(self._tag)

    @classmethod
    def from_catalog(cls, catalog: Catalog) -> LexiconNounTagger:
        """A tagger that also knows the catalog's product-type words as nouns.

        Why: queries and breadcrumb levels ("Bed Frames", "dry pasta") name product types,
        whose head words are nouns even where a suffix rule would say otherwise.
        """
        words: set[str] = set()
        for product in catalog.products:
            words.update(_TOKEN.findall(product.query.lower())[-1:])
            for level in product.product_category.split("›"):
                words.update(_TOKEN.findall(level.lower())[-1:])
        return cls(nouns=sorted(w for w in words if w not in FUNCTION_WORDS | ADJECTIVES))

    def nouns(self, text: str) -> list[str]:
        return list(self._cached(text))

    def _is_noun(self, token: str) -> bool:
        singular = token[:-1] if token.endswith("s") else token
        if token in self._nouns or singular in self._nouns:
            return True
        if token in self._non_nouns or not any(ch.isalpha() for ch in token):
            return False
        if token[0].isdigit() and not token[-1].isdigit():
            # Quantities such as "12oz" or "3pcs" read as numbers; model codes ("x200") stay.
            return False
        return not any(
            singular.endswith(s) and len(singular) > len(s) + 2 for s in _NON_NOUN_SUFFIXES
        )

    def _tag(self, text: str) -> tuple[str, ...]:
        return tuple(t for t in _TOKEN.findall(text.lower()) if self._is_noun(t))


class SpacyNounTagger:
    """The original tagging: spaCy tokens whose part of speech is NOUN or PROPN.

    Needs ``spacy`` and the model installed by the user (``python -m spacy download
    en_core_web_sm``); aem never downloads it.
    """

    def __init__(self, model: str = SPACY_MODEL) -> None:
        spacy = require("spacy", "spacy", feature="the spaCy noun tagger")
        try:
            self._nlp: Any = spacy.load(model, disable=["ner", "lemmatizer", "parser"])
        except OSError as exc:
            raise DataError(
                f"spaCy model {model!r} is not installed; install it with "
                f"'python -m spacy download {model}' or use the default lexicon tagger"
            ) from exc
        self._cached = lru_cache(maxsize=65536)(self._tag)

    def nouns(self, text: str) -> list[str]:
        return list(self._cached(text))

    def _tag(self, text: str) -> tuple[str, ...]:
        return tuple(t.text.lower() for t in self._nlp(text) if t.pos_ in ("NOUN", "PROPN"))


@lru_cache(maxsize=1)
def default_noun_tagger() -> LexiconNounTagger:
    """The tagger the reward uses unless told otherwise (shared, so its cache is too)."""
    return LexiconNounTagger()


def noun_tagger_factory(name: str) -> Callable[[], NounTagger]:
    """What :func:`get_noun_tagger` would build for ``name``, checked now and built later.

    Why: an env checks its ``noun_tagger=`` argument when constructed (an unknown name or a
    missing spaCy fails at once) but loads the spaCy model only when the first purchase is
    graded, so constructing stays cheap.
    """
    if name == "lexicon":
        return default_noun_tagger
    if name == "spacy" or name.startswith("spacy:"):
        model = name.partition(":")[2] or SPACY_MODEL
        require("spacy", "spacy", feature="the spaCy noun tagger")  # missing: say so now
        return lambda: SpacyNounTagger(model)
    raise DataError(
        f"unknown noun tagger {name!r}; use 'lexicon' (default), 'spacy' or 'spacy:<model>'"
    )


def get_noun_tagger(name: str) -> NounTagger:
    """A tagger by name: ``"lexicon"`` (default), ``"spacy"`` or ``"spacy:<model>"``."""
    return noun_tagger_factory(name)()
