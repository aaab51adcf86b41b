"""aem/WebShop-v0: page flow, observation modes, invalid actions, scoring, data arguments."""

from __future__ import annotations

import importlib.util

import gymnasium as gym
import pytest

from aem_envs.core.errors import AEMError, MissingDependencyError
from aem_envs.webshop import search
from aem_envs.webshop.catalog import Catalog
from aem_envs.webshop.env import SEARCH_TEMPLATE, WebShopEnv, parse_action
from aem_envs.webshop.generate.build import generate_catalog, write_catalog

#: The fixture catalog's 30 goals all fall in ``test`` (the first 500 goals, as in WebShop).
TEST_SPLIT = {"split": "test"}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return generate_catalog(300, 30, 11)


def _env(catalog: Catalog, **kwargs) -> WebShopEnv:
    return WebShopEnv(catalog=catalog, **kwargs)


def _broad_query(catalog: Catalog) -> str:
    return " ".join(sorted({p.query for p in catalog.products}))


def test_gym_make_uses_the_bundled_catalog() -> None:
    env = gym.make("aem_envs:aem/WebShop-v0")
    try:
        obs, info = env.reset(seed=0)
        base = env.unwrapped
        assert base.catalog.source == "bundled"
        assert info["task_id"] in base.task_ids("train")  # the default split
        assert info["task_type"] == base.catalog.goals_by_id[info["task_id"]].category
        assert obs.startswith("WebShop [SEP] Instruction:") and info["instruction"] in obs
        assert info["admissible_actions"] == [SEARCH_TEMPLATE]
    finally:
        env.close()


def test_page_flow(catalog: Catalog) -> None:
    env = _env(catalog, observation_mode="text_rich")
    env.reset(seed=0, options=TEST_SPLIT)
    obs, _, _, _, info = env.step(f"search[{_broad_query(catalog)}]")
    assert "Page 1 (Total results: 50)" in obs
    assert "click[next >]" in info["admissible_actions"]
    assert SEARCH_TEMPLATE not in info["admissible_actions"]
    obs, *_ = env.step("click[Next >]")  # labels are matched lower-cased
    assert "Page 2 (Total results: 50)" in obs
    obs, *_ = env.step("click[< prev]")
    assert "Page 1 (Total results: 50)" in obs
    product = next(c.label for c in env.client.view.clickables.values() if c.kind == "product")
    obs, *_ = env.step(f"click[{product}]")
    assert "[button] Buy Now [button_]" in obs
    item = env.catalog.by_asin[product.upper()]
    option = next(iter(item.options.values()))[0]
    obs, *_ = env.step(f"click[{option}]")
    assert f"[clicked button] {option} [clicked button_]" in obs
    obs, *_ = env.step("click[description]")
    assert item.description in obs
    obs, *_ = env.step("click[< prev]")  # sub-page → item, option kept
    assert f"[clicked button] {option} [clicked button_]" in obs
    obs, *_ = env.step("click[< prev]")  # item → results, product marked visited
    assert f"[clicked button] {product.upper()} [clicked button_]" in obs
    obs, _, terminated, _, info = env.step("click[back to search]")
    assert not terminated and info["admissible_actions"] == [SEARCH_TEMPLATE]


def test_observation_modes_show_the_same_page(catalog: Catalog) -> None:
    observations = {}
    for mode in ("text", "text_rich", "html", "url"):
        env = _env(catalog, observation_mode=mode)
        env.reset(seed=2, options=TEST_SPLIT)
        observations[mode], *_ = env.step("search[shampoo]")
    assert " [SEP] Back to Search [SEP] Page 1 " in observations["text"]
    assert "[button] Back to Search [button_]" in observations["text_rich"]
    assert observations["html"].startswith("<!DOCTYPE html>")
    assert observations["url"].startswith("http://127.0.0.1:3000/search_results/fixed_")
    assert observations["url"].endswith("/shampoo/1")
    with pytest.raises(AEMError, match="observation_mode"):
        _env(catalog, observation_mode="pixels")


@pytest.mark.parametrize(
    ("action", "reason"),
    [
        ("buy it", "neither search"),
        ("click[nothing here]", "not clickable on this page"),
        ("click[search]", "not clickable"),
        ("search[   ]", "empty"),
        ("jump[x]", "neither search"),
    ],
)
def test_invalid_actions_change_nothing(catalog: Catalog, action: str, reason: str) -> None:
    env = _env(catalog)
    first, _ = env.reset(seed=4, options=TEST_SPLIT)
    obs, reward, terminated, _, info = env.step(action)
    assert obs.startswith("Invalid action:") and reason in obs and obs.endswith(first)
    assert info["action_valid"] is False and reward < 0 and not terminated


def test_search_needs_a_search_bar(catalog: Catalog) -> None:
    env = _env(catalog)
    env.reset(seed=4, options=TEST_SPLIT)
    results, *_ = env.step("search[shampoo]")
    obs, *_, info = env.step("search[soap]")
    assert "no search bar" in obs and obs.endswith(results) and not info["action_valid"]


def test_buying_ends_with_the_webshop_reward(catalog: Catalog) -> None:
    env = _env(catalog)
    env.reset(seed=0, options=TEST_SPLIT)
    goal = env.catalog.goals_by_id[env.task.task_id]
    wrong = next(p for p in catalog.products if p.category != goal.category)
    env.step(f"search[{wrong.name}]")
    env.step(f"click[{wrong.asin.lower()}]")
    obs, reward, terminated, _, info = env.step("click[buy now]")
    assert terminated and 0 <= info["score"] < 1 and not info["won"]
    assert info["asin"] == wrong.asin and info["reward_breakdown"]["total"] == info["score"]
    assert f"Your score (min 0.0, max 1.0) [SEP] {info['score']}" in obs
    assert reward == 0.0 and info["admissible_actions"] is None


def test_expert_episode_is_won_with_reward_one(catalog: Catalog) -> None:
    env = _env(catalog)
    env.reset(seed=1, options=TEST_SPLIT)
    for _ in range(env.max_steps):
        _, reward, terminated, truncated, info = env.step(env.expert_action())
        if terminated or truncated:
            break
    assert terminated and info["won"] and info["score"] == 1.0 and reward > 0


class _NoSharedNouns:
    """A noun tagger under which no two names share a noun: every title score is 0."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def nouns(self, text: str) -> list[str]:
        self.calls.append(text)
        return [f"noun-{len(self.calls)}"]


def test_noun_tagger_argument_reaches_the_reward(catalog: Catalog) -> None:
    tagger = _NoSharedNouns()
    env = _env(catalog, noun_tagger=tagger)
    env.reset(seed=1, options=TEST_SPLIT)
    for _ in range(env.max_steps):
        _, _, terminated, _, info = env.step(env.expert_action())
        if terminated:
            break
    # The expert buys the right product (score 1 with the default tagger, above); with
    # this tagger its title score is 0, so r_type and the whole reward are 0.
    assert env.task.task_id and env.catalog.goals_by_id[env.task.task_id].name in tagger.calls
    assert info["reward_breakdown"]["title_score"] == 0.0 and info["score"] == 0.0


def test_noun_tagger_names_are_checked_when_the_env_is_made() -> None:
    with pytest.raises(AEMError, match=r"unknown noun tagger 'nltk'.*'lexicon'"):
        WebShopEnv(noun_tagger="nltk")
    with pytest.raises(AEMError, match="neither a name"):
        WebShopEnv(noun_tagger=3)
    if importlib.util.find_spec("spacy") is None:
        with pytest.raises(MissingDependencyError, match=r"pip install 'aem\[spacy\]'"):
            WebShopEnv(noun_tagger="spacy")


def test_parse_action() -> None:
    assert parse_action(" click[ Buy Now ] ") == ("click", " Buy Now ")
    assert parse_action("Search[a [b] c]") == ("search", "a [b] c")
    assert parse_action("click buy now") is None


def test_data_dir_loads_the_original_file_format(tmp_path) -> None:
    write_catalog(120, 12, 4, tmp_path, compress=False)
    env = WebShopEnv(data_dir=tmp_path)
    assert env.catalog.source.startswith("original:")
    obs, info = env.reset(seed=0, options={"split": "test"})
    assert info["instruction"] in obs
    with pytest.raises(AEMError, match="data_dir"):
        WebShopEnv(data_dir=tmp_path / "missing")
    with pytest.raises(AEMError, match="not both"):
        WebShopEnv(data_dir=tmp_path, catalog=env.catalog)


def test_task_set_summary_counts_goals_without_building_an_index(monkeypatch) -> None:
    monkeypatch.setattr(search, "engine_for", lambda catalog: pytest.fail("index built"))
    summary = WebShopEnv.task_set_summary()
    assert list(summary) == ["test", "eval", "train"]
    assert sum(summary["test"].values()) == 500 and sum(summary["eval"].values()) == 1000
    assert set(summary["test"]) <= {"beauty", "food", "fashion", "furniture", "electronics"}


def test_constructing_is_cheap_and_lazy(catalog: Catalog) -> None:
    env = WebShopEnv()
    assert env._catalog is None and env._site is None
