"""The package stack of ``docs/architecture.md``: every import goes down, never up.

Walks every ``import`` statement of every module (function-level ones included: a lazy
import up the stack is still a dependency up the stack), so a new upward import fails here
instead of in a user's install that lacks the upper package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Bottom first; a package may import only the ones before it.
STACK = ("sandboxes", "aem_envs", "aem_agent", "benchmarks", "aem_cli")
#: Source trees of the bundled SWE task repositories: data, not aem code.
DATA_TREES = ("aem_envs/swe/generate/repos",)


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def _modules(package: str) -> list[Path]:
    return [
        p
        for p in sorted((ROOT / package).rglob("*.py"))
        if not any(str(p.relative_to(ROOT)).startswith(tree) for tree in DATA_TREES)
    ]


@pytest.mark.parametrize("package", STACK)
def test_imports_go_down_the_stack(package: str) -> None:
    above = set(STACK[STACK.index(package) + 1 :])
    upward = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in _modules(package)
        for line, module in _imports(path)
        if module.split(".")[0] in above
    ]
    assert not upward, "imports up the stack (docs/architecture.md):\n" + "\n".join(upward)


def test_the_walk_sees_function_level_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from aem_cli.main import main\n")
    assert _imports(module) == [(2, "aem_cli.main")]
