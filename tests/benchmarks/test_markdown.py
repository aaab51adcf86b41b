"""Markdown pipe tables (``benchmarks.markdown``)."""

from __future__ import annotations

from benchmarks.markdown import pipe_table


def test_a_pipe_table_has_a_header_a_rule_and_one_line_per_row() -> None:
    assert pipe_table(["a", "b"], [["1", ""], ["x", "y"]]) == (
        "| a | b |\n|---|---|\n| 1 |  |\n| x | y |"
    )
    assert pipe_table(["only"], []) == "| only |\n|---|"
