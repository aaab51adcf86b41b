"""TextSpace: membership, seeded sampling and the shared-memory transport."""

from __future__ import annotations

import copy
import multiprocessing as mp

import pytest
from gymnasium.vector.utils import (
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from aem_envs.core.spaces import TextSpace


def test_contains_any_unicode_up_to_max_length() -> None:
    space = TextSpace(5)
    assert space.contains("héllo")
    assert space.contains("🙂\x00\n\t")
    assert space.contains("")
    assert not space.contains("toolong")
    assert not space.contains(b"bytes")
    assert not space.contains(None)


def test_sample_is_seeded_readable_and_in_space() -> None:
    a, b = TextSpace(40, seed=3), TextSpace(40, seed=3)
    samples = [a.sample() for _ in range(20)]
    assert samples == [b.sample() for _ in range(20)]
    assert all(a.contains(s) and s.strip() for s in samples)
    assert a.sample(mask=["go east", "look"]) in {"go east", "look"}
    with pytest.raises(ValueError, match="mask"):
        a.sample(mask=[])


def test_min_length_is_respected_and_validated() -> None:
    space = TextSpace(10, min_length=8, seed=0)
    assert all(len(space.sample()) >= 8 for _ in range(10))
    with pytest.raises(ValueError):
        TextSpace(3, min_length=4)


@settings(max_examples=40, deadline=None)
@given(texts=st.lists(st.text(max_size=30), min_size=3, max_size=3))
def test_shared_memory_round_trip_keeps_every_character(texts: list[str]) -> None:
    space = TextSpace(30)
    memory = create_shared_memory(space, n=3, ctx=mp)
    view = read_from_shared_memory(space, memory, n=3)
    for index, text in enumerate(texts):
        write_to_shared_memory(space, index, text, memory)
    # The view aliases the buffer (as NumPy views do for Box spaces) ...
    assert tuple(view) == tuple(texts)
    snapshot = copy.deepcopy(view)
    write_to_shared_memory(space, 0, "changed", memory)
    assert view[0] == "changed"
    # ... and deepcopy, what AsyncVectorEnv returns, is a stable tuple.
    assert snapshot == tuple(texts)


def test_shared_memory_rejects_text_longer_than_the_space() -> None:
    space = TextSpace(4)
    memory = create_shared_memory(space, n=1, ctx=mp)
    with pytest.raises(ValueError, match="exceeds"):
        write_to_shared_memory(space, 0, "12345", memory)
