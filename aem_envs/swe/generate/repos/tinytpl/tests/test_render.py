import pytest
from tinytpl import Template, TemplateSyntaxError, UndefinedError, render


class User:
    def __init__(self, name):
        self.name = name


def test_plain_text():
    assert render("hello") == "hello"


def test_variable():
    assert render("Hello {{ name }}!", name="Ada") == "Hello Ada!"


def test_dotted_mapping_and_attribute():
    assert render("{{ site.owner.name }}", site={"owner": User("Bo")}) == "Bo"


def test_missing_variable_renders_empty():
    assert render("[{{ nope }}]") == "[]"


def test_strict_mode_raises():
    with pytest.raises(UndefinedError):
        Template("{{ nope }}", strict=True).render()


def test_if_else():
    template = Template("{% if user %}hi {{ user }}{% else %}anonymous{% endif %}")
    assert template.render(user="x") == "hi x"
    assert template.render() == "anonymous"


def test_if_not():
    assert render("{% if not items %}empty{% endif %}", items=[]) == "empty"


def test_for_loop():
    assert render("{% for x in xs %}{{ x }},{% endfor %}", xs=[1, 2, 3]) == "1,2,3,"


def test_for_else():
    assert render("{% for x in xs %}{{ x }}{% else %}none{% endfor %}", xs=[]) == "none"


def test_loop_first_last():
    source = (
        "{% for x in xs %}{% if loop.first %}[{% endif %}"
        "{{ x }}{% if loop.last %}]{% endif %}{% endfor %}"
    )
    assert render(source, xs="abc") == "[abc]"


def test_loop_index0():
    assert render("{% for x in xs %}{{ loop.index0 }}{% endfor %}", xs="ab") == "01"


@pytest.mark.parametrize(
    "source", ["{% if x %}", "{% for x %}{% endfor %}", "{% while x %}", "{{ x", "{{ x|nope }}"]
)
def test_syntax_errors(source):
    with pytest.raises(TemplateSyntaxError):
        Template(source)


# aem-task: 402
def test_loop_index_is_one_based():
    assert render("{% for x in xs %}{{ loop.index }}.{{ x }} {% endfor %}", xs=["a", "b"]) == (
        "1.a 2.b "
    )


def test_loop_index_in_nested_loops():
    source = "{% for r in rows %}{% for c in r %}{{ loop.index }}{% endfor %};{% endfor %}"
    assert render(source, rows=[[0, 0], [0]]) == "12;1;"


# aem-task-end


# aem-task: 403
def test_list_index_lookup():
    assert render("{{ items.0 }}-{{ items.2 }}", items=["a", "b", "c"]) == "a-c"


def test_index_then_attribute():
    assert render("{{ users.1.name }}", users=[User("Ann"), User("Ben")]) == "Ben"


def test_index_out_of_range_is_undefined():
    assert render("[{{ items.5 }}]", items=["a"]) == "[]"


# aem-task-end
