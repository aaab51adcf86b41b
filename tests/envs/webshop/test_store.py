"""The on-disk catalog store: same catalog and episodes as the in-memory loader, shared
between envs, never stale, and rebuilt when damaged."""

from __future__ import annotations

import gzip
import json
import pickle
import random
from pathlib import Path
from typing import Any

import pytest

from aem_envs.webshop import search, store
from aem_envs.webshop.catalog import Catalog, KeyedRecords
from aem_envs.webshop.env import SEARCH_TEMPLATE, WebShopEnv
from aem_envs.webshop.generate.build import write_catalog
from aem_envs.webshop.tasks import bundled_catalog, load_original

#: Enough goals for every split (train starts after 1,500).
PRODUCTS, GOALS, SEED = 2_000, 1_600, 3


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch) -> Path:
    """A fresh cache and fresh process memos for every test."""
    root = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("AEM_CACHE_DIR", str(root))
    monkeypatch.setattr(store, "_CATALOGS", {})
    monkeypatch.setattr(store, "_FOLDERS", {})
    monkeypatch.setattr(search, "_ENGINES", {})
    return root


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("generated")
    write_catalog(PRODUCTS, GOALS, SEED, folder, compress=False)
    return folder


@pytest.fixture(scope="module")
def in_memory(generated: Path) -> Catalog:
    return load_original(generated)


def _store_of(catalog: Catalog) -> Path:
    return store.store_dir(catalog.content_hash)


def _assert_same_catalog(stored: Catalog, loaded: Catalog) -> None:
    assert stored.content_hash == loaded.content_hash
    assert list(stored.products) == list(loaded.products)
    assert list(stored.goals) == list(loaded.goals)
    assert {k: list(v) for k, v in stored.splits.items()} == {
        k: list(v) for k, v in loaded.splits.items()
    }
    for product in loaded.products[:: len(loaded.products) // 50]:
        assert stored.by_asin[product.asin] == product


def test_the_store_holds_the_in_memory_catalog(generated: Path, in_memory: Catalog) -> None:
    stored = store.open_catalog(generated)
    _assert_same_catalog(stored, in_memory)
    assert "B0NOTHERE0" not in stored.by_asin and "0" in stored.goals_by_id
    assert "01" not in stored.goals_by_id and str(GOALS) not in stored.goals_by_id
    assert store.open_catalog(generated) is stored  # one per process
    assert isinstance(stored.products, KeyedRecords)  # lazily materialised


def _play(env: WebShopEnv, seed: int) -> list[Any]:
    """A seeded episode: the expert on even seeds, random admissible actions on odd ones."""
    trace: list[Any] = []
    obs, info = env.reset(seed=seed)
    trace.append((obs, info))
    choose = random.Random(seed)
    for _ in range(env.max_steps):
        if seed % 2 == 0:
            action = env.expert_action()
        else:
            query = f"search[{info['instruction']}]"
            action = choose.choice(info["admissible_actions"]).replace(SEARCH_TEMPLATE, query)
        obs, reward, terminated, truncated, info = env.step(action)
        trace.append((action, obs, reward, terminated, truncated, info))
        if terminated or truncated:
            break
    return trace


def test_two_envs_on_the_store_play_the_in_memory_episodes(
    generated: Path, in_memory: Catalog
) -> None:
    reference = WebShopEnv(catalog=in_memory)
    first, second = WebShopEnv(data_dir=generated), WebShopEnv(data_dir=generated)
    rewards = []
    for seed in range(8):
        expected = _play(reference, seed)
        assert _play(first, seed) == expected
        assert _play(second, seed) == expected
        rewards.append(expected[-1][2])
    assert first.catalog is second.catalog  # one store, shared
    assert max(rewards) > 0  # the expert's purchases were graded


def test_the_bundled_catalog_plays_the_same_from_its_store() -> None:
    reference = WebShopEnv(catalog=bundled_catalog())
    stored = WebShopEnv()
    assert isinstance(stored.catalog.products, KeyedRecords)
    for seed in range(4):
        assert _play(stored, seed) == _play(reference, seed)


def test_a_pickled_stored_catalog_reopens_the_store(generated: Path) -> None:
    stored = store.open_catalog(generated)
    payload = pickle.dumps(stored)
    assert len(payload) < 4096  # the path, not the products
    clone = pickle.loads(payload)
    assert clone.products[7] == stored.products[7]
    assert clone.goals_by_id["5"] == stored.goals_by_id["5"]


def test_changed_source_files_make_a_new_store(tmp_path: Path, cache: Path) -> None:
    write_catalog(300, 40, 5, tmp_path, compress=True)
    before = store.open_catalog(tmp_path, human_goals=False)
    human = tmp_path / "items_ins_v2.json.gz"
    content = json.loads(gzip.decompress(human.read_bytes()))
    first = next(iter(content))
    content[first]["instruction"] = "i want the one product nobody else sells"
    human.write_bytes(gzip.compress(json.dumps(content).encode()))
    store._CATALOGS.clear()
    after = store.open_catalog(tmp_path, human_goals=False)
    assert after.content_hash != before.content_hash
    assert any(g.instruction.startswith("i want the one product") for g in after.goals)
    assert not any(g.instruction.startswith("i want the one product") for g in before.goals)
    assert after.content_hash == load_original(tmp_path, human_goals=False).content_hash


def test_unchanged_files_are_not_hashed_again(generated: Path, monkeypatch) -> None:
    first = store.open_catalog(generated)
    store._CATALOGS.clear()
    monkeypatch.setattr(store.OriginalFiles, "digest", lambda self: pytest.fail("hashed"))
    assert store.open_catalog(generated).content_hash == first.content_hash


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-7])


def _scramble(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("damage", "file", "says"),
    [
        (_truncate, "products", "products has"),
        (_scramble, "asin_keys", "asin_keys does not match its checksum"),
        (_scramble, "product_starts", "product_starts does not match its checksum"),
        (Path.unlink, "goals", "goals is missing"),
        (lambda p: p.write_text("{"), "manifest.json", "unreadable manifest.json"),
    ],
)
def test_a_damaged_store_is_rebuilt_saying_so(
    generated: Path, in_memory: Catalog, damage, file: str, says: str
) -> None:
    store.open_catalog(generated)
    damage(_store_of(in_memory) / file)
    store._CATALOGS.clear()
    with pytest.warns(UserWarning) as warned:
        rebuilt = store.open_catalog(generated)
    messages = [str(w.message) for w in warned]
    assert len(messages) == 1 and "catalog store" in messages[0] and says in messages[0]
    assert "rebuilding" in messages[0]
    _assert_same_catalog(rebuilt, in_memory)


def test_a_half_written_store_is_never_opened(generated, in_memory, monkeypatch) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(store, "store_index", interrupted)
        with pytest.raises(KeyboardInterrupt):
            store.open_catalog(generated)
    target = _store_of(in_memory)
    assert not target.exists()
    assert not [p for p in target.parent.iterdir() if ".staging-" in p.name]
    killed = target.parent / f".{target.name}.staging-killed"  # a build killed outright
    (killed / "products").parent.mkdir()
    (killed / "products").write_bytes(b"half")
    _assert_same_catalog(store.open_catalog(generated), in_memory)
    assert not killed.exists()


def test_an_unwritable_cache_loads_into_memory(generated, in_memory, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("AEM_CACHE_DIR", str(blocker))
    with pytest.warns(UserWarning, match="AEM_CACHE_DIR"):
        catalog = store.open_catalog(generated)
    assert not isinstance(catalog.products, KeyedRecords)
    assert catalog.products == in_memory.products


def test_a_record_damaged_in_use_names_the_store(generated: Path, in_memory: Catalog) -> None:
    stored = store.open_catalog(generated)
    products = _store_of(in_memory) / "products"
    with products.open("r+b") as handle:  # the mapped pages see the edit
        handle.seek(0)
        handle.write(b"]]]]")
    with pytest.raises(store.DamagedStoreError, match="delete that folder"):
        stored.products[0]


@pytest.mark.slow
def test_a_100k_catalog_plays_the_same_from_its_store(tmp_path: Path) -> None:
    """At the scale where the store starts to matter, the same seeded episodes and rewards."""
    write_catalog(100_000, GOALS, SEED, tmp_path, compress=False)
    reference = WebShopEnv(catalog=load_original(tmp_path))
    stored = WebShopEnv(data_dir=tmp_path)
    assert isinstance(stored.catalog.products, KeyedRecords)
    rewards = []
    for seed in range(4):
        expected = _play(reference, seed)
        assert _play(stored, seed) == expected
        rewards.append(expected[-1][2])
    assert max(rewards) > 0
