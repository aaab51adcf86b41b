"""The generator reproduces the shipped tasks: same commits, patches and eval scripts."""

from __future__ import annotations

from aem_envs.swe.generate.build import check_shipped
from aem_envs.swe.generate.spec import load_repos, strip_task_blocks

TEXT = "a\n# aem-task: 1\none\n# aem-task-end\nb\n# aem-task: 2\ntwo\n# aem-task-end\n"


def test_strip_task_blocks_keeps_only_the_asked_block():
    assert strip_task_blocks(TEXT, keep=None) == "a\nb\n"
    assert strip_task_blocks(TEXT, keep=2) == "a\nb\ntwo\n"


def test_each_instance_fixes_only_its_own_files():
    for repo in load_repos():
        base = repo.base_files()
        for spec in repo.instances:
            fixed = repo.base_files(fixed=spec)
            changed = {path for path in base if base[path] != fixed[path]}
            assert changed == {sub.file for sub in spec.bug}, repo.instance_id(spec)


def test_regeneration_matches_the_shipped_instances():
    assert check_shipped(run=False) == []
