import pytest
from inikit import MissingOptionError, ParseError, parse

SAMPLE = """
# service settings
[server]
host = example.org
port = 8080
debug: off

[paths]
root = /srv/app
"""


def test_sections_in_order():
    assert parse(SAMPLE).sections() == ["server", "paths"]


def test_option_values():
    server = parse(SAMPLE)["server"]
    assert server["host"] == "example.org"
    assert server.getint("port") == 8080


def test_colon_separator():
    assert parse(SAMPLE)["server"]["debug"] == "off"


def test_keys_are_case_insensitive():
    server = parse("[server]\nHost = a\n")["server"]
    assert server["HOST"] == "a"
    assert "host" in server


def test_options_before_header_go_to_default():
    assert parse("name = x\n")["DEFAULT"]["name"] == "x"


def test_missing_option():
    with pytest.raises(MissingOptionError):
        parse(SAMPLE)["server"]["user"]


def test_missing_section():
    with pytest.raises(MissingOptionError):
        parse(SAMPLE)["client"]


def test_garbage_line_reports_lineno():
    with pytest.raises(ParseError) as info:
        parse("[a]\nx = 1\nnot an option\n")
    assert info.value.lineno == 3


def test_hash_inline_comment():
    assert parse("[a]\nx = 1 # one\n")["a"]["x"] == "1"


def test_hash_inside_value_is_kept():
    assert parse("[a]\ncolor = #ff0000\n")["a"]["color"] == "#ff0000"


def test_continuation_lines():
    config = parse("[a]\nhosts = one\n  two\n  three\n")
    assert config["a"].getlist("hosts") == ["one", "two", "three"]


def test_continuation_without_option():
    with pytest.raises(ParseError):
        parse("[a]\n  stray\n")


# aem-task: 101
def test_semicolon_inline_comment():
    config = parse("[server]\ntimeout = 30 ; seconds\nname = api;v2\n")
    assert config["server"].getint("timeout") == 30
    assert config["server"]["name"] == "api;v2"


def test_semicolon_comment_on_continuation():
    config = parse("[a]\nhosts = one\n  two ; backup\n")
    assert config["a"].getlist("hosts") == ["one", "two"]


# aem-task-end


# aem-task: 107
def test_continuation_line_containing_equals():
    config = parse("[run]\ncommand = python -m app\n    --workers=4\n    --log=debug\n")
    assert config["run"]["command"] == "python -m app\n--workers=4\n--log=debug"
    assert "--workers" not in config["run"]


def test_continuation_line_containing_colon():
    config = parse("[a]\nurls = http://one\n  http://two\n")
    assert config["a"].getlist("urls") == ["http://one", "http://two"]


# aem-task-end
