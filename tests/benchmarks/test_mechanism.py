"""The mechanism experiment's instruments: the Fetch task, the task check, exact held-out
scoring, the arms of a grid, paired differences and a start that rebuilds bit for bit."""

from __future__ import annotations

import json
import os
import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
pytest.importorskip("trl")

from benchmarks.learning import config as lc
from benchmarks.learning import fetch
from benchmarks.learning.collect import mean_interval, paired_differences
from benchmarks.learning.experiment import run_settings


def fetch_experiment(**overrides) -> lc.LearningConfig:
    """A tiny Fetch experiment: a 32-wide model warmed up on half-expert replies."""
    data = {
        "name": "fetch",
        "baseline": "grpo",
        "seeds": [0, 1],
        "arms": {
            "grpo": {"algo": "grpo", "seeds": [0, 1, 2]},
            "aem-reversed": {"train": {"aem_lambda": -1.0}},
        },
        "env": {"id": fetch.ENV_ID, "train_split": "train", "eval_split": "test"},
        "eval": {"every": 2, "tasks": 3, "temperature": 1.0, "seed": 0, "method": "exact"},
        "model": {"tiny": {"hidden_size": 32, "num_layers": 2, "vocab_size": 400}},
        "warmup": {
            "steps": 250,
            "batch_size": 32,
            "learning_rate": 0.01,
            "episodes": 96,
            "expert_share": 0.5,
        },
        "train": {
            "torch_threads": 1,
            "rollout_layout": "step",
            "prompt_style": "compact",
            "max_turns": 4,
            "max_turn_tokens": 3,
            "history_window": 0,
            "reply_prefix": "<action>",
            "num_tasks": 64,
            "max_steps": 2,
            "per_device_train_batch_size": 16,
            "num_generations": 8,
            "max_completion_length": 16,
            "top_k": 0,
            "env_workers": 1,
        },
    }
    data.update(overrides)
    return lc.parse_config(data)


@pytest.fixture(scope="module")
def fetch_start(tmp_path_factory) -> tuple[lc.LearningConfig, object]:
    from benchmarks.learning.start import build_start

    config = fetch_experiment()
    start_dir = tmp_path_factory.mktemp("fetch") / lc.START_DIR
    build_start(config, start_dir, log=lambda _: None)
    return config, start_dir


# ---------------------------------------------------------------------------- the task
def test_fetch_env_passes_check_env_and_splits_are_disjoint() -> None:
    fetch.register()
    env = gym.make(fetch.ENV_ID).unwrapped
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env, skip_render_check=False)
    train, test = set(env.task_ids("train")), set(env.task_ids("test"))
    assert len(test) == fetch.SPLIT_SIZES["test"] and train and not train & test


def test_fetch_credits_only_the_whole_task_and_an_unlisted_reply_ends_it() -> None:
    fetch.register()
    env = gym.make(fetch.ENV_ID).unwrapped
    _, info = env.reset(seed=5, options={"split": "test"})
    wanted = list(env._wanted)
    spare = next(a for a in info["admissible_actions"] if a not in wanted)
    _, reward, done, _, info = env.step(spare)  # listed, not wanted: a wasted move
    assert (reward, done, info["action_valid"]) == (0.0, False, True) and env.winnable()
    for item in wanted[:-1]:
        _, reward, done, _, info = env.step(item)
        assert (reward, done) == (0.0, False) and item not in info["admissible_actions"]
    _, reward, done, _, info = env.step(wanted[-1])
    assert done and info["won"] and reward == 10.0
    env.reset(seed=5, options={"split": "test"})
    _, reward, done, _, info = env.step("cup purple")
    assert done and not info["won"] and reward == pytest.approx(-0.1)
    env.reset(seed=5, options={"split": "test"})
    env.step(spare)
    env.step(spare)  # two wasted moves: three wanted items no longer fit in the two left
    assert not env.winnable()


# ---------------------------------------------------------------------------- the task check
@pytest.mark.slow  # builds a tiny start (about 30 s on one core)
def test_the_task_check_finds_entropy_that_varies_with_the_response(fetch_start, tmp_path) -> None:
    """On a tiny start: inside a group, a reply's mean token entropy rises with its surprisal,
    also among first turns (one state per group), and most groups pass AEM's gate."""
    from benchmarks.learning.taskcheck import task_check

    config, start_dir = fetch_start
    # 32 groups: 6 left the estimate too noisy for a 0.3 bar (one start: 0.27 at 6, 0.35 at 32)
    check = task_check(config, start_dir, tmp_path, groups=32)
    assert check["units"] >= 32 * 8
    assert check["within_group_correlation"] > 0.3
    assert check["first_turn_correlation"] > 0.3
    assert check["hbar_range_median"] > check["gate"]
    assert check["gated_share"] < 0.5


# ---------------------------------------------------------------------------- exact scoring
@pytest.mark.slow  # builds a tiny start (about 30 s on one core)
def test_exact_success_is_what_sampled_play_converges_to(fetch_start) -> None:
    """The exact success of the held-out tasks against 300 sampled episodes of each."""
    import torch

    from aem_agent.grpo.run import build_config, build_trainer
    from aem_agent.rollout.samplers import model_generator
    from benchmarks.learning.exact import exact_success
    from benchmarks.learning.heldout import heldout_specs

    config, start_dir = fetch_start
    settings = run_settings(config, "grpo", 0, start_dir.parent / "x", save_strategy="no")
    trainer = build_trainer(build_config(settings).config, start_dir)
    rollout = trainer.rollout_func
    specs = heldout_specs(config)
    exact = exact_success(trainer.model, rollout, specs)
    generate = model_generator(
        trainer.model, trainer.processing_class, trainer.generation_config, max_new_tokens=3
    )
    torch.manual_seed(0)
    played = rollout.play([spec for spec in specs for _ in range(300)], generate)
    rollout.close()
    rate = sum(e.won for e in played) / len(played)
    p = exact["heldout/success_rate"]
    assert 0.0 < p < 1.0 and 0.0 < exact["heldout/offlist_mass"] < 1.0
    error = 4 * (p * (1 - p) / len(played)) ** 0.5 + 1e-3
    # Off-list replies lose in the exact sum; in play an unreadable one only costs a turn.
    assert p - error <= rate <= p + error + exact["heldout/offlist_mass"]
    assert len(exact["per_task"]) == len(specs)


@pytest.mark.slow  # builds a tiny start (about 30 s on one core)
def test_exact_scoring_refuses_an_env_it_cannot_enumerate(fetch_start) -> None:
    from aem_agent.grpo.run import build_config, build_trainer
    from aem_agent.rollout.records import EpisodeSpec
    from benchmarks.learning.env import ENV_ID as PICK
    from benchmarks.learning.env import register
    from benchmarks.learning.exact import exact_success

    register()
    config, start_dir = fetch_start
    settings = run_settings(config, "grpo", 0, start_dir.parent / "y", save_strategy="no")
    trainer = build_trainer(build_config(settings).config, start_dir)
    with pytest.raises(lc.ExperimentError, match="winnable"):
        exact_success(trainer.model, trainer.rollout_func, [EpisodeSpec(PICK, 0, "test")])
    trainer.rollout_func.close()


@pytest.mark.slow  # builds a tiny start (about 30 s on one core)
def test_a_start_rebuilds_bit_identical(fetch_start, tmp_path) -> None:
    from benchmarks.learning.start import build_start

    config, start_dir = fetch_start
    again = build_start(config, tmp_path / lc.START_DIR, log=lambda _: None)
    first = json.loads((start_dir / lc.START_MARKER).read_text())
    for info in (first, again):
        info.pop("seconds")
        info["heldout"].pop("heldout/seconds")
    assert again == first
    for name in ("model.safetensors", "tokenizer.json"):
        assert (tmp_path / lc.START_DIR / name).read_bytes() == (start_dir / name).read_bytes()


# ---------------------------------------------------------------------------- the start search
def test_start_search_overrides_set_nested_keys_and_name_a_bad_one() -> None:
    from benchmarks.learning.startsearch import with_overrides

    base = {"warmup": {"steps": 250}, "env": {"kwargs": {"n_wanted": 3}}}
    data = with_overrides(base, ["warmup.steps=300", "env.kwargs.n_wanted=2", "train.x=[1, 2]"])
    assert data == {
        "warmup": {"steps": 300},
        "env": {"kwargs": {"n_wanted": 2}},
        "train": {"x": [1, 2]},
    }
    assert base["warmup"]["steps"] == 250  # the config it started from is untouched
    with pytest.raises(lc.ExperimentError, match=r"section\.key=value"):
        with_overrides(base, ["warmup.steps"])
    with pytest.raises(lc.ExperimentError, match="not a section"):
        with_overrides(base, ["warmup.steps.x=1"])


@pytest.mark.slow  # builds a tiny start (about 30 s on one core)
def test_a_searched_start_is_the_grids_start_and_never_scores_heldout(fetch_start, tmp_path):
    """The candidate is built bit for bit as the grid builds its start, without a held-out
    score; its short run starts from exactly the training success the search measured."""
    from benchmarks.learning.start import build_start
    from benchmarks.learning.startsearch import short_run, train_success

    config, start_dir = fetch_start
    start = build_start(config, tmp_path / lc.START_DIR, log=lambda _: None, score_heldout=False)
    assert "heldout" not in start and "heldout_success" not in start
    for name in ("model.safetensors", "tokenizer.json"):
        assert (tmp_path / lc.START_DIR / name).read_bytes() == (start_dir / name).read_bytes()
    measured = train_success(config, start_dir, tmp_path / "a", tasks=3)
    assert 0.0 <= measured["train_sampled"] <= 1.0 and 0.0 <= measured["train_greedy"] <= 1.0
    run = short_run(config, start_dir, tmp_path / "b", steps=1, tasks=3)
    assert run["train_sampled_before"] == pytest.approx(measured["train_sampled"], abs=1e-9)
    assert len(run["curve_success"]) == 1 and run["algo"] == "grpo"


# ---------------------------------------------------------------------------- the grid
def test_arms_have_their_own_seeds_and_settings(tmp_path) -> None:
    config = fetch_experiment()
    assert config.algorithms == ("grpo", "aem-reversed") and config.seeds == (0, 1, 2)
    assert [n for *_, n in config.run_names()] == [
        "grpo-seed0",
        "aem-reversed-seed0",
        "grpo-seed1",
        "aem-reversed-seed1",
        "grpo-seed2",
    ]
    settings = run_settings(config, "aem-reversed", 1, tmp_path)
    assert (settings["algo"], settings["aem_lambda"], settings["seed"]) == ("aem", -1.0, 1)
    assert run_settings(config, "grpo", 2, tmp_path)["algo"] == "grpo"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"algorithms": ["grpo"]}, "either algorithms"),
        ({"baseline": "ppo"}, "baseline"),
        ({"arms": {"x": {"algo": "ppo"}}}, "algo"),
        ({"arms": {"x": {"lam": 1}}}, "unknown key"),
        ({"arms": {"x": {"estimator": "ppo"}}}, "estimator='ppo'"),
        ({"arms": {"x": {"train": {"seed": 1}}}}, "set by the harness"),
        ({"eval": {"tasks": 3, "method": "guess"}}, "eval.method"),
    ],
)
def test_bad_arms_name_the_problem(overrides: dict, message: str) -> None:
    with pytest.raises(lc.ExperimentError, match=message):
        fetch_experiment(**overrides)


def test_paired_differences_pair_seeds_and_give_a_t_interval() -> None:
    def run(arm: str, seed: int, final: float) -> dict:
        return {"algo": arm, "seed": seed, "status": "done", "final_heldout_success": final}

    runs = [run("grpo", s, 0.5) for s in range(3)] + [
        run("aem", 0, 0.6),
        run("aem", 1, 0.7),
        run("aem", 2, 0.8),
        run("aem", 3, 0.9),  # no baseline run for seed 3: not paired
    ]
    [row] = paired_differences(runs, "grpo", ["grpo", "aem"])
    assert row["seeds"] == [0, 1, 2] and row["mean"] == pytest.approx(0.2)
    half = 4.303 * 0.1 / 3**0.5  # t(0.975, 2 df) · s / √n
    assert (row["low"], row["high"]) == pytest.approx((0.2 - half, 0.2 + half))
    assert mean_interval([0.3])["low"] is None


def test_the_dose_response_takes_the_arms_that_differ_in_lambda_alone(tmp_path) -> None:
    from benchmarks.learning.plots import lambda_arms, plot_dose
    from benchmarks.learning.report import markdown_report

    config = fetch_experiment(
        arms={
            "grpo": {"algo": "grpo"},
            "aem-lam1": {"train": {"aem_lambda": 1.0}},
            "aem-reversed": {"train": {"aem_lambda": -1.0}},
            "aem-shuffled": {"train": {"aem_lambda": 1.0, "aem_shuffle": True}},
            "grpo-entropy": {"algo": "grpo", "train": {"entropy_coef": 0.01}},
        }
    )
    results = {"config": config.to_dict(), "runs": [], "paired": []}
    assert lambda_arms(results) == {"grpo": 0.0, "aem-lam1": 1.0, "aem-reversed": -1.0}
    assert plot_dose(results, tmp_path / "dose.png") is None  # no finished pair yet
    curve = {"aem/entropy_mean": [[1, 0.3], [2, 0.2]]}
    results["runs"] = [
        {"name": f"{a}-seed0", "algo": a, "seed": 0, "status": "done", "curves": curve}
        for a in ("grpo", "aem-lam1")
    ]
    results["paired"] = [
        {"arm": "aem-lam1", "baseline": "grpo", "n": 2, "mean": 0.1, "low": -0.05, "high": 0.25}
    ]
    path = plot_dose(results, tmp_path / "dose.png")
    assert path is not None and path.read_bytes().startswith(b"\x89PNG")
    assert "(plots/dose.png)" in markdown_report({**results, "experiment": "x", "summary": []})


def test_the_docs_start_choice_is_the_committed_search_and_the_grids_start() -> None:
    """docs/mechanism-fetch2.md's chosen row is the committed start search, and that search
    measured the very start the grid trained from (the same task check, number for number)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    results = root / "benchmarks/learning/results/mechanism-fetch2"
    search = json.loads((results / "start-search-w300.json").read_text())
    assert search["task_check"] == json.loads((results / "task-check.json").read_text())
    check = search["task_check"]
    row = next(
        line
        for line in (root / "docs/mechanism-fetch2.md").read_text().splitlines()
        if line.startswith("| **300 warm-up steps**")
    )
    cells = [cell.strip("* ") for cell in row.strip("|").split("|")]
    assert cells[1:] == [
        f"{100 * search['train_greedy']:.1f} %",
        f"{100 * search['train_sampled']:.1f} %",
        f"{check['within_group_correlation']:.2f}",
        f"{check['hbar_range_median']:.3f}",
        f"{100 * check['gated_share']:.0f} %",
    ]
