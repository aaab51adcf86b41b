"""Benchmark suites: which env ids, splits and tasks a run covers, read from YAML files.

A suite is data, not code, so users can write their own (``aem bench --suite my.yaml``)
and the bundled ones (``benchmarks/suites/*.yaml``) document exactly what a reported
number was measured on. Schema::

    name: quick
    description: one paragraph printed in the report
    seeds: [0]                     # every task is played once per seed
    policies:                      # constructor keywords per policy spec, when that spec runs
      smollm2: {max_new_tokens: 64, temperature: 0}
      hf: {temperature: 0}         # every hf:<path> spec without an entry of its own
    envs:
      - env: aem/ALFWorld-v0       # a registered id, or "module:id" for your own env
        split: valid_seen          # default: the env's first split
        tasks: 3                   # N tasks spread over the split, or "all" (default)
        task_ids: [...]            # explicit ids instead of ``tasks``
        kwargs: {data_dir: "${ALFWORLD_DATA}"}   # constructor keywords; ${VAR} expanded
        requires: [ALFWORLD_DATA]  # environment variables that must be set (real data)
        max_steps: 50              # episode limit for every policy (default: the env's)
        model_max_steps: 10        # a tighter limit for model policies (slow on CPU)
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from aem_envs.core.errors import AEMError, DataError

SUITES_DIR = Path(__file__).with_name("suites")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class SuiteError(AEMError, ValueError):
    """A suite file is missing, malformed, or asks for data that is not there."""


@dataclass(frozen=True)
class EnvSuite:
    """One env of a suite: the id, the split, which tasks, and the constructor keywords."""

    env: str
    split: str | None = None
    tasks: int | None = None
    task_ids: tuple[str, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    requires: tuple[str, ...] = ()
    max_steps: int | None = None
    model_max_steps: int | None = None

    @property
    def env_id(self) -> str:
        """The id without a ``module:`` prefix, as reports name it."""
        return self.env.split(":", 1)[-1]

    def env_kwargs(self, *, model: bool) -> dict[str, Any]:
        """Constructor keywords for a policy; model policies get ``model_max_steps``."""
        kwargs = dict(self.kwargs)
        limit = self.model_max_steps if model and self.model_max_steps else self.max_steps
        if limit is not None:
            kwargs["max_steps"] = limit
        return kwargs

    def select(self, available: Sequence[str], limit: int | None = None) -> list[str]:
        """The task ids this entry plays, chosen from the split's ``available`` ids.

        ``tasks: N`` takes N ids evenly spread over the split (the bundled splits are
        ordered by task type, so a spread covers the types); ``limit`` caps the result.
        """
        if self.task_ids:
            unknown = [t for t in self.task_ids if t not in set(available)]
            if unknown:
                raise SuiteError(
                    f"{self.env_id}: task ids {unknown[:3]} are not in split {self.split!r}; "
                    "run `aem envs` to see the task sets"
                )
            chosen = list(self.task_ids)
        else:
            chosen = spread(available, self.tasks)
        return chosen if limit is None else chosen[:limit]


def spread(available: Sequence[str], count: int | None) -> list[str]:
    """``count`` ids evenly spread over ``available`` (all of them when ``count`` is None or
    at least their number). The bundled splits are ordered by task type, so a spread covers
    every type; the learning harness scores its held-out split with the same choice."""
    if count is None or count >= len(available):
        return list(available)
    stride = len(available) / count
    return [available[int(i * stride)] for i in range(count)]


@dataclass(frozen=True)
class Suite:
    """A named list of :class:`EnvSuite` entries played with every seed in ``seeds``."""

    name: str
    description: str
    envs: tuple[EnvSuite, ...]
    seeds: tuple[int, ...] = (0,)
    policy_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: str = ""

    def kwargs_for(self, spec: str) -> dict[str, Any]:
        """Constructor keywords for policy ``spec``: its own ``policies:`` entry, else the
        entry of its form (``hf`` for every ``hf:<path>``, ``openai`` for every endpoint), so
        a suite can say once how any checkpoint is played (e.g. greedily)."""
        if spec in self.policy_kwargs:
            return dict(self.policy_kwargs[spec])
        return dict(self.policy_kwargs.get(spec.split(":", 1)[0], {}))

    def check_requirements(self) -> None:
        """Fail early, in one line, when a real-data suite's variables are not set."""
        for item in self.envs:
            for var in item.requires:
                value = os.environ.get(var)
                if not value:
                    raise DataError(
                        f"suite {self.name!r} needs ${var} for {item.env_id}: set it to the "
                        f"path of your copy of the data ({self.description})"
                    )
                if not Path(value).exists():
                    raise DataError(
                        f"suite {self.name!r}: ${var}={value} does not exist; point it at "
                        f"your copy of the data ({self.description})"
                    )


def bundled_suites() -> list[str]:
    """Names of the suites that ship with aem."""
    return sorted(p.stem for p in SUITES_DIR.glob("*.yaml"))


def load_suite(name_or_path: str | os.PathLike[str]) -> Suite:
    """A bundled suite by name (``quick``, ``full``, ...) or a suite YAML file by path."""
    text = str(name_or_path)
    path = Path(text)
    if not (text.endswith((".yaml", ".yml")) or path.exists()):
        path = SUITES_DIR / f"{text}.yaml"
        if not path.exists():
            raise SuiteError(
                f"unknown suite {text!r}; choose one of {bundled_suites()} or give a YAML path"
            )
    if not path.is_file():
        raise SuiteError(f"suite file {path} does not exist")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise SuiteError(f"suite file {path} is not valid YAML: {exc}") from exc
    return parse_suite(raw, source=str(path))


def parse_suite(raw: Any, *, source: str = "<dict>") -> Suite:
    """Validate a suite mapping (as read from YAML) into a :class:`Suite`."""
    if not isinstance(raw, dict):
        raise SuiteError(f"{source}: a suite must be a mapping with 'name' and 'envs'")
    _only(raw, {"name", "description", "seeds", "policies", "envs"}, source)
    name = raw.get("name")
    envs = raw.get("envs")
    if not isinstance(name, str) or not name:
        raise SuiteError(f"{source}: 'name' must be a non-empty string")
    if not isinstance(envs, list) or not envs:
        raise SuiteError(f"{source}: 'envs' must be a non-empty list of env entries")
    seeds = raw.get("seeds", [0])
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) for s in seeds):
        raise SuiteError(f"{source}: 'seeds' must be a non-empty list of integers")
    policy_kwargs = raw.get("policies") or {}
    if not isinstance(policy_kwargs, dict) or not all(
        isinstance(v, dict) for v in policy_kwargs.values()
    ):
        raise SuiteError(f"{source}: 'policies' must map a policy spec to its keywords")
    return Suite(
        name=name,
        description=str(raw.get("description", "")).strip(),
        envs=tuple(_parse_env(item, f"{source}: envs[{i}]") for i, item in enumerate(envs)),
        seeds=tuple(seeds),
        policy_kwargs={str(k): dict(v) for k, v in policy_kwargs.items()},
        source=source,
    )


def _parse_env(item: Any, where: str) -> EnvSuite:
    if not isinstance(item, dict) or not isinstance(item.get("env"), str):
        raise SuiteError(f"{where}: each entry needs 'env: <id>'")
    keys = {"env", "split", "tasks", "task_ids", "kwargs", "requires"}
    _only(item, keys | {"max_steps", "model_max_steps"}, where)
    tasks = item.get("tasks", "all")
    if tasks == "all":
        tasks = None
    elif not isinstance(tasks, int) or tasks < 1:
        raise SuiteError(f"{where}: 'tasks' must be a positive integer or 'all', got {tasks!r}")
    for key in ("max_steps", "model_max_steps"):
        value = item.get(key)
        if value is not None and (not isinstance(value, int) or value < 1):
            raise SuiteError(f"{where}: {key!r} must be a positive integer, got {value!r}")
    kwargs = item.get("kwargs") or {}
    if not isinstance(kwargs, dict):
        raise SuiteError(f"{where}: 'kwargs' must be a mapping of constructor keywords")
    requires = tuple(item.get("requires") or ())
    return EnvSuite(
        env=item["env"],
        split=item.get("split"),
        tasks=tasks,
        task_ids=tuple(str(t) for t in item.get("task_ids") or ()),
        kwargs=_expand(kwargs) if all(os.environ.get(v) for v in requires) else kwargs,
        requires=requires,
        max_steps=item.get("max_steps"),
        model_max_steps=item.get("model_max_steps"),
    )


def _only(raw: dict, allowed: set[str], where: str) -> None:
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise SuiteError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")


def _expand(value: Any) -> Any:
    """Replace ``${VAR}`` in strings with the environment's value (real-data paths)."""
    if isinstance(value, str):
        return _VAR.sub(lambda m: os.environ.get(m.group(1), m.group(0)), value)
    if isinstance(value, dict):
        return {k: _expand(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v) for v in value]
    return value
