"""``aem/ALFWorld-v0`` on the bundled games (native engine) and on the real-data layout."""

from __future__ import annotations

import importlib
import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from aem_envs.alfworld.env import ALFWorldEnv
from aem_envs.alfworld.pddl import TASK_TYPES
from aem_envs.alfworld.tasks import SPLITS, bundled_games
from aem_envs.core.errors import (
    NO_DEPS_PACKAGES,
    AEMError,
    DataError,
    MissingDependencyError,
    NoExpertAction,
    install_command,
)
from tests.envs.alfworld.conftest import write_real_layout

EVAL_SPLITS = ("valid_seen", "valid_unseen")


def _expert_episode(env: ALFWorldEnv, split: str, task_id: str) -> dict:
    env.reset(options={"split": split, "task_id": task_id})
    done, info, actions = False, {}, []
    while not done:
        actions.append(env.expert_action())
        _, _, terminated, truncated, info = env.step(actions[-1])
        done = terminated or truncated
    return {**info, "actions": actions}


def test_make_in_a_fresh_interpreter() -> None:
    code = (
        "import gymnasium as gym\n"
        "env = gym.make('aem_envs:aem/ALFWorld-v0')\n"
        "obs, info = env.reset(seed=3)\n"
        "assert 'Your task is to: ' in obs and info['admissible_actions'], obs\n"
        "print(info['task_type'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() in TASK_TYPES


def test_bundled_set_sizes_and_summary() -> None:
    summary = ALFWorldEnv.task_set_summary()
    assert list(summary) == list(SPLITS)
    for split in SPLITS:
        games = bundled_games(split)
        counts = {t: sum(g.task_type == t for g in games.values()) for t in TASK_TYPES}
        assert summary[split] == counts
        assert min(counts.values()) >= (60 if split == "train" else 12)


def test_expert_wins_every_bundled_eval_game_with_its_stored_plan() -> None:
    env = ALFWorldEnv()
    for split in EVAL_SPLITS:
        for task_id in env.task_ids(split):
            info = _expert_episode(env, split, task_id)
            assert info["won"] and info["score"] == 1.0, (split, task_id)
            assert tuple(info["actions"]) == bundled_games(split)[task_id].plan


def test_expert_recovers_after_a_detour() -> None:
    env = ALFWorldEnv()
    _, info = env.reset(options={"split": "valid_seen", "task_id": "pick_two_obj_and_place/000"})
    rng = random.Random(1)
    for _ in range(8):
        _, _, _, _, info = env.step(rng.choice(info["admissible_actions"]))
    assert not info["won"]
    done = False
    while not done:
        _, _, terminated, truncated, info = env.step(env.expert_action())
        done = terminated or truncated
    assert info["won"]


def test_random_admissible_policy_wins_rarely() -> None:
    env = ALFWorldEnv()
    rng = random.Random(0)
    ids = env.task_ids("valid_unseen")
    wins = 0
    for task_id in ids:
        _, info = env.reset(options={"split": "valid_unseen", "task_id": task_id})
        done = False
        while not done:
            action = rng.choice(info["admissible_actions"])
            _, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        assert info["step"] <= 50
        wins += info["won"]
    assert wins / len(ids) < 0.25


def test_info_and_step_semantics() -> None:
    env = ALFWorldEnv()
    obs, info = env.reset(seed=7, options={"split": "valid_seen"})
    assert info["task_type"] in TASK_TYPES
    assert obs.endswith(f"Your task is to: {info['instruction']}.")
    assert "look" in info["admissible_actions"]
    obs, reward, terminated, truncated, info = env.step("fly to the moon")
    assert obs == "Nothing happens." and not info["action_valid"]
    assert not (terminated or truncated) and info["score"] == 0.0
    obs, *_ = env.step("inventory")
    assert obs == "You are not carrying anything."


def test_step_limit_is_fifty() -> None:
    env = ALFWorldEnv()
    env.reset(seed=0)
    results = [env.step("look") for _ in range(50)]
    assert not any(r[3] for r in results[:-1]) and results[-1][3]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"engine": "turbo"}, "engine='turbo'"),
        ({"source": "webshop"}, "source='webshop'"),
        ({"source": "bundled", "data_dir": "/tmp"}, "data_dir"),
    ],
)
def test_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(AEMError, match=message):
        ALFWorldEnv(**kwargs)


# ---------------------------------------------------------------------------------- real data
def test_real_source_needs_a_data_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    with pytest.raises(DataError, match=r"\$ALFWORLD_DATA"):
        ALFWorldEnv(source="alfworld")


def test_real_data_errors_name_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nowhere"
    monkeypatch.setenv("ALFWORLD_DATA", str(missing))
    with pytest.raises(DataError, match=re.escape(str(missing))):
        ALFWorldEnv(source="alfworld")
    with pytest.raises(DataError, match=r"json_2\.1\.1"):
        ALFWorldEnv(data_dir=tmp_path)
    (tmp_path / "json_2.1.1").mkdir()
    env = ALFWorldEnv(data_dir=tmp_path)
    with pytest.raises(DataError, match="valid_seen"):
        env.reset(options={"split": "valid_seen"})
    trial = tmp_path / "json_2.1.1" / "train" / "pick_and_place_simple-Mug-None-Desk-1" / "trial_1"
    trial.mkdir(parents=True)
    (trial / "traj_data.json").write_text("{not json")
    (trial / "game.tw-pddl").write_text("{}")
    with pytest.raises(DataError, match=r"traj_data\.json"):
        ALFWorldEnv(data_dir=tmp_path).reset(options={"split": "train"})


def test_real_layout_plays_on_the_native_engine(tmp_path: Path, alfworld_engine: None) -> None:
    ids = write_real_layout(tmp_path, "valid_seen", 6)
    env = ALFWorldEnv(data_dir=tmp_path)
    assert sorted(env.task_ids("valid_seen")) == sorted(ids)
    for task_id in ids:
        assert _expert_episode(env, "valid_seen", task_id)["won"], task_id


@pytest.mark.slow
def test_real_layout_with_the_handcoded_expert_upstream(
    tmp_path: Path, alfworld_engine: None
) -> None:
    ids = write_real_layout(tmp_path, "valid_unseen", 1)
    env = ALFWorldEnv(data_dir=tmp_path, engine="upstream")
    try:
        info = _expert_episode(env, "valid_unseen", ids[0])
    finally:
        env.close()
    assert info["won"]


def test_upstream_engine_leaves_sys_argv_alone(alfworld_engine: None, monkeypatch) -> None:
    """Fast Downward's translator rebinds ``sys.argv``; a caller's arguments must survive."""
    argv = ["prog", "--flag", "value"]
    monkeypatch.setattr(sys, "argv", argv)
    env = ALFWorldEnv(engine="upstream")
    try:
        env.reset(seed=0, options={"split": "valid_seen"})
        env.step("look")
    finally:
        env.close()
    assert sys.argv is argv and argv == ["prog", "--flag", "value"]


@pytest.mark.slow
def test_a_failing_handcoded_expert_never_breaks_a_step(
    tmp_path: Path, alfworld_engine: None
) -> None:
    """alfworld's expert raises inside itself on this game; the game must play on.

    A ``traj_data.json`` with a null ``parent_target`` makes the handcoded expert raise a
    ``TypeError`` on its first act. alfworld's own ``AlfredExpert`` wrapper would raise it
    from ``step``; here only ``expert_action()`` reports it, as ``NoExpertAction``.
    """
    (task_id,) = write_real_layout(tmp_path, "valid_seen", 1, params={"parent_target": None})
    plan = next(iter(bundled_games("valid_seen").values())).plan
    env = ALFWorldEnv(data_dir=tmp_path, engine="upstream")
    try:
        env.reset(options={"split": "valid_seen", "task_id": task_id})
        assert env.expert_action() == "look"  # before any step alfworld's expert only observes
        env.step("look")
        for _ in range(2):  # the failure stays for the episode
            with pytest.raises(NoExpertAction) as caught:
                env.expert_action()
            message = str(caught.value)
            assert "\n" not in message and message.startswith("no expert action available")
            assert "TypeError" in message
        for action in plan:
            result = env.step(action)
        assert result[4]["won"] and result[2]
    finally:
        env.close()


def test_upstream_readiness_follows_what_imports() -> None:
    """`aem envs` says the upstream engine is ready exactly when its modules import."""
    from aem_envs.registration import entry_by_id

    (feature,) = entry_by_id("aem/ALFWorld-v0").features
    imports = True
    for module in feature.modules:
        try:
            importlib.import_module(module)
        except Exception:
            imports = False
    assert (not feature.problems()) == imports


_BLOCK_ALFWORLD = (
    "import sys\n"
    "sys.modules['alfworld'] = None  # as in a venv without alfworld\n"
    "from aem_cli.main import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def test_without_alfworld_the_upstream_engine_is_not_ready_and_says_how_to_fix_it() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _BLOCK_ALFWORLD, "envs", "aem/ALFWorld-v0", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    (row,) = json.loads(result.stdout)
    assert row["python_ready"]  # the native engine needs nothing
    (feature,) = row["features"]
    assert not feature["ready"] and "alfworld" in feature["problems"][0]
    assert feature["install"] == install_command("alfworld")
    assert "pip install --no-deps alfworld==" in feature["install"]


def test_without_alfworld_engine_upstream_fails_at_once_with_the_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "alfworld", None)
    for name in [m for m in sys.modules if m.startswith("alfworld.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(MissingDependencyError) as caught:
        ALFWorldEnv(engine="upstream")
    message = str(caught.value)
    assert "\n" not in message and message.count(install_command("alfworld")) == 1
    assert "engine='native'" in message


def test_the_install_script_installs_the_pins_the_message_names() -> None:
    script = (Path(__file__).parents[3] / "scripts" / "install.sh").read_text()
    assert "pip install -q --no-deps " + " ".join(NO_DEPS_PACKAGES["alfworld"]) in script
