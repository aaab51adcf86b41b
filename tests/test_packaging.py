"""Packaging promises: the environments extra never pulls in torch or trl; the wheel and the
sdist ship the code and its bundled data, never the measured results."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = {"torch", "trl", "transformers", "accelerate"}


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _extra_closure(extras: dict[str, list[str]], extra: str) -> list[str]:
    """Requirements of ``aem[extra]``, expanding self-references like ``aem[webshop]``."""
    out: list[str] = []
    for requirement in extras[extra]:
        match = re.fullmatch(r"aem\[(.+)\]", requirement)
        if match:
            for sub in match.group(1).split(","):
                out += _extra_closure(extras, sub.strip())
        else:
            out.append(requirement)
    return out


def _installed_closure(names: list[str]) -> set[str]:
    """Transitive runtime dependencies (no extras) of installed distributions."""
    seen: set[str] = set()
    stack = list(names)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        stack += [_name(r) for r in requires if "extra ==" not in r]
    return seen


def test_environment_extras_pull_in_no_torch() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    direct = [_name(r) for r in project["dependencies"] + _extra_closure(extras, "envs")]
    closure = _installed_closure(direct)
    assert not closure & HEAVY, f"aem[envs] would install {sorted(closure & HEAVY)}"


def test_cpu_torch_pin_is_exact() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    pins = [r for r in extras["agent"] if _name(r) == "torch"]
    if not pins:
        pytest.fail("the agent extra must pin torch")
    assert pins == ["torch==2.13.0"]


#: Paths of the repository's measured record: never shipped in a wheel or sdist.
RECORD_PARTS = {"results", "plots", "trajectories", "reports"}
RECORD_SUFFIXES = {".png", ".svg", ".csv"}


def _built(tmp_path: Path) -> tuple[list[str], list[str]]:
    """The member names of the wheel and the sdist ``python -m build`` makes of the tracked
    files (a copy, so the test neither reads nor leaves build folders in the checkout)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    source = tmp_path / "source"
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    out = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        capture_output=True,
        check=True,
    )
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    with zipfile.ZipFile(wheel) as zipped, tarfile.open(sdist) as tarred:
        return zipped.namelist(), [name.split("/", 1)[-1] for name in tarred.getnames()]


@pytest.mark.slow
def test_wheel_and_sdist_hold_the_code_and_data_but_no_measured_record(tmp_path: Path) -> None:
    wheel, sdist = _built(tmp_path)
    for names in (wheel, sdist):
        record = [
            name
            for name in names
            if RECORD_PARTS & set(Path(name).parts[:-1]) or Path(name).suffix in RECORD_SUFFIXES
        ]
        assert not record, f"measured results in a distribution: {record[:5]}"
        for needed in (
            "aem_envs/reply.py",
            "aem_envs/alfworld/data/index.json",
            "aem_agent/reference/adapter_model.safetensors",
            "benchmarks/suites/quick.yaml",
            "benchmarks/learning/configs/mechanism.yaml",
            "benchmarks/perf/table.py",
        ):
            assert needed in names
    assert any(name.startswith("benchmarks/learning/results/") for name in _tracked())


def _tracked() -> list[str]:
    return subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()


def test_license_is_an_spdx_expression() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
