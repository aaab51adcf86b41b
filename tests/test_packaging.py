"""Packaging promises: the environments extra never pulls in torch or trl."""

from __future__ import annotations

import re
import tomllib
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
