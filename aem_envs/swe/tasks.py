"""SWE-bench instances: loading them, and finding (or building) the image each one runs in.

Three sources share one code path:

- the bundled tasks (``data/instances.jsonl`` with their repositories as ``data/*.bundle``);
- an external file in swebench's instance format (json / jsonl / parquet, read with
  swebench's ``load_swebench_dataset``) plus a ``bundles_dir`` holding each repository as
  ``<owner>__<name>.bundle`` (e.g. ``acme__inikit.bundle``): images are then built offline
  from the bundle at the instance's ``base_commit``;
- real SWE-bench files whose instance images were built elsewhere and loaded here: an
  instance's ``image`` field, else swebench's name ``sweb.eval.x86_64.<id>:latest``.

Eval scripts: an instance's own ``eval_script`` (swebench 5.x datasets carry one) is used as
is. Without one, an instance with its own test command (``test_cmd``) or a repository bundle
gets a script derived from its test lists and test patch (:mod:`aem_envs.swe.evalscript`);
any other instance (a real SWE-bench row run in a prebuilt image, whose tests may not be
pytest at all: Django's ``runtests.py``, SymPy's ``bin/test``) gets the script the installed
swebench builds for its repository and version, and where swebench builds none, the reset
stops with one line saying so.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from aem_envs.core.errors import AEMError, DataError, require
from aem_envs.swe.evalscript import (
    DEFAULT_EVAL_TYPE,
    DEFAULT_LOG_PARSER,
    files_to_run,
    instance_test_command,
    make_eval_script,
)

DATA_DIR = Path(__file__).with_name("data")
BUNDLED_INSTANCES = DATA_DIR / "instances.jsonl"
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
    #: The folder the bundle was looked for in (for the missing-image message).
    bundles_dir: Path | None = None

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
        return cls(data, bundle, bundles_dir)

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

    @property
    def test_ids(self) -> list[str]:
        """FAIL_TO_PASS then PASS_TO_PASS."""
        return [*self.data["FAIL_TO_PASS"], *self.data["PASS_TO_PASS"]]

    @cached_property
    def eval_script(self) -> str:
        """The script grading runs (see the module docstring for which one)."""
        script = self.data.get("eval_script")
        if script:
            return str(script)
        command = instance_test_command(self.data)
        if command is None and self.bundle is None:
            return swebench_eval_script(self)
        test_patch = str(self.data["test_patch"])
        return make_eval_script(
            str(self.data["base_commit"]),
            test_patch,
            files_to_run(test_patch, self.test_ids),
            test_command=command,
        )

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


def swebench_eval_script(instance: SWEInstance) -> str:
    """The eval script the installed swebench builds for ``instance``'s repository and version.

    swebench 2.x-4.x build one from their per-repository specs
    (``swebench.harness.test_spec.test_spec.make_test_spec``); swebench 5.x builds none, since
    its datasets carry ``eval_script``. Without one, a plain pytest run would grade a
    repository whose tests are not pytest as never resolved, so this stops instead.
    """
    from importlib import import_module
    from importlib.metadata import PackageNotFoundError, version

    try:
        builder = import_module("swebench.harness.test_spec.test_spec").make_test_spec
    except (ImportError, AttributeError):
        builder = None
    if builder is not None:
        try:
            return str(builder(dict(instance.data)).eval_script)
        except (KeyError, ValueError) as exc:
            reason = f"swebench has no spec for it ({type(exc).__name__}: {exc})"
    else:
        try:
            installed = f"swebench {version('swebench')}"
        except PackageNotFoundError:
            installed = "swebench (not installed)"
        reason = f"the installed {installed} builds no eval scripts"
    raise DataError(
        f"instance {instance.instance_id} ({instance.repo} {instance.data.get('version', '?')}) "
        f"has no eval_script and {reason}; use a dataset that carries eval_script (the current "
        "SWE-bench datasets do), add eval_script or test_cmd to the row, or give the "
        "repository as a git bundle (bundles_dir=) to grade with a derived pytest script"
    )


def read_instances_file(path: Path) -> list[dict[str, Any]]:
    """Rows of a json / jsonl / parquet file of instances, read by swebench's own loader."""
    if path.is_dir():
        inside = sorted(p.name for p in path.iterdir() if p.suffix in SUFFIXES)[:3]
        example = f" (it holds {', '.join(inside)})" if inside else ""
        raise DataError(
            f"dataset={str(path)!r} is a folder; pass the .json, .jsonl or .parquet file of "
            f"instances itself{example}"
        )
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
    folder = None if bundles_dir is None else Path(bundles_dir)
    if folder is not None and not folder.is_dir():
        problem = "is a file, not a folder" if folder.exists() else "does not exist"
        raise DataError(
            f"bundles_dir={str(folder)!r} {problem}; pass the folder holding the repositories "
            "as <owner>__<name>.bundle files (git bundle create FILE --all)"
        )
    if dataset is None:
        rows = read_bundled_rows()
        folder = DATA_DIR if folder is None else folder
    else:
        rows = read_instances_file(Path(dataset))
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
    searched = (
        f"bundles_dir {instance.bundles_dir} has no {slug}.bundle, and "
        if instance.bundles_dir is not None
        else ""
    )
    raise ImageMissingError(
        f"{searched}the image {name} of instance {instance.instance_id} is not present locally. "
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
