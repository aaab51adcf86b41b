"""``aem envs [ID] [--tasks [--split S]]``: the registered ids, their task sets, what each needs.

Readiness is judged by importing each dependency for real (a package can be present and
still fail to import), and every "missing" line comes with the exact command that fixes it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from aem_envs.core.errors import AEMError
from aem_envs.registration import ENTRIES, EnvEntry, entry

if TYPE_CHECKING:
    from aem_envs.core.base import TextEnv


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("envs", help="list environment ids and their task sets")
    parser.add_argument("env_id", nargs="?", help="describe only this id (e.g. aem/ALFWorld-v0)")
    parser.add_argument(
        "--tasks", action="store_true", help="list the id's task ids (split, then task id)"
    )
    parser.add_argument("--split", help="with --tasks: only this split")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.set_defaults(func=run)


def describe(item: EnvEntry) -> dict[str, Any]:
    """Everything ``aem envs`` says about one id, without starting its engine."""
    missing = item.missing_modules()
    task_sets: Mapping[str, dict[str, int] | str]
    try:
        task_sets = _env_class(item).task_set_summary()
    except (ImportError, AEMError) as exc:
        task_sets = {"unavailable": str(exc)}
    return {
        "id": item.id,
        "summary": item.summary,
        "extra": item.extra,
        "install": item.install,
        "python_ready": not missing,
        "missing_modules": missing,
        "features": [
            {
                "name": feature.name,
                "ready": not problems,
                "problems": problems,
                "install": feature.install,
            }
            for feature in item.features
            for problems in [feature.problems()]
        ],
        "system": item.system,
        "task_sets": task_sets,
    }


def task_listing(item: EnvEntry, split: str | None) -> list[tuple[str, str]]:
    """``(split, task_id)`` for every task of the id's default configuration."""
    env_class = _env_class(item)
    if split is not None and split not in env_class.splits:
        raise AEMError(f"{item.id} has no split {split!r}; choose one of {list(env_class.splits)}")
    env = env_class()
    try:
        splits = [split] if split is not None else list(env_class.splits)
        return [(name, task_id) for name in splits for task_id in env.task_ids(name)]
    finally:
        env.close()


def run(args: argparse.Namespace) -> int:
    items = list(ENTRIES)
    if args.env_id is not None:
        chosen = entry(args.env_id)
        if chosen is None:
            known = ", ".join(item.id for item in items) or "none installed"
            raise AEMError(f"unknown environment id {args.env_id!r}; aem ids: {known}")
        items = [chosen]
    elif args.tasks or args.split:
        raise AEMError(
            "--tasks lists one id's tasks; name it, e.g. aem envs aem/ALFWorld-v0 --tasks"
        )
    if args.tasks:
        return _print_tasks(items[0], args)
    rows = [describe(item) for item in items]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no environments are registered in this installation")
    for row in rows:
        _print_row(row)
    return 0


def _print_tasks(item: EnvEntry, args: argparse.Namespace) -> int:
    rows = task_listing(item, args.split)
    if args.json:
        text = json.dumps([{"split": split, "task_id": task_id} for split, task_id in rows])
    else:
        text = "\n".join(f"{split}\t{task_id}" for split, task_id in rows)
    try:
        print(text)
    except BrokenPipeError:  # `aem envs ID --tasks | head`: the reader has seen enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _print_row(row: dict[str, Any]) -> None:
    if row["python_ready"]:
        status = "ready"
    else:
        status = f"missing {', '.join(row['missing_modules'])}; install: {row['install']}"
    print(f"{row['id']}  —  {row['summary']}")
    print(f"    extra: [{row['extra']}] ({status}); system: {row['system']}")
    for feature in row["features"]:
        if feature["ready"]:
            print(f"    {feature['name']}: ready")
        else:
            print(
                f"    {feature['name']}: not ready ({feature['problems'][0]}); "
                f"install: {feature['install']}"
            )
    for split, counts in row["task_sets"].items():
        if isinstance(counts, dict):
            total = sum(counts.values())
            detail = ", ".join(f"{k} {v}" for k, v in counts.items())
            print(f"    {split}: {total} tasks ({detail})")
        else:
            print(f"    {split}: {counts}")
    print(f"    task ids: aem envs {row['id']} --tasks")


def _env_class(item: EnvEntry) -> type[TextEnv]:
    """The id's class (importing it); every id of the registry is a ``TextEnv``."""
    return cast("type[TextEnv]", item.env_class())
