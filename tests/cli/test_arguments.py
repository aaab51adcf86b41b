"""Bad input to every ``aem`` command: one line naming the problem, before any work starts.

The table lists each bad input with the message it must get. Building an env or loading a
model is made to fail the test, so a check that runs too late (after an env or a model was
built) fails here even when its message is right. The rows marked ``env`` may build the env
(a task id is only known to the env, whose task set ``--env-kwargs`` may change), never a
model.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

from aem_cli.main import main

ALF = "aem/ALFWorld-v0"


class Built(Exception):
    """Raised where the command built something it should not have yet."""


ROWS: list[tuple[list[str], str, bool]] = [
    # (argv, message, may build the env)
    (["nope"], "argument COMMAND: invalid choice: 'nope'", False),
    (["bench", "--frobnicate"], "unrecognized arguments: --frobnicate", False),
    (
        ["bench", "--policy", "bogus"],
        "argument --policy: unknown policy 'bogus'; use one of",
        False,
    ),
    (["bench", "--policy", "hf:{tmp}/none"], "no checkpoint directory", False),
    (["bench", "--workers", "0"], "argument --workers: must be at least 1, got 0", False),
    (["bench", "--batch-size", "x"], "argument --batch-size: expected an integer, got 'x'", False),
    (["bench", "--limit", "0"], "argument --limit: must be at least 1, got 0", False),
    (["bench", "--suite", "nope"], "unknown suite 'nope'; choose one of", False),
    (["bench", "--suite", "alfworld-real"], "needs $ALFWORLD_DATA", False),
    (["bench", "--out", "{tmp}/file"], "is a file; give a run folder", False),
    (["bench", "compare", "{tmp}/a", "{tmp}/b"], "does not exist", False),
    (["bench", "perf", "--only", "nope"], "argument --only: invalid choice: 'nope'", False),
    (["play"], "the following arguments are required: env_id", False),
    (["play", "aem/NoSuch-v0"], "unknown environment id 'aem/NoSuch-v0'", False),
    (["play", ALF, "--policy", "bogus"], "unknown policy 'bogus'", False),
    (["play", ALF, "--max-steps", "0"], "argument --max-steps: must be at least 1, got 0", False),
    (["play", ALF, "--seed", "one"], "argument --seed: invalid int value: 'one'", False),
    (["play", ALF, "--split", "nope"], "--split 'nope': aem/ALFWorld-v0 has splits", False),
    (["play", ALF, "--env-kwargs", "[1]"], "argument --env-kwargs: must be a JSON object", False),
    (["play", ALF, "--env-kwargs", "{oops"], "argument --env-kwargs: not valid JSON", False),
    (
        ["play", ALF, "--policy", "aem-ref", "--task-id", "nope"],
        "--task-id 'nope' is not in split 'train' of aem/ALFWorld-v0",
        True,
    ),
    (["serve", ALF, "--port", "99999"], "argument --port: port 99999 is outside 1-65535", False),
    (
        ["serve", ALF, "--port", "http"],
        "argument --port: expected a port number, got 'http'",
        False,
    ),
    (["serve", ALF, "--port", "{busy}"], "cannot listen on 127.0.0.1:", False),
    (["serve", ALF, "--max-sessions", "0"], "argument --max-sessions: must be at least 1", False),
    (["serve", ALF, "--idle-timeout", "-1"], "argument --idle-timeout: must be 0 or more", False),
    (["sft", ALF], "the following arguments are required: --output-dir", False),
    (["sft", ALF, "--output-dir", "{tmp}/o", "--episodes", "0"], "--episodes: must be at", False),
    (
        ["sft", ALF, "--output-dir", "{tmp}/o", "--lr", "-1"],
        "argument --lr: must be above 0",
        False,
    ),
    (["sft", ALF, "--output-dir", "{tmp}/o", "--split", "test"], "the 'train' split only", False),
    (["train", "--steps", "0"], "argument --steps: must be at least 1, got 0", False),
    (["train", "--group-size", "x"], "argument --group-size: expected an integer", False),
    (["envs", "aem/NoSuch-v0"], "unknown environment id 'aem/NoSuch-v0'", False),
    (["envs", ALF, "--tasks", "--split", "nope"], "has no split 'nope'", False),
    (["sandbox", "build", "--bundle", "x.bundle"], "--bundle and --commit go together", False),
]


@pytest.fixture
def busy_port():
    """A port on loopback that something already listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.mark.parametrize(("argv", "message", "env"), ROWS, ids=[" ".join(r[0]) for r in ROWS])
def test_bad_input_is_one_line_before_any_work(
    argv, message, env, tmp_path, busy_port, monkeypatch, capsys
) -> None:
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    (tmp_path / "file").write_text("not a folder")
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{busy}", str(busy_port)) for a in argv]

    def refuse(what: str):
        def built(*args, **kwargs):
            raise Built(f"{what} was built before the bad input was refused")

        return built

    from aem_agent.policies import hf

    monkeypatch.setattr(hf.HFPolicy, "__init__", refuse("a model"))
    if not env:
        monkeypatch.setattr(gym, "make", refuse("an env"))
        monkeypatch.setattr(gym, "make_vec", refuse("an env"))

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("aem: error: ") and err.count("\n") == 1, err
    assert message in err, err


def test_a_good_command_line_passes_the_same_checks(tmp_path: Path, capsys) -> None:
    """The checks refuse only bad input: the same flags with good values run."""
    from tests.fixtures.corridor import FIXTURE_ID, register_fixture

    register_fixture()
    argv = ["play", FIXTURE_ID, "--policy", "expert", "--max-steps", "20", "--split", "test"]
    assert main([*argv, "--env-kwargs", "{}", "--quiet"]) == 0
    assert "won=True" in capsys.readouterr().out


#: Runs ``aem`` as a base install sees it: the agent extra's packages cannot be imported.
BASE_INSTALL = """
import sys
class NoAgentExtra:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "trl", "transformers", "peft", "accelerate"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoAgentExtra())
from aem_cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("argv", [["train", "--config", "cpu-smoke.yaml"], ["sft", "--help"]])
def test_without_the_agent_extra_training_commands_name_the_install(argv: list[str]) -> None:
    root = Path(__file__).parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", BASE_INSTALL, *argv],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"aem: error: `aem {argv[0]}` needs "), proc.stderr
    assert "pip install 'aem[agent]'" in proc.stderr and proc.stderr.count("\n") == 1
