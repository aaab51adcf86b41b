"""A text space for observations and actions that are arbitrary Unicode strings.

Gymnasium's own ``spaces.Text`` restricts strings to a fixed character set and, in
``AsyncVectorEnv`` with shared memory (the default of ``gym.make_vec``), silently turns any
character outside that set into a blank. Observations of text environments contain every
kind of character, so we use our own ``Space[str]`` and teach Gymnasium's vector utilities
to carry it through shared memory as length-prefixed UTF-8: the default async call is then
correct rather than corrupted.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterable, Sequence
from collections.abc import Sequence as SequenceABC
from typing import Any

import numpy as np
from gymnasium.spaces import Space
from gymnasium.vector.utils import shared_memory as _shm

#: Words used by :meth:`TextSpace.sample` when no vocabulary is given: short, printable,
#: and shaped like the commands text agents emit, so random agents exercise real parsing.
DEFAULT_VOCABULARY: tuple[str, ...] = (
    "look", "go", "to", "take", "put", "open", "close", "click", "search", "the", "a",
    "1", "2", "in", "on", "from", "with", "use", "inventory", "examine", "help", "[", "]",
)  # fmt: skip


class TextSpace(Space[str]):
    """Any Python ``str`` of at most ``max_length`` characters (any Unicode code point).

    ``sample()`` draws a few words from ``vocabulary`` with the space's seeded generator, so
    samples are readable and reproducible; a ``mask`` may be a sequence of strings to pick
    from (e.g. the admissible actions of the current step).
    """

    def __init__(
        self,
        max_length: int,
        *,
        min_length: int = 0,
        vocabulary: Sequence[str] = DEFAULT_VOCABULARY,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        if not 0 <= min_length <= max_length:
            raise ValueError(f"need 0 <= min_length <= max_length, got {min_length}, {max_length}")
        if not vocabulary:
            raise ValueError("vocabulary must hold at least one word")
        self.max_length = int(max_length)
        self.min_length = int(min_length)
        self.vocabulary = tuple(vocabulary)
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if probability is not None:
            raise ValueError("TextSpace.sample does not take a probability")
        if mask is not None:
            choices = list(mask)
            if not choices:
                raise ValueError("mask must be a non-empty sequence of strings")
            return str(choices[int(self.np_random.integers(len(choices)))])
        n_words = int(self.np_random.integers(1, 6))
        words = [
            self.vocabulary[int(i)]
            for i in self.np_random.integers(len(self.vocabulary), size=n_words)
        ]
        text = " ".join(words)[: self.max_length]
        return text.ljust(self.min_length, "_")

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TextSpace)
            and other.max_length == self.max_length
            and other.min_length == self.min_length
        )

    def __hash__(self) -> int:
        return hash((TextSpace, self.max_length, self.min_length))

    def to_jsonable(self, sample_n: Iterable[str]) -> list[str]:
        return list(sample_n)

    def from_jsonable(self, sample_n: Sequence[str]) -> list[str]:
        return list(sample_n)


# --- shared-memory transport for AsyncVectorEnv ------------------------------------------
# Each slot is 8 bytes of little-endian length followed by up to 4 * max_length bytes of
# UTF-8 (the worst case for any string of max_length code points).

_HEADER = 8


def _slot_size(space: TextSpace) -> int:
    return _HEADER + 4 * space.max_length


@_shm.create_shared_memory.register(TextSpace)
def _create_text_shared_memory(space: TextSpace, n: int = 1, ctx: Any = mp) -> Any:
    return ctx.Array(np.dtype(np.uint8).char, n * _slot_size(space))


class SharedTextView(SequenceABC[str]):
    """A live, read-only view of the strings in a shared-memory buffer.

    Why a view: ``AsyncVectorEnv`` reads shared memory once, at construction, and relies
    on the result aliasing the buffer (true of NumPy arrays). Decoding on access keeps that
    contract for strings; ``deepcopy`` (what the vector env returns by default) snapshots
    the current strings as a plain tuple.
    """

    def __init__(self, space: TextSpace, shared_memory: Any, n: int) -> None:
        self._rows = np.frombuffer(shared_memory.get_obj(), dtype=np.uint8).reshape(
            n, _slot_size(space)
        )

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index: int) -> str:  # type: ignore[override]
        row = self._rows[index]
        length = int(row[:_HEADER].view("<u8")[0])
        return bytes(row[_HEADER : _HEADER + length]).decode("utf-8")

    def __deepcopy__(self, memo: dict) -> tuple[str, ...]:
        return tuple(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SequenceABC) and tuple(self) == tuple(other)

    def __repr__(self) -> str:
        return f"SharedTextView({tuple(self)!r})"


@_shm.read_from_shared_memory.register(TextSpace)
def _read_text_shared_memory(space: TextSpace, shared_memory: Any, n: int = 1) -> SharedTextView:
    return SharedTextView(space, shared_memory, n)


@_shm.write_to_shared_memory.register(TextSpace)
def _write_text_shared_memory(space: TextSpace, index: int, value: str, shared_memory: Any) -> None:
    data = value.encode("utf-8")
    if len(value) > space.max_length:
        raise ValueError(f"observation of {len(value)} characters exceeds {space!r}")
    size = _slot_size(space)
    buffer = np.frombuffer(shared_memory.get_obj(), dtype=np.uint8)
    slot = buffer[index * size : (index + 1) * size]
    slot[:_HEADER] = np.frombuffer(np.array([len(data)], dtype="<u8").tobytes(), dtype=np.uint8)
    slot[_HEADER : _HEADER + len(data)] = np.frombuffer(data, dtype=np.uint8)
