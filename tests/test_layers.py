"""The package stack of ``docs/architecture.md``: every import goes down, never up, no
package's modules import each other in a circle, and no module outgrows one subject.

Walks every ``import`` statement of every module (function-level ones included: a lazy
import up the stack is still a dependency up the stack, and a lazy import that closes a
circle only hides it), so a new upward import or cycle fails here instead of in a user's
install that lacks the upper package, or at the first import from an unlucky order.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Bottom first; a package may import only the ones before it.
STACK = ("sandboxes", "aem_envs", "aem_agent", "benchmarks", "aem_cli")
#: Source trees of the bundled SWE task repositories: data, not aem code.
DATA_TREES = ("aem_envs/swe/generate/repos",)
#: Modules past this are split by what they hold (data tables live in data files instead).
MAX_MODULE_LINES = 400


@dataclass(frozen=True)
class Import:
    line: int
    #: The imported module, absolute; for ``from M import name``, ``M.name`` when that is a
    #: module of the walked tree, else ``M``.
    module: str
    in_function: bool


def _modules(package: str) -> list[Path]:
    return [
        p
        for p in sorted((ROOT / package).rglob("*.py"))
        if not any(str(p.relative_to(ROOT)).startswith(tree) for tree in DATA_TREES)
    ]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


#: Every module of every package of the stack, by dotted name.
MODULES = {_module_name(path): path for package in STACK for path in _modules(package)}


def _imports(path: Path, name: str, known: dict[str, Path] = MODULES) -> list[Import]:
    """Every import in ``path`` (the module ``name``), relative ones made absolute."""
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend(Import(node.lineno, alias.name, in_function) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + is_package]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                target = submodule if submodule in known else module
                found.append(Import(node.lineno, target, in_function))
        function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, in_function or function)

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), False)
    return found


def _graph(known: dict[str, Path] = MODULES) -> dict[str, set[str]]:
    """Module → the walked modules it imports (the nearest enclosing one for a name in it)."""
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        targets = graph.setdefault(name, set())
        for item in _imports(path, name, known):
            module = item.module
            while module and module not in known:
                module = module.rpartition(".")[0]
            if module and module != name:
                targets.add(module)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of modules (Tarjan), as a path that
    ends where it starts."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group: set[str] = set()
            member = ""
            while member != node:
                member = stack.pop()
                group.add(member)
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return [_cycle_in(group, graph) for group in groups]


def _cycle_in(group: set[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest cycle through the first module of ``group`` (breadth-first)."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node] & group):
                if target == start:
                    return [*paths[node], start]
                if target not in paths:
                    paths[target] = [*paths[node], target]
                    following.append(target)
        frontier = following
    raise AssertionError(f"{group} is not strongly connected")


@pytest.mark.parametrize("package", STACK)
def test_imports_go_down_the_stack(package: str) -> None:
    above = set(STACK[STACK.index(package) + 1 :])
    upward = [
        f"{path.relative_to(ROOT)}:{item.line} imports {item.module}"
        for path in _modules(package)
        for item in _imports(path, _module_name(path))
        if item.module.split(".")[0] in above
    ]
    assert not upward, "imports up the stack (docs/architecture.md):\n" + "\n".join(upward)


@pytest.mark.parametrize("package", STACK)
def test_no_package_imports_itself_in_a_circle(package: str) -> None:
    cycles = [cycle for cycle in _cycles(_graph()) if cycle[0].split(".")[0] == package]
    assert not cycles, "import cycles (function-level imports included):\n" + "\n".join(
        " → ".join(cycle) for cycle in cycles
    )


@pytest.mark.parametrize("package", STACK)
def test_no_module_is_longer_than_the_limit(package: str) -> None:
    """A module that outgrows one subject is split by what it holds, as ``rollout.py`` was
    into episodes, generators and batches; a long module is where twins and tangles hide."""
    long = [
        f"{path.relative_to(ROOT)}: {lines} lines"
        for path in _modules(package)
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert not long, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(long)


def test_sandboxes_imports_its_own_modules_at_module_level_only() -> None:
    """A lazy import of a sibling can only be there to dodge a cycle or hide a dependency;
    only optional third-party packages (the docker SDK) are imported inside functions."""
    lazy = [
        f"{path.relative_to(ROOT)}:{item.line} imports {item.module} inside a function"
        for path in _modules("sandboxes")
        for item in _imports(path, _module_name(path))
        if item.in_function and item.module.split(".")[0] in STACK
    ]
    assert not lazy, "\n".join(lazy)


def test_the_walk_sees_function_level_and_relative_imports(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    known = {"pkg": package / "__init__.py", "pkg.a": package / "a.py", "pkg.b": package / "b.py"}
    known["pkg"].write_text("from . import a\n")
    known["pkg.a"].write_text("from .b import f\n")
    known["pkg.b"].write_text("def f():\n    from aem_cli.main import main\n    from . import a\n")
    assert _imports(known["pkg.b"], "pkg.b", known) == [
        Import(2, "aem_cli.main", True),
        Import(3, "pkg.a", True),
    ]
    assert _imports(known["pkg"], "pkg", known) == [Import(1, "pkg.a", False)]
    graph = _graph(known)
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}}
    assert _cycles(graph) == [["pkg.a", "pkg.b", "pkg.a"]]
