import pytest
from inikit import InterpolationError, parse

PATHS = """
[paths]
root = /srv/app
logs = ${root}/logs
archive = ${logs}/old

[server]
pidfile = ${paths:root}/run/app.pid
"""


def test_same_section_reference():
    assert parse(PATHS)["paths"]["logs"] == "/srv/app/logs"


def test_nested_reference():
    assert parse(PATHS)["paths"]["archive"] == "/srv/app/logs/old"


def test_cross_section_reference():
    assert parse(PATHS)["server"]["pidfile"] == "/srv/app/run/app.pid"


def test_unknown_reference():
    with pytest.raises(InterpolationError):
        parse("[a]\nx = ${nope}\n")["a"]["x"]


def test_raw_is_not_expanded():
    assert parse(PATHS)["paths"].raw("logs") == "${root}/logs"


# aem-task: 115
def test_self_reference_is_reported():
    with pytest.raises(InterpolationError, match="cycle"):
        parse("[a]\nx = ${x}\n")["a"]["x"]


def test_reference_cycle_across_sections():
    config = parse("[a]\nx = ${b:y}\n[b]\ny = ${a:x}\n")
    with pytest.raises(InterpolationError, match="a:x -> b:y -> a:x"):
        config["a"]["x"]


def test_diamond_is_not_a_cycle():
    config = parse("[a]\nbase = v\nleft = ${base}\nright = ${base}\nboth = ${left}${right}\n")
    assert config["a"]["both"] == "vv"


# aem-task-end
