"""The README's promises: two set-up commands, CI runs exactly its test command, and the
front page's figures are the ones the docs and the committed results hold."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

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


def _section(heading: str) -> str:
    """The README's text under ``## heading``, up to the next ``##`` heading."""
    return (ROOT / "README.md").read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def _table_rows(text: str) -> list[list[str]]:
    """Cells of every Markdown table row in ``text`` (header and separator rows dropped)."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([cell.strip().replace("*", "") for cell in line.strip("|").split(" | ")])
    return [row for row in rows if row[0] not in ("benchmark", "run", "env (held-out set)")]


def test_readme_is_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move detail into docs/"


def test_readme_performance_rows_are_rows_of_the_performance_page() -> None:
    """The headline rows are the first six columns of rows `aem bench perf` wrote into
    docs/performance.md: one home for each figure, the README quoting it."""
    page = {
        tuple(row[:2]): row[2:6] for row in _table_rows((ROOT / "docs/performance.md").read_text())
    }
    headline = _table_rows(_section("Performance"))
    assert len(headline) >= 5
    for row in headline:
        assert len(row) == 6, row
        assert page.get(tuple(row[:2])) == row[2:], f"{row[:2]}: not the docs/performance.md row"


def _final_table(run: str) -> dict[str, str]:
    """Final held-out success per algorithm of a committed learning experiment."""
    text = (ROOT / "benchmarks/learning/results" / run / "table.md").read_text()
    return {row[0]: row[1] for row in _table_rows(text) if row[0] != "algorithm"}


@pytest.mark.parametrize("run", ["mechanism", "mechanism-lr1e-3", "mechanism-warm"])
def test_readme_mechanism_numbers_are_the_committed_results(run: str) -> None:
    finals = _final_table(run)
    row = next(r for r in _table_rows(_section("Does it learn?")) if r[0].startswith(f"`{run}`"))
    assert row[1:] == [f"{finals[k]} %" for k in ("GRPO", "AEM", "start checkpoint")]


def test_readme_alfworld_rl_numbers_are_the_committed_results() -> None:
    finals = _final_table("alfworld-sft")
    expected = (
        f"GRPO {finals['GRPO']} %, AEM {finals['AEM']} %, "
        f"against the start's {finals['start checkpoint']} %"
    )
    assert expected in " ".join(_section("Does it learn?").split())


def _summary(name: str, policy: str) -> dict:
    results = json.loads((ROOT / "benchmarks/learning/results/warm-start" / name).read_text())
    return next(row for row in results["summary"] if row["policy"] == policy)


@pytest.mark.parametrize("page", ["README.md", "docs/results.md"])
@pytest.mark.parametrize(
    ("table_row", "results", "policy"),
    [
        (0, "eval24-aem-ref.json", "smollm2"),
        (1, "eval24-aem-ref.json", "aem-ref"),
        (2, "eval-webshop-base.json", "smollm2"),
        (3, "eval-webshop-sft.json", "hf:runs/sft-webshop"),
    ],
)
def test_warm_start_numbers_are_the_committed_results(
    page: str, table_row: int, results: str, policy: str
) -> None:
    """The warm-start table, on the front page and on the results page it quotes."""
    text = (ROOT / page).read_text()
    rows = [r for r in _table_rows(text) if len(r) == 5 and "/24" in r[2]]
    success, score, invalid = rows[table_row][2:]
    summary = _summary(results, policy)
    wins = round(summary["success_rate"] * summary["episodes"] / 100)
    assert success == f"{wins}/{summary['episodes']}"
    assert score == f"{summary['mean_score']:.1f}"
    assert invalid == f"{summary['invalid_action_rate']:.1f} %".replace(".0 %", " %")


def test_readme_fetch_numbers_are_the_committed_results() -> None:
    fetch = ROOT / "benchmarks/learning/results/mechanism-fetch2"
    check = json.loads((fetch / "task-check.json").read_text())
    paired = {
        row[0]: row
        for row in _table_rows((fetch / "report.md").read_text())
        if row[0].startswith("AEM-LAM") and row[2].startswith("[")
    }
    finals = {row[0]: row[1] for row in _table_rows((fetch / "table.md").read_text())}
    text = " ".join(_section("Does it learn?").split()).replace("−", "-")
    assert f"within-group correlation of {check['within_group_correlation']:.2f}" in text
    assert (
        f"held-out {finals['start checkpoint']} % → GRPO {finals['GRPO'].split(' ')[0]} %" in text
    )
    one, two = paired["AEM-LAM1"], paired["AEM-LAM2"]
    assert f"λ = 1 against GRPO is {one[1]} points {one[2]}" in text
    assert f"λ = 2 is {two[1]} {two[2]}" in text
