import pytest
from tinytpl import Template, render


def test_upper_lower_title():
    assert render("{{ s|upper }} {{ s|lower }} {{ s|title }}", s="hello World") == (
        "HELLO WORLD hello world Hello World"
    )


def test_chained_filters():
    assert render("{{ xs|join:'-'|upper }}", xs=["a", "b"]) == "A-B"


def test_default_filter():
    assert render('{{ name|default:"guest" }}') == "guest"
    assert render('{{ name|default:"guest" }}', name="ann") == "ann"


def test_length_filter():
    assert render("{{ xs|length }}", xs=[1, 2, 3]) == "3"


def test_literal_with_filter():
    assert render("{{ 'abc'|upper }}") == "ABC"


def test_autoescape_lt_gt():
    assert render("{{ s }}", s="<b>") == "&lt;b&gt;"


def test_safe_filter_skips_escaping():
    assert render("{{ s|safe }}", s="<b>") == "<b>"


def test_autoescape_off():
    assert Template("{{ s }}", autoescape=False).render(s="<b>") == "<b>"


# aem-task: 401
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Tom & Jerry", "Tom &amp; Jerry"),
        ("<a href='x'>", "&lt;a href=&#x27;x&#x27;&gt;"),
        ('say "hi"', "say &quot;hi&quot;"),
        ("&lt;", "&amp;lt;"),
    ],
)
def test_autoescape_entities(value, expected):
    assert render("{{ s }}", s=value) == expected


def test_escape_filter_then_autoescape_is_not_double():
    assert render("{{ s|escape }}", s="a<b") == "a&lt;b"


# aem-task-end
