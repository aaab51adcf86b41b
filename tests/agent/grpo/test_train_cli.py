"""``aem train`` end to end on the tiny model: outputs, CLI precedence, checkpoint → resume."""

from __future__ import annotations

import csv
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from aem_agent.grpo.config import ConfigError
from aem_agent.grpo.run import CONFIGS_DIR, build_config
from aem_agent.policies import load_policy
from aem_agent.prompts import read_prompt_layout
from aem_cli.main import build_parser, main
from aem_cli.train import run_of
from aem_envs.core.yaml_file import read_settings

CONFIGS = Path(__file__).parents[3] / "aem_agent" / "configs"


def load_settings(name: str) -> dict:
    return read_settings(name, bundled=CONFIGS_DIR, what="training config")


def write_settings(tmp_path: Path, env_id: str, model: Path) -> Path:
    settings = {
        "env_ids": [env_id],
        "model": str(model),
        "per_device_train_batch_size": 4,
        "num_generations": 2,
        "max_completion_length": 64,
        "max_turns": 2,
        "max_turn_tokens": 8,
        "num_tasks": 4,
        "env_workers": 1,
        "save_steps": 1,
        "learning_rate": 1e-3,
        "torch_threads": 1,
        "top_k": 0,
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def read_metrics(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_cli_trains_writes_outputs_and_resumes(tiny_model_dir, tmp_path, doors_env_id) -> None:
    config = write_settings(tmp_path, doors_env_id, tiny_model_dir)
    out = tmp_path / "run"
    common = ["train", "--config", str(config), "--output-dir", str(out), "--seed", "5"]
    assert main([*common, "--steps", "2", "--lam", "1.5"]) == 0
    assert (out / "checkpoint-2" / "trainer_state.json").is_file()
    assert (out / "final" / "config.json").is_file()  # a plain checkpoint: the LoRA merged in
    assert (out / "final" / "adapter" / "adapter_config.json").is_file()  # CPU default: LoRA
    assert read_prompt_layout(out / "final")["history_window"] == 2
    assert (out / "training.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert list((out / "tensorboard").rglob("events.out.tfevents.*"))
    rows = read_metrics(out / "metrics.csv")
    steps = [int(r["step"]) for r in rows]
    assert steps == [1, 2]
    assert all(r["episode/success_rate"] != "" and r["aem/alpha_min"] != "" for r in rows)

    # a session killed mid-save leaves a checkpoint without trainer_state.json: not resumed from
    (out / "checkpoint-3").mkdir()
    shutil.copy(out / "checkpoint-2" / "training_args.bin", out / "checkpoint-3")
    assert main([*common, "--steps", "3", "--lam", "1.5", "--resume"]) == 0
    rows = read_metrics(out / "metrics.csv")
    assert [int(r["step"]) for r in rows] == [1, 2, 3]
    assert (out / "checkpoint-3" / "trainer_state.json").is_file()
    policy = load_policy(f"hf:{out / 'final'}", temperature=0.0)
    assert policy.history_window == 2 and policy.max_new_tokens == 8  # as trained


def test_fresh_run_refuses_an_earlier_run_unless_overwrite(
    tiny_model_dir, tmp_path, capsys, doors_env_id
) -> None:
    config = write_settings(tmp_path, doors_env_id, tiny_model_dir)
    out = tmp_path / "run"
    (out / "tensorboard").mkdir(parents=True)
    (out / "metrics.csv").write_text("step,loss\n1,0.5\n")
    (out / "notes.txt").write_text("mine")
    common = ["train", "--config", str(config), "--output-dir", str(out), "--steps", "1"]
    assert main(common) == 2
    err = capsys.readouterr().err
    assert "earlier run" in err and "--overwrite" in err and "--resume" in err
    assert (out / "metrics.csv").read_text() == "step,loss\n1,0.5\n"  # nothing lost
    assert main([*common, "--overwrite"]) == 0
    assert [int(r["step"]) for r in read_metrics(out / "metrics.csv")] == [1]
    assert (out / "notes.txt").read_text() == "mine"  # not a run output: kept


def test_resume_without_checkpoint_is_one_clear_error(tmp_path, capsys, doors_env_id) -> None:
    code = main(["train", doors_env_id, "--output-dir", str(tmp_path), "--resume"])
    assert code == 2
    assert "no whole checkpoint" in capsys.readouterr().err


def test_command_line_overrides_yaml(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            {"aem_lambda": 0.5, "max_steps": 9, "env_ids": ["a/B-v0"], "output_dir": "o"}
        )
    )
    args = build_parser().parse_args(
        ["train", "c/D-v0", "--config", str(path), "--lam", "2", "--group-size", "4"]
    )
    config = run_of(args).config
    assert config.aem_lambda == 2.0 and config.max_steps == 9
    assert config.env_ids == ["c/D-v0"] and config.num_generations == 4


@pytest.mark.parametrize("name", sorted(p.name for p in CONFIGS.glob("*.yaml")))
def test_bundled_configs_are_valid(name: str, tmp_path) -> None:
    settings = load_settings(name)
    settings.setdefault("output_dir", str(tmp_path))
    settings["use_cpu"], settings["bf16"] = True, False  # GPU configs checked on this CPU
    run = build_config(settings)
    assert run.config.max_turns >= 1 and run.model.model_name_or_path


def test_unknown_setting_names_the_key(tmp_path) -> None:
    with pytest.raises(ConfigError, match="aem_lamda"):
        build_config({"aem_lamda": 1.0, "output_dir": str(tmp_path)})


def test_rollout_gets_every_rollout_setting(
    tiny_model_dir, tmp_path, monkeypatch, doors_env_id
) -> None:
    """Settings such as ``reply_prefix`` must reach the rollout ``aem train`` builds."""
    from aem_agent.rollout import groups as rollout_module
    from aem_cli.train import train

    seen: dict = {}

    class Stop(Exception):
        pass

    def recording_init(self, tokenizer, **kwargs):
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr(rollout_module.MultiTurnRollout, "__init__", recording_init)
    settings = load_settings(str(write_settings(tmp_path, doors_env_id, tiny_model_dir)))
    settings.update(reply_prefix="<action>", output_dir=str(tmp_path / "out"), history_window=3)
    settings["env_ray_address"] = "ray://head:10001"
    with pytest.raises(Stop):
        train(build_config(settings))
    assert seen["reply_prefix"] == "<action>" and seen["history_window"] == 3
    assert seen["ray_address"] == "ray://head:10001"


@pytest.mark.parametrize(
    ("flags", "address"),
    [([], None), (["--ray"], "local"), (["--ray", "ray://head:10001"], "ray://head:10001")],
)
def test_ray_flag_sets_where_the_envs_run(flags: list[str], address: str | None) -> None:
    args = build_parser().parse_args(["train", "a/B-v0", "--output-dir", "o", *flags])
    assert run_of(args).config.env_ray_address == address


def test_ray_flag_without_ray_installed_is_one_line_naming_the_extra(
    tmp_path, capsys, monkeypatch, doors_env_id
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    code = main(["train", doors_env_id, "--output-dir", str(tmp_path / "o"), "--ray"])
    err = capsys.readouterr().err
    assert code == 2 and "pip install 'aem[scale]'" in err and err.count("\n") == 1


def test_credit_flag_trains_gigpo_with_aem_on_a_bundled_env(
    tiny_model_dir, tmp_path, capsys
) -> None:
    config = write_settings(tmp_path, "aem/ALFWorld-v0", tiny_model_dir)
    out = tmp_path / "run"
    args = ["train", "--config", str(config), "--output-dir", str(out), "--steps", "1"]
    assert main([*args, "--credit", "gigpo+aem"]) == 0
    [row] = read_metrics(out / "metrics.csv")
    assert row["gigpo/step_groups"] != "" and row["aem/alpha_min"] != ""
    printed = capsys.readouterr().out
    assert "step 1/1: " in printed  # the readable line, and not the raw dict after it
    assert "{'loss'" not in printed and "'grad_norm'" not in printed


def test_credit_flag_names_an_unknown_estimator(tmp_path, capsys) -> None:
    args = ["train", "aem/ALFWorld-v0", "--output-dir", str(tmp_path), "--credit", "gipgo"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "gipgo" in err and "gigpo+aem" in err
