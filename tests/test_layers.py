"""The package stack of ``docs/architecture.md`` beyond its import-linter contract.

That imports only go down the stack is the ``layers`` contract in ``pyproject.toml``, run by
``make check`` (``scripts/check.sh``) and CI; the last test here shows that it catches a lazy
import up the stack. What a contract does not state is checked here, on the import graph
import-linter itself builds (grimp, function-level and ``TYPE_CHECKING`` imports included): no
package's modules import each other in a circle (a lazy import that closes a circle only hides
it), no module outgrows one subject, and ``sandboxes`` imports its own modules at module level.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Bottom first, as the contract lists them top first.
STACK: tuple[str, ...] = tuple(
    reversed(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][
            0
        ]["layers"]
    )
)
#: Source trees of the bundled SWE task repositories: data, not aem code.
DATA_TREES = ("aem_envs/swe/generate/repos",)
#: Modules past this are split by what they hold (data tables live in data files instead).
MAX_MODULE_LINES = 400


def _modules(package: str) -> list[Path]:
    return [
        p
        for p in sorted((ROOT / package).rglob("*.py"))
        if not any(str(p.relative_to(ROOT)).startswith(tree) for tree in DATA_TREES)
    ]


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    """This checkout's import graph (the packages found on ``sys.path``, which the test run
    puts the checkout first on)."""
    assert all(Path(__import__(p).__file__).parent == ROOT / p for p in STACK)
    return grimp.build_graph(*STACK, cache_dir=None)


@pytest.mark.parametrize("package", STACK)
def test_no_package_imports_itself_in_a_circle(package: str, graph: grimp.ImportGraph) -> None:
    cycles: dict[frozenset[str], str] = {}
    for module in sorted(m for m in graph.modules if m.split(".")[0] == package):
        for target in sorted(graph.find_modules_directly_imported_by(module)):
            if target.split(".")[0] == package and graph.chain_exists(target, module):
                chain = graph.find_shortest_chain(target, module) or ()
                cycles.setdefault(frozenset(chain), " → ".join((module, *chain)))
    assert not cycles, "import cycles (function-level imports included):\n" + "\n".join(
        sorted(cycles.values())
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


def _function_level_imports(path: Path) -> set[tuple[int, str]]:
    """(line, module) of every import inside a function; relative ones start with dots."""
    found: set[tuple[int, str]] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import):
                    found |= {(inner.lineno, alias.name) for alias in inner.names}
                elif isinstance(inner, ast.ImportFrom):
                    found.add((inner.lineno, "." * inner.level + (inner.module or "")))
    return found


def test_sandboxes_imports_its_own_modules_at_module_level_only() -> None:
    """A lazy import of a sibling can only be there to dodge a cycle or hide a dependency;
    only optional third-party packages (the docker SDK) are imported inside functions."""
    lazy = [
        f"{path.relative_to(ROOT)}:{line} imports {module} inside a function"
        for path in _modules("sandboxes")
        for line, module in sorted(_function_level_imports(path))
        if module.startswith(".") or module.split(".")[0] in STACK
    ]
    assert not lazy, "\n".join(lazy)


def test_the_stack_contract_fails_on_a_lazy_import_up_the_stack(tmp_path: Path) -> None:
    """The contract of ``pyproject.toml``, run on a stand-in tree whose bottom package
    imports the top one inside a function: ``lint-imports`` names that import."""
    for package in STACK:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / STACK[0] / "low.py").write_text(
        f"def late():\n    from {STACK[-1]} import top\n    return top\n"
    )
    (tmp_path / STACK[-1] / "top.py").write_text("")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    lint = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint), "--no-cache", "--no-logo"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{STACK[0]}.low -> {STACK[-1]}.top (l.2)" in result.stdout
