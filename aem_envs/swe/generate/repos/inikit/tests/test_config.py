import pytest
from inikit import parse

TYPES = """
[types]
count = 42
ratio = 0.25
enabled = yes
disabled = Off
items = a, b,
  c
"""


def test_getint():
    assert parse(TYPES)["types"].getint("count") == 42


def test_getfloat():
    assert parse(TYPES)["types"].getfloat("ratio") == 0.25


@pytest.mark.parametrize(("key", "expected"), [("enabled", True), ("disabled", False)])
def test_getboolean(key, expected):
    assert parse(TYPES)["types"].getboolean(key) is expected


def test_getboolean_rejects_other_words():
    with pytest.raises(ValueError):
        parse("[a]\nflag = maybe\n")["a"].getboolean("flag")


def test_getlist_commas_and_newlines():
    assert parse(TYPES)["types"].getlist("items") == ["a", "b", "c"]


def test_get_default():
    assert parse(TYPES)["types"].get("absent", "fallback") == "fallback"


def test_len_and_iter():
    section = parse(TYPES)["types"]
    assert len(section) == 5
    assert next(iter(section)) == "count"
