"""``aem train`` and ``aem sft`` settings: a YAML key (``--config``) and the flag of the same
name give the same config, and the flags are the dataclasses' own (TRL's ``TrlParser``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from aem_agent.grpo.run import CONFIGS_DIR, build_config
from aem_cli.main import build_parser, main
from aem_cli.sft import settings_of
from aem_cli.train import run_of
from aem_envs.core.yaml_file import read_settings


def as_flags(settings: dict[str, Any]) -> list[str]:
    """``settings`` written as the command line gives them."""
    argv = []
    for key, value in settings.items():
        if isinstance(value, list):
            argv += [f"--{key}", *map(str, value)]
        elif isinstance(value, dict):
            argv += [f"--{key}", json.dumps(value)]
        else:
            argv += [f"--{key}", str(value).lower() if isinstance(value, bool) else str(value)]
    return argv


def train_config(argv: list[str]) -> dict[str, Any]:
    run = run_of(build_parser().parse_args(["train", *argv]))
    return {**run.config.to_dict(), **asdict(run.model), **asdict(run.run), "tb": run.tensorboard}


def sft_config(argv: list[str]) -> dict[str, Any]:
    settings, model = settings_of(build_parser().parse_args(["sft", *argv]))
    return {**settings.to_dict(), **asdict(model)}


SMOKE = read_settings("cpu-smoke.yaml", bundled=CONFIGS_DIR, what="training config")
CASES: list[tuple[Callable[[list[str]], dict[str, Any]], dict[str, Any]]] = [
    (train_config, dict(SMOKE)),
    (
        train_config,
        {
            "env_ids": ["a/B-v0", "c/D-v0"],
            "env_kwargs": {"expert": "search"},
            "algo": "grpo",
            "credit": "gigpo",
            "learning_rate": 0.003,
            "max_steps": 7,
            "reply_prefix": "<action>",
            "use_peft": False,
            "lora_r": 8,
            "model_name_or_path": "aem-ref",
            "torch_threads": 2,
            "beta": 0.1,
        },
    ),
    (
        sft_config,
        {
            "env_ids": ["aem/ALFWorld-v0", "aem/WebShop-v0"],
            "env_kwargs": {"expert": "search"},
            "episodes": 7,
            "layout": "trajectory",
            "history_window": 1,
            "prompt_style": "compact",
            "reply_prefix": "<action>",
            "learning_rate": 0.001,
            "num_train_epochs": 2.0,
            "per_device_train_batch_size": 4,
            "use_peft": False,
            "lora_r": 8,
            "model_name_or_path": "aem-ref",
            "torch_threads": 1,
            "seed": 3,
        },
    ),
]


@pytest.mark.parametrize(
    ("parse", "settings"), CASES, ids=["train-cpu-smoke", "train-mixed", "sft-mixed"]
)
def test_a_flag_and_the_same_yaml_key_give_the_same_config(
    parse: Callable[[list[str]], dict[str, Any]], settings: dict[str, Any], tmp_path: Path
) -> None:
    settings = {**settings, "output_dir": str(tmp_path / "out")}
    path = tmp_path / "settings.yaml"
    path.write_text(yaml.safe_dump(settings))
    from_yaml = parse(["--config", str(path)])
    assert parse(as_flags(settings)) == from_yaml
    defaults = parse(["--output-dir", str(tmp_path / "out")])
    for key, value in settings.items():  # every value reached its field
        assert from_yaml[key] == value, key
    changed = [key for key in settings if defaults[key] != settings[key]]
    assert len(changed) >= len(settings) // 2  # most of them not a default


def test_the_library_reads_a_training_yaml_as_the_command_line_does(tmp_path: Path) -> None:
    """:func:`aem_agent.grpo.run.build_config` (the learning harness's path) and ``aem train``."""
    old_key = {k: v for k, v in SMOKE.items() if k != "model_name_or_path"}
    settings = {**old_key, "model": SMOKE["model_name_or_path"], "output_dir": str(tmp_path)}
    path = tmp_path / "settings.yaml"
    path.write_text(yaml.safe_dump(settings))
    library = build_config(settings)
    assert {**library.config.to_dict(), **asdict(library.model), **asdict(library.run)} == {
        k: v for k, v in train_config(["--config", str(path)]).items() if k != "tb"
    }
    assert library.model.model_name_or_path == SMOKE["model_name_or_path"]


@pytest.mark.parametrize(
    ("command", "flags"),
    [
        ("train", ["--aem_lambda", "--num_generations", "--lora_r", "--torch_threads", "--lam"]),
        ("sft", ["--episodes", "--num_train_epochs", "--lora_r", "--full", "--epochs"]),
    ],
)
def test_help_is_generated_from_the_dataclasses(command: str, flags: list[str], capsys) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    assert all(flag in text for flag in ["--config", *flags])
    assert "LoRA R value." in text  # TRL's ModelConfig's own help


def test_short_flags_keep_their_meaning() -> None:
    argv = ["a/B-v0", "--output-dir", "o", "--lr", "0.01", "--epochs", "2", "--full"]
    settings, model = settings_of(build_parser().parse_args(["sft", *argv, "--batch-size", "3"]))
    assert (settings.learning_rate, settings.num_train_epochs) == (0.01, 2.0)
    assert settings.per_device_train_batch_size == 3 and settings.env_ids == ["a/B-v0"]
    assert model.use_peft is False and model.model_name_or_path == "smollm2"
    lora = settings_of(build_parser().parse_args(["sft", *argv[:-1]]))[1]
    assert lora.use_peft and lora.lora_dropout == 0.05 and lora.lora_target_modules == "all-linear"
    short = ["--steps", "3", "--group-size", "4", "--lr", "0.01", "--lam", "2"]
    short += ["--model", "aem-ref", "--algo", "grpo"]
    run = run_of(build_parser().parse_args(["train", "a/B-v0", "--output-dir", "o", *short]))
    assert (run.config.max_steps, run.config.num_generations) == (3, 4)
    assert (run.config.learning_rate, run.config.aem_lambda) == (0.01, 2.0)
    assert run.model.model_name_or_path == "aem-ref" and not run.config.aem_enabled


def test_an_unknown_yaml_key_is_one_line_naming_it(tmp_path: Path, capsys) -> None:
    path = tmp_path / "settings.yaml"
    path.write_text(yaml.safe_dump({"aem_lamda": 1.0}))
    assert main(["train", "--config", str(path), "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "aem_lamda" in err
