"""The editor's argument checks and lexical confinement (no sandbox needed for these)."""

from __future__ import annotations

import json

import pytest

from aem_envs.swe.editor import Editor, EditorRefusal, parse_edit
from aem_envs.swe.env import SWEEnv
from aem_envs.swe.expert import expert_plan


@pytest.mark.parametrize(
    "payload",
    [
        "not json",
        "[1, 2]",
        '{"command": "delete", "path": "a"}',
        '{"command": "view"}',
        '{"command": "create", "path": "a"}',
        '{"command": "str_replace", "path": "a", "old_str": 1}',
        '{"command": "insert", "path": "a", "new_str": "x", "insert_line": "3"}',
        '{"command": "view", "path": "a", "view_range": [1]}',
    ],
)
def test_malformed_edits_are_refused(payload):
    with pytest.raises(EditorRefusal):
        parse_edit(payload)


def test_well_formed_edit_parses():
    args = parse_edit(json.dumps({"command": "str_replace", "path": "a.py", "old_str": "x"}))
    assert args["command"] == "str_replace"


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/passwd", "/testbed/../root", "a\x00b"])
def test_paths_leaving_the_root_are_refused_before_touching_the_sandbox(path):
    with pytest.raises(EditorRefusal):
        Editor(sandbox=None).resolve(path)


def test_expert_plan_writes_applies_and_submits():
    plan = expert_plan("diff --git a/x b/x\n")
    assert json.loads(plan[0][len("edit ") :])["file_text"] == "diff --git a/x b/x\n"
    assert plan[1].startswith("bash: git apply") and plan[-1] == "submit"


def test_bad_constructor_arguments_are_one_clear_error():
    with pytest.raises(ValueError, match="backend"):
        SWEEnv(backend="vm")
    with pytest.raises(ValueError, match="positive"):
        SWEEnv(command_timeout=0)
