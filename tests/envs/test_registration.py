"""The id table: one lookup, with and without the ``aem_envs:`` prefix, strict or optional."""

from __future__ import annotations

import pytest

from aem_envs.core.errors import AEMError
from aem_envs.registration import ENTRIES, entry, entry_by_id, resolve_env_id


@pytest.mark.parametrize("item", ENTRIES, ids=[e.id for e in ENTRIES])
def test_every_id_is_found_by_both_lookups_and_resolves_to_the_prefixed_id(item) -> None:
    assert entry(item.id) is item
    assert entry(f"aem_envs:{item.id}") is item
    assert entry_by_id(item.id) is item
    assert resolve_env_id(item.id) == f"aem_envs:{item.id}"


def test_an_unknown_id_is_none_for_entry_and_a_clear_error_for_entry_by_id() -> None:
    assert entry("aem/Nope-v0") is None
    with pytest.raises(AEMError, match=r"'aem/Nope-v0' is not an aem id; aem ids: .*ALFWorld"):
        entry_by_id("aem/Nope-v0")
    with pytest.raises(AEMError, match="unknown environment id 'aem/Nope-v0'"):
        resolve_env_id("aem/Nope-v0")
