"""JSON files decoded as a stream: one array element or object member at a time.

Why: the original WebShop's ``items_shuffle.json`` is a GB of text and ``items_ins_v2.json``
a fifth of that; decoded whole they hold every record's dict at once. Streamed from blocks
of the (decompressed) file, one record is alive at a time and the file's text never is.
"""

from __future__ import annotations

import codecs
import gzip
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from aem_envs.core.errors import DataError


def encode_json(content: Any) -> bytes:
    """The compact JSON encoding the writer uses (and the digest of in-memory records hashes)."""
    return json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def invalid_json(file: str, exc: Exception) -> DataError:
    return DataError(f"{file}: not valid JSON ({exc}); re-download or regenerate it")


_JSON_SPACE = re.compile(r"[ \t\n\r]*")
#: Bytes read at a time when a file is streamed.
BLOCK_BYTES = 1 << 20


class _Cursor:
    """A position in JSON text that arrives in blocks; only the unread rest is kept."""

    def __init__(self, blocks: Iterator[str], file: str) -> None:
        self._blocks = blocks
        self._decoder = json.JSONDecoder()
        self.file = file
        self.text = ""
        self.at = 0
        self._dropped = 0
        self._ended = False

    def _more(self) -> bool:
        block = next(self._blocks, None)
        if block is None:
            self._ended = True
            return False
        self._dropped += self.at
        self.text = self.text[self.at :] + block
        self.at = 0
        return True

    def peek(self) -> str:
        """The next character that is not white space ('' at the end), not consumed."""
        while True:
            match = _JSON_SPACE.match(self.text, self.at)
            self.at = match.end() if match else self.at
            if self.at < len(self.text) or not self._more():
                return self.text[self.at : self.at + 1]

    def value(self) -> Any:
        """Decode the value at the cursor (after :meth:`peek`), reading more text as needed."""
        while True:
            try:
                value, end = self._decoder.raw_decode(self.text, self.at)
                # A value that ends the text read so far may go on (a number's digits).
                if end < len(self.text) or self._ended:
                    self.at = end
                    return value
            except json.JSONDecodeError as exc:
                if self._ended:
                    where = self._dropped + exc.pos
                    raise self.invalid(f"{exc.msg} at character {where}") from None
            self._more()

    def invalid(self, reason: str) -> DataError:
        return invalid_json(self.file, ValueError(reason))

    def expect(self, token: str) -> None:
        if self.peek() != token:
            where = self._dropped + self.at
            raise self.invalid(f"expected {token!r} at character {where}")
        self.at += 1


class JsonStream:
    """The elements of a JSON array, or the (key, value) members of an object, decoded one at a
    time from text read in blocks, each time it is iterated."""

    def __init__(
        self, blocks: Callable[[], Iterator[str]], file: str, *, members: bool = False, what: str
    ) -> None:
        self._blocks = blocks
        self._file = file
        self._members = members
        self._what = what

    @classmethod
    def of_text(cls, text: str, file: str, **kwargs: Any) -> JsonStream:
        return cls(lambda: iter((text,)), file, **kwargs)

    @classmethod
    def of_file(cls, path: Path, **kwargs: Any) -> JsonStream:
        return cls(lambda: _text_blocks(path), str(path), **kwargs)

    def __iter__(self) -> Iterator[Any]:
        cursor = _Cursor(self._blocks(), self._file)
        opening, closing = ("{", "}") if self._members else ("[", "]")
        if cursor.peek() != opening:
            raise DataError(
                f"{self._file}: field 'top level' should be {self._what}; "
                "the file is not in the WebShop format"
            )
        cursor.at += 1
        if cursor.peek() != closing:
            while True:
                if self._members:
                    if cursor.peek() != '"':
                        raise cursor.invalid("expected a quoted key")
                    key = cursor.value()
                    cursor.expect(":")
                    cursor.peek()
                    yield key, cursor.value()
                else:
                    cursor.peek()
                    yield cursor.value()
                if cursor.peek() != ",":
                    break
                cursor.at += 1
        cursor.expect(closing)
        if cursor.peek():
            raise cursor.invalid(f"text after the closing {closing!r}")


def _text_blocks(path: Path) -> Iterator[str]:
    """A file's (decompressed) text in blocks, without holding the whole of it."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb") as handle:
            while block := handle.read(BLOCK_BYTES):
                yield decoder.decode(block)
            yield decoder.decode(b"", final=True)
    except (OSError, EOFError) as exc:
        raise DataError(f"{path}: cannot read the file ({exc})") from exc
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc}); re-download or regenerate it") from exc


class EncodedEntries(Mapping[str, Any]):
    """An object's members kept as compact JSON bytes, decoded when looked up.

    Why: ``items_ins_v2.json`` has an entry for each of 1.18M products; as bytes they take
    a fraction of the memory of the decoded dicts, and conversion reads each one once or twice.
    """

    def __init__(self, members: Iterable[tuple[str, Any]]) -> None:
        self._encoded = {key: encode_json(value) for key, value in members}

    def __getitem__(self, key: str) -> Any:
        return json.loads(self._encoded[key])

    def __contains__(self, key: object) -> bool:
        return key in self._encoded

    def __iter__(self) -> Iterator[str]:
        return iter(self._encoded)

    def __len__(self) -> int:
        return len(self._encoded)
