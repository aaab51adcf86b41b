"""Parsing an ALFRED problem: unmodelled facts are unsupported, malformed text a data error."""

from __future__ import annotations

import pytest

from aem_envs.alfworld.state import UnsupportedGame, parse_problem
from aem_envs.core.errors import DataError


def test_unmodelled_facts_are_unsupported(kitchen_problem: str) -> None:
    odd = kitchen_problem.replace("(:init\n", "(:init\n(levitating agent1)\n")
    with pytest.raises(UnsupportedGame, match="levitating"):
        parse_problem(odd)


@pytest.mark.parametrize(
    "text, message",
    [("(define (problem x)", "unbalanced"), ("(foo)", "define"), ("(define (problem x))", "init")],
)
def test_malformed_problems_raise_data_errors(text: str, message: str) -> None:
    with pytest.raises(DataError, match=message):
        parse_problem(text)
