"""SWE-bench instances: loading them, and finding (or building) the image each one runs in.

Three sources share one code path:

- the bundled tasks (``tasks/instances.jsonl`` with their repositories as ``tasks/*.bundle``);
- an external file in swebench's instance format (json / jsonl / parquet, read with
  swebench's ``load_swebench_dataset``) plus a ``bundles_dir`` holding each repository as
  ``<owner>__<name>.bundle`` (e.g. ``acme__inikit.bundle``): images are then built offline
  from the bundle at the instance's ``base_commit``;
- real SWE-bench files whose instance images were built elsewhere and loaded here: an
  instance's ``image`` field, else swebench's name ``sweb.eval.x86_64.<id>:latest``.

Instances that lack swebench 5.x's ``eval_script`` / ``log_parser`` / ``eval_type`` fields get
a pytest eval script derived from their test patch (:mod:`aem_envs.swe.evalscript`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from aem_envs.core.errors import AEMError, DataError, require
from aem_envs.swe.evalscript import DEFAULT_EVAL_TYPE, DEFAULT_LOG_PARSER, make_eval_script

TASKS_DIR = Path(__file__).with_name("tasks")
BUNDLED_INSTANCES = TASKS_DIR / "instances.jsonl"
REQUIRED_FIELDS = (
    "instance_id",
    "repo",
    "base_commit",
    "problem_statement",
    "patch",
    "test_patch",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
)
SUFFIXES = (".json", ".jsonl", ".parquet")


class ImageMissingError(AEMError):
    """An instance's Docker image is neither present locally nor buildable from a bundle."""


def _test_list(value: Any, field: str, instance_id: str) -> list[str]:
    items = json.loads(value) if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise DataError(f"instance {instance_id}: {field} must be a JSON list of test ids")
    return list(items)


@dataclass(frozen=True)
class SWEInstance:
    """One instance in swebench's format, with where its repository bundle lives (if any)."""

    data: Mapping[str, Any]
    bundle: Path | None = None

    @classmethod
    def from_dict(cls, row: Mapping[str, Any], bundles_dir: Path | None) -> SWEInstance:
        missing = [name for name in REQUIRED_FIELDS if name not in row]
        ident = row.get("instance_id", "?")
        if missing:
            raise DataError(
                f"instance {ident} lacks {', '.join(missing)}; swebench's instance format "
                f"needs {', '.join(REQUIRED_FIELDS)}"
            )
        data = dict(row)
        data["FAIL_TO_PASS"] = _test_list(row["FAIL_TO_PASS"], "FAIL_TO_PASS", ident)
        data["PASS_TO_PASS"] = _test_list(row["PASS_TO_PASS"], "PASS_TO_PASS", ident)
        bundle = None
        if bundles_dir is not None:
            candidate = bundles_dir / f"{str(row['repo']).replace('/', '__')}.bundle"
            bundle = candidate if candidate.is_file() else None
        return cls(data, bundle)

    @property
    def instance_id(self) -> str:
        return str(self.data["instance_id"])

    @property
    def repo(self) -> str:
        return str(self.data["repo"])

    @property
    def repo_name(self) -> str:
        """The repository without its owner, used as the env's ``task_type``."""
        return self.repo.rsplit("/", 1)[-1]

    @property
    def problem_statement(self) -> str:
        return str(self.data["problem_statement"])

    @property
    def gold_patch(self) -> str:
        return str(self.data["patch"])

    @cached_property
    def eval_script(self) -> str:
        script = self.data.get("eval_script")
        if script:
            return str(script)
        return make_eval_script(str(self.data["base_commit"]), str(self.data["test_patch"]))

    def swebench_image_name(self) -> str:
        """The name swebench's harness gives this instance's image."""
        if self.data.get("image"):
            return str(self.data["image"])
        key = self.instance_id.replace("__", "_1776_").lower()
        return f"sweb.eval.x86_64.{key}:latest"

    def spec_fields(self, image: str) -> dict[str, Any]:
        """The instance as ``swebench.harness.utils.make_test_spec`` wants it."""
        return {
            **self.data,
            "image": image,
            "version": str(self.data.get("version", "")),
            "eval_script": self.eval_script,
            "log_parser": self.data.get("log_parser") or DEFAULT_LOG_PARSER,
            "eval_type": self.data.get("eval_type") or DEFAULT_EVAL_TYPE,
        }


def read_instances_file(path: Path) -> list[dict[str, Any]]:
    """Rows of a json / jsonl / parquet file of instances, read by swebench's own loader."""
    if not path.is_file():
        raise DataError(
            f"dataset file {path} does not exist; pass a .json, .jsonl or .parquet file"
        )
    if path.suffix not in SUFFIXES:
        raise DataError(f"dataset file {path} must end in {', '.join(SUFFIXES)}")
    utils = require("swe", "swebench.harness.utils", feature="loading SWE-bench datasets")
    try:
        rows = utils.load_swebench_dataset(str(path))
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(f"cannot read instances from {path}: {exc}") from exc
    return [dict(row) for row in rows]


def read_bundled_rows() -> list[dict[str, Any]]:
    """The bundled instances; plain JSON lines, so listing them needs no optional import."""
    text = BUNDLED_INSTANCES.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def load_instances(
    dataset: str | Path | None = None, bundles_dir: str | Path | None = None
) -> list[SWEInstance]:
    """Instances of ``dataset`` (default: the bundled tasks), sorted by id."""
    if dataset is None:
        rows = read_bundled_rows()
        folder: Path | None = TASKS_DIR if bundles_dir is None else Path(bundles_dir)
    else:
        rows = read_instances_file(Path(dataset))
        folder = None if bundles_dir is None else Path(bundles_dir)
        if folder is not None and not folder.is_dir():
            raise DataError(f"bundles_dir {folder} is not a directory")
    instances = [SWEInstance.from_dict(row, folder) for row in rows]
    seen: set[str] = set()
    for instance in instances:
        if instance.instance_id in seen:
            raise DataError(f"instance id {instance.instance_id} appears twice in the dataset")
        seen.add(instance.instance_id)
    return sorted(instances, key=lambda item: item.instance_id)


def ensure_image(
    instance: SWEInstance,
    *,
    image_exists: Callable[[str], bool],
    build: Callable[[Path, str], str] | None = None,
) -> str:
    """The image ``instance`` runs in: built from its bundle, or an existing local image.

    ``image_exists`` asks the engine about a tag; ``build(bundle, commit)`` builds an image
    from a bundle (``sandboxes.images.ensure_instance_image``).
    """
    if instance.bundle is not None and build is not None:
        return build(instance.bundle, str(instance.data["base_commit"]))
    name = instance.swebench_image_name()
    if image_exists(name):
        return name
    slug = instance.repo.replace("/", "__")
    raise ImageMissingError(
        f"the image {name} of instance {instance.instance_id} is not present locally. "
        f"Build it where there is network (`python -m swebench.harness.prepare_images "
        f"--instance_ids {instance.instance_id}`), move it here with `docker save {name}` / "
        f"`docker load -i FILE`, or give the repository as a git bundle "
        f"(bundles_dir=DIR with DIR/{slug}.bundle) to build it offline"
    )


def summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Instance count per repository name, for ``aem envs``."""
    counts: dict[str, int] = {}
    for row in rows:
        name = str(row["repo"]).rsplit("/", 1)[-1]
        counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items()))
