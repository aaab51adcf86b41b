"""Settings files: a YAML mapping read from a path, or by name from a folder of bundled ones.

Why one reader: ``aem train --config``, ``aem sft --config`` and the learning experiments all
take a YAML file that may be a path or the name of a file shipped with the package
(``cpu-smoke.yaml``); each must fail the same way, in one line naming the file and the fix.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from aem_envs.core.errors import DataError


def read_settings(path: str | os.PathLike[str], *, bundled: Path, what: str) -> dict[str, Any]:
    """The mapping in the YAML file ``path``; a name that is not a file is looked up in
    ``bundled`` (a folder of shipped files). ``what`` names the file in errors."""
    import yaml

    file = Path(path)
    if not file.is_file():
        shipped = bundled / file.name
        if not shipped.is_file():
            names = ", ".join(p.name for p in sorted(bundled.glob("*.yaml")))
            raise DataError(f"{what} {path} does not exist; bundled ones: {names}")
        file = shipped
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise DataError(f"{what} {file} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise DataError(f"{what} {file} must be a mapping of settings")
    return data
