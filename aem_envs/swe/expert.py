"""The SWE expert: the instance's gold patch, written with the editor and applied with git.

Why through the env's own actions rather than a shortcut into the sandbox: the expert's
episode then exercises the editor, bash and ``submit`` exactly as an agent's does, and its
demonstrations are plain action strings an agent can be trained on.
"""

from __future__ import annotations

import json

#: Where the expert writes the gold patch in the working tree (removed once applied).
GOLD_PATCH_FILE = ".aem_gold.patch"


def expert_plan(gold_patch: str) -> list[str]:
    """Write the gold patch with the editor, apply it with git in bash, remove it, submit."""
    create = {"command": "create", "path": GOLD_PATCH_FILE, "file_text": gold_patch}
    return [
        "edit " + json.dumps(create),
        f"bash: git apply {GOLD_PATCH_FILE} && rm {GOLD_PATCH_FILE}",
        "submit",
    ]
