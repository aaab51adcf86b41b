"""The original WebShop files, read and written as raw records (not yet interpreted).

The original WebShop ships its data as JSON files (``items_shuffle*.json`` for products,
``items_ins_v2*.json`` for attributes and synthetic instructions, ``items_human_ins.json`` for
human instructions, ``reviews.json`` for reviews). Users who have them point
:func:`~aem_envs.webshop.tasks.load_original` at their folder; the bundled catalog is the same
set of files, made by :mod:`aem_envs.webshop.generate` and shipped gzipped, read through the
very same code. :mod:`~aem_envs.webshop.products` and :mod:`~aem_envs.webshop.goals` interpret
the records.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aem_envs.core.errors import DataError
from aem_envs.core.io import atomic_write_bytes
from aem_envs.webshop.jsonstream import EncodedEntries, JsonStream, encode_json, invalid_json

PRODUCTS_STEM = "items_shuffle"
_PRODUCTS_TOP = "a list of products"
ATTRIBUTES_STEM = "items_ins_v2"
HUMAN_FILE = "items_human_ins"
REVIEWS_FILE = "reviews"


def expect(value: Any, kind: type | tuple[type, ...], file: str, field: str, what: str) -> None:
    """Raise a :class:`DataError` naming the file and field unless ``value`` is a ``kind``."""
    if not isinstance(value, kind):
        raise DataError(
            f"{file}: field '{field}' should be {what}, got {type(value).__name__}; "
            "the file is not in the WebShop format"
        )


@dataclass(frozen=True)
class OriginalRecords:
    """The raw JSON content of one WebShop data folder (or of a generated catalog).

    Why a separate stage: the generator produces these records directly, so generating a
    catalog and writing-then-loading it run the same parsing code and give equal catalogs.
    """

    #: Product records in file order; read from a file, each is decoded when iterated.
    products: Iterable[dict[str, Any]]
    #: Attribute entries by asin; streamed from a file, kept encoded (:class:`EncodedEntries`).
    attributes: Mapping[str, dict[str, Any]]
    human_instructions: dict[str, list[dict[str, Any]]]
    reviews: Iterable[dict[str, Any]]
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
            ATTRIBUTES_STEM: encode_json(dict(self.attributes)),
            HUMAN_FILE: encode_json(self.human_instructions),
            REVIEWS_FILE: encode_json(list(self.reviews)),
        }


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


def _read_json(path: Path) -> tuple[Any, str]:
    """A file's parsed content and the digest of its bytes."""
    text, digest = _read_text(path)
    try:
        return json.loads(text), digest
    except json.JSONDecodeError as exc:
        raise invalid_json(str(path), exc) from exc


#: Record kind → file stem, in the order the digest hashes them.
KINDS: dict[str, str] = {
    "products": PRODUCTS_STEM,
    "attributes": ATTRIBUTES_STEM,
    "human_instructions": HUMAN_FILE,
    "reviews": REVIEWS_FILE,
}
#: What an optional file that is absent counts as (in the digest too).
_ABSENT: dict[str, Any] = {"human_instructions": {}, "reviews": []}


@dataclass(frozen=True)
class OriginalFiles:
    """Where a WebShop data folder's files are, by record kind (optional ones may be absent)."""

    folder: Path
    paths: Mapping[str, Path]

    def names(self) -> dict[str, str]:
        """Record kind → file name, as :attr:`OriginalRecords.files` has them."""
        return {kind: str(path) for kind, path in self.paths.items()}

    def digest(self) -> str:
        """The digest :func:`read_original` gives, from the files read in blocks."""
        digests = []
        for kind in KINDS:
            path = self.paths.get(kind)
            if path is None:
                digests.append(_file_digest(encode_json(_ABSENT[kind])))
                continue
            try:
                opener = gzip.open if path.suffix == ".gz" else open
                with opener(path, "rb") as handle:
                    digests.append(hashlib.file_digest(handle, "sha256").hexdigest())
            except (OSError, EOFError) as exc:
                raise DataError(f"{path}: cannot read the file ({exc})") from exc
        return _digest(digests)

    def fingerprint(self) -> list[list[Any]]:
        """Each file's path, size, inode and modification and change times: any edit,
        replacement or touch of a file changes it."""
        rows = []
        for kind, path in self.paths.items():
            stat = path.stat()
            rows.append([kind, str(path), stat.st_size, stat.st_ino, stat.st_mtime_ns,
                         stat.st_ctime_ns])  # fmt: skip
        return rows


def find_original(directory: str | Path) -> OriginalFiles:
    """The files of a WebShop data folder; a missing folder or required file is an error."""
    folder = Path(directory).expanduser()
    if not folder.is_dir():
        raise DataError(f"{folder}: not a folder; give the folder holding items_shuffle*.json")
    paths = {kind: _pick(folder, stem) for kind, stem in KINDS.items()}
    for kind in ("products", "attributes"):
        if paths[kind] is None:
            raise DataError(
                f"{folder}: no {KINDS[kind]}*.json file; point the loader at the folder holding "
                "the WebShop data files (items_shuffle*.json, items_ins_v2*.json)"
            )
    return OriginalFiles(folder, {kind: path for kind, path in paths.items() if path is not None})


def read_original(directory: str | Path | OriginalFiles) -> OriginalRecords:
    """Read the JSON files of a WebShop data folder without interpreting them yet."""
    found = directory if isinstance(directory, OriginalFiles) else find_original(directory)
    paths = found.paths
    files = found.names()
    products_text, products_digest = _read_text(paths["products"])
    products = JsonStream.of_text(products_text, files["products"], what=_PRODUCTS_TOP)
    attributes, attributes_digest = _read_json(paths["attributes"])
    expect(attributes, dict, files["attributes"], "top level", "an object keyed by asin")
    optional: dict[str, Any] = {kind: type(empty)() for kind, empty in _ABSENT.items()}
    digests = [products_digest, attributes_digest]
    for kind, shape, what in (("human_instructions", dict, "an object keyed by asin"),
                              ("reviews", list, "a list")):  # fmt: skip
        if kind not in paths:
            digests.append(_file_digest(encode_json(optional[kind])))
            continue
        optional[kind], digest = _read_json(paths[kind])
        expect(optional[kind], shape, files[kind], "top level", what)
        digests.append(digest)
    human, reviews = optional["human_instructions"], optional["reviews"]
    return OriginalRecords(products, attributes, human, reviews, files, _digest(digests))


def stream_original(files: OriginalFiles) -> OriginalRecords:
    """The records of ``files`` as a stream, for converting a large catalog once.

    Products are decoded one at a time each time they are iterated, the attribute entries
    kept encoded (:class:`EncodedEntries`) and reviews streamed; no file's text is held
    whole except the small human instructions file.
    """
    paths = files.paths
    names = files.names()
    products = JsonStream.of_file(paths["products"], what=_PRODUCTS_TOP)
    attributes = EncodedEntries(
        JsonStream.of_file(paths["attributes"], members=True, what="an object keyed by asin")
    )
    human: dict[str, list[dict[str, Any]]] = {}
    if "human_instructions" in paths:
        human = _read_json(paths["human_instructions"])[0]
        expect(human, dict, names["human_instructions"], "top level", "an object keyed by asin")
    reviews: Iterable[dict[str, Any]] = []
    if "reviews" in paths:
        reviews = JsonStream.of_file(paths["reviews"], what="a list")
    return OriginalRecords(products, attributes, human, reviews, names, files.digest())


def write_original(records: OriginalRecords, directory: str | Path, *, compress: bool) -> None:
    """Write records as the original files (gzipped ``.json.gz`` when ``compress``)."""
    folder = Path(directory)
    for stem, raw in records.encoded().items():
        if compress:
            atomic_write_bytes(folder / f"{stem}.json.gz", gzip.compress(raw, 9, mtime=0))
        else:
            atomic_write_bytes(folder / f"{stem}.json", raw)
