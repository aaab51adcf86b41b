"""The README's promises: two set-up commands, and CI runs exactly its test command."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _setup_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", section, re.DOTALL)]


def test_readme_has_exactly_two_setup_commands() -> None:
    commands = _setup_commands()
    assert len(commands) == 2
    assert "scripts/install.sh" in commands[0] and "aem bench --suite quick" in commands[0]


def test_ci_runs_the_readme_test_command() -> None:
    ci_lines = [
        line.strip()
        for line in (ROOT / ".ci/run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert ci_lines[-1] == _setup_commands()[1]
    assert "bash scripts/install.sh" in ci_lines


def test_ci_runs_the_static_checks_before_the_tests() -> None:
    ci_lines = [line.strip() for line in (ROOT / ".ci/run").read_text().splitlines()]
    assert ci_lines.index("bash scripts/check.sh") < ci_lines.index(_setup_commands()[1])
    checks = (ROOT / "scripts/check.sh").read_text()
    assert "set -euo pipefail" in checks
    for tool in ('ruff" check', 'ruff" format --check', "codespell", "mypy", "lint-imports"):
        assert tool in checks, f"scripts/check.sh does not run {tool}"
