"""The ``aem`` command's foundation sub-commands, run as a user would."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from aem_envs.core.errors import MissingDependencyError, require


def _aem(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aem_cli", *args], capture_output=True, text=True, timeout=300
    )


def test_envs_lists_every_id_with_its_extra() -> None:
    result = _aem("envs", "--json")
    assert result.returncode == 0, result.stderr
    from aem_envs.registration import ENTRIES

    rows = json.loads(result.stdout)
    assert [row["id"] for row in rows] == [item.id for item in ENTRIES]
    assert all(row["install"].startswith("pip install 'aem[") for row in rows)


def test_bad_env_id_is_one_clear_line() -> None:
    result = _aem("play", "aem/NoSuch-v0", "--policy", "random")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown environment id 'aem/NoSuch-v0'" in lines[0]
    assert "aem envs" in lines[0]


def test_missing_optional_dependency_names_the_extra() -> None:
    with pytest.raises(MissingDependencyError, match=r"pip install 'aem\[swe\]'"):
        require("swe", "surely_not_a_module_xyz", feature="aem/SWE-v0")


def test_sft_passes_env_kwargs_to_its_envs() -> None:
    from aem_cli.main import build_parser
    from aem_cli.sft import settings_of

    args = build_parser().parse_args(
        ["sft", "aem/ALFWorld-v0", "--output-dir", "x", "--env-kwargs", '{"expert": "search"}']
    )
    assert settings_of(args)[0].env_kwargs == {"expert": "search"}


def test_sft_prompt_loss_flag_scores_the_prompt_too() -> None:
    from aem_cli.main import build_parser
    from aem_cli.sft import settings_of

    base = ["sft", "aem/ALFWorld-v0", "--output-dir", "x"]
    assert not settings_of(build_parser().parse_args([*base, "--prompt-loss"]))[
        0
    ].completion_only_loss
    assert settings_of(build_parser().parse_args(base))[0].completion_only_loss
