"""Fixtures for the ALFWorld tests: the engine rule and a hand-written ALFRED problem.

Tests that need the upstream engine (alfworld + textworld + fast-downward) skip on a
developer machine without it, but fail in CI (``CI`` set), where the engine is installed.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.conftest import _need

KITCHEN = Path(__file__).with_name("kitchen.pddl")


def _engine_available() -> str | None:
    for module in ("alfworld", "textworld", "fast_downward"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install 'aem[alfworld]')"
    return None


@pytest.fixture(scope="session")
def alfworld_engine() -> None:
    """Use in tests that run the upstream ALFWorld engine."""
    _need(_engine_available())


@pytest.fixture(scope="session")
def kitchen_problem() -> str:
    """A small ALFRED-form problem: two cabinets sharing a location, two mugs, an apple."""
    return KITCHEN.read_text()
