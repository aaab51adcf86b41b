"""``aem envs``: the registered ids, their bundled task sets and what each needs."""

from __future__ import annotations

import argparse
import json

from aem_envs.core.errors import AEMError
from aem_envs.registration import EnvEntry, landed_entries


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("envs", help="list environment ids and their task sets")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.set_defaults(func=run)


def describe(item: EnvEntry) -> dict:
    """Everything ``aem envs`` says about one id, without starting its engine."""
    missing = item.missing_modules()
    try:
        task_sets = item.env_class().task_set_summary()
    except (ImportError, AEMError) as exc:
        task_sets = {"unavailable": str(exc)}
    return {
        "id": item.id,
        "summary": item.summary,
        "extra": item.extra,
        "install": f"pip install 'aem[{item.extra}]'",
        "python_ready": not missing,
        "missing_modules": missing,
        "system": item.system,
        "task_sets": task_sets,
    }


def run(args: argparse.Namespace) -> int:
    rows = [describe(item) for item in landed_entries()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no environments are registered in this installation")
    for row in rows:
        status = "ready" if row["python_ready"] else f"missing {', '.join(row['missing_modules'])}"
        print(f"{row['id']}  —  {row['summary']}")
        print(f"    extra: [{row['extra']}] ({status}); system: {row['system']}")
        for split, counts in row["task_sets"].items():
            if isinstance(counts, dict):
                total = sum(counts.values())
                detail = ", ".join(f"{k} {v}" for k, v in counts.items())
                print(f"    {split}: {total} tasks ({detail})")
            else:
                print(f"    {split}: {counts}")
    return 0
