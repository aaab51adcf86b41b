"""Streaming JSON: elements and members decoded from blocks cut anywhere, broken text refused."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from aem_envs.core.errors import DataError
from aem_envs.webshop import jsonstream
from aem_envs.webshop.jsonstream import JsonStream


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[]", []),
        (' \n[ {"a": 1} ,\n{"b": [2]} ]\n', [{"a": 1}, {"b": [2]}]),
    ],
)
def test_arrays_decode_element_by_element(text: str, expected: list[object]) -> None:
    array = JsonStream.of_text(text, "f.json", what="a list")
    assert list(array) == expected
    assert list(array) == expected  # iterable again


@pytest.mark.parametrize("text", ['[{"a": 1} {"b": 2}]', '[{"a": 1}, oops]', '[{"a": 1}] x', "[1,"])
def test_broken_arrays_are_refused(text: str) -> None:
    with pytest.raises(DataError, match=r"f\.json: not valid JSON"):
        list(JsonStream.of_text(text, "f.json", what="a list"))


@pytest.mark.parametrize("block", [1, 3, 7, 1 << 20])
@pytest.mark.parametrize("compress", [False, True])
def test_streamed_files_decode_as_a_whole_file_does(tmp_path, monkeypatch, block, compress):
    monkeypatch.setattr(jsonstream, "BLOCK_BYTES", block)  # values and characters cut anywhere
    text = "r\u00e9sum\u00e9 \u2603 \U0001f600"  # 2-, 3- and 4-byte characters
    array = [{"n": 1234567, "s": text}, [1.5e10, None, True], "x" * 40]
    members = {"A1": {"attributes": ["é"]}, "B2": [], "C3": 12345678901234567890}
    for name, content, kw in (("a.json", array, {}), ("o.json", members, {"members": True})):
        raw = json.dumps(content, indent=1, ensure_ascii=False).encode("utf-8")
        path = tmp_path / (name + ".gz" if compress else name)
        path.write_bytes(gzip.compress(raw) if compress else raw)
        stream = JsonStream.of_file(path, what="x", **kw)
        decoded = dict(stream) if kw else list(stream)
        assert decoded == content
        assert (dict(stream) if kw else list(stream)) == content  # iterable again


@pytest.mark.parametrize(
    ("text", "says"),
    [("{", "expected a quoted key"), ('{"a" 1}', "expected ':'"), ('{"a": 1} 2', "text after")],
)
def test_streamed_objects_reject_broken_text(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "o.json"
    path.write_text(text)
    with pytest.raises(DataError, match=rf"o\.json: not valid JSON \({says}"):
        dict(JsonStream.of_file(path, members=True, what="x"))
