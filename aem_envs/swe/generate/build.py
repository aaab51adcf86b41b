"""Building the bundled tasks: deterministic git history, bundles, patches, test lists."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from aem_envs.core.errors import DataError
from aem_envs.core.io import atomic_write_bytes, atomic_write_jsonl
from aem_envs.swe.evalscript import (
    DEFAULT_EVAL_TYPE,
    DEFAULT_LOG_PARSER,
    files_to_run,
    make_eval_script,
)
from aem_envs.swe.generate.spec import InstanceSpec, RepoSpec, load_repos
from aem_envs.swe.tasks import BUNDLED_INSTANCES, DATA_DIR

AUTHOR = ("Acme Maintainers", "maintainers@acme.invalid")
#: Commit ``i`` of every repository is dated this many days after 2024-01-01.
EPOCH = 1704067200
DAY = 86400
GIT = ("git", "-c", "core.autocrlf=false", "-c", "core.quotepath=off", "-c", "pack.threads=1")


def git(cwd: Path, *args: str, env: dict[str, str] | None = None, text: str | None = None) -> str:
    done = subprocess.run(
        [*GIT, *args], cwd=cwd, env=env, input=text, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise DataError(f"git {' '.join(args)} failed in {cwd}: {done.stderr.strip()}")
    return done.stdout


def write_tree(root: Path, files: dict[str, str]) -> None:
    """Make the work tree of ``root`` hold exactly ``files`` (``.git`` untouched)."""
    for path in root.iterdir():
        if path.name != ".git":
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def commit_history(spec: RepoSpec, root: Path) -> list[str]:
    """Commit the base tree of ``spec`` in ``root`` as its history; return the commit ids."""
    git(root, "init", "--quiet", "--initial-branch=main")
    base = spec.base_files()
    shas = []
    for index, entry in enumerate(spec.history):
        stamp = f"@{EPOCH + index * DAY} +0000"
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": AUTHOR[0],
            "GIT_AUTHOR_EMAIL": AUTHOR[1],
            "GIT_COMMITTER_NAME": AUTHOR[0],
            "GIT_COMMITTER_EMAIL": AUTHOR[1],
            "GIT_AUTHOR_DATE": stamp,
            "GIT_COMMITTER_DATE": stamp,
        }
        write_tree(root, spec.commit_files(base, index))
        git(root, "add", "--all")
        git(root, "commit", "--quiet", "--no-verify", "-m", entry.message, env=env)
        shas.append(git(root, "rev-parse", "HEAD").strip())
    return shas


def diff_to(root: Path, commit: str, files: dict[str, str]) -> str:
    """The git diff that turns ``commit`` into ``files``; leaves ``root`` at ``commit``."""
    git(root, "checkout", "--quiet", "--force", "--detach", commit)
    write_tree(root, files)
    git(root, "add", "--all")
    patch = git(root, "diff", "--cached", "--no-color", "--no-renames", "HEAD")
    git(root, "reset", "--quiet", "--hard", commit)
    git(root, "clean", "-fdxq")
    return patch


def run_tests(root: Path, commit: str, patch: str, eval_script: str) -> tuple[dict[str, str], str]:
    """Status map of the eval script on ``commit`` with ``patch`` applied, and the log.

    ``python3`` inside the script is this interpreter, which must have pytest.
    """
    from aem_envs.swe.grading import swebench_modules

    git(root, "checkout", "--quiet", "--force", "--detach", commit)
    git(root, "clean", "-fdxq")
    if patch:
        git(root, "apply", "-", text=patch)
    with tempfile.TemporaryDirectory(prefix="aem-swe-generate-") as tmp:
        shim = Path(tmp) / "bin"
        shim.mkdir()
        (shim / "python3").symlink_to(sys.executable)
        env = {**os.environ, "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}"}
        env.pop("PYTHONPATH", None)
        done = subprocess.run(
            ["bash", "-c", eval_script], env=env, capture_output=True, text=True, check=False
        )
        log = done.stdout + done.stderr
        log_path = Path(tmp) / "log.txt"
        log_path.write_text(log, encoding="utf-8")
        utils, grading, _, _ = swebench_modules()
        spec = utils.make_test_spec(
            {
                "instance_id": "taskgen",
                "image": "local",
                "eval_script": eval_script,
                "repo": "local",
                "version": "",
                "FAIL_TO_PASS": [],
                "PASS_TO_PASS": [],
                "log_parser": DEFAULT_LOG_PARSER,
                "eval_type": DEFAULT_EVAL_TYPE,
            }
        )
        status, found = grading.get_logs_eval(spec, str(log_path))
    git(root, "reset", "--quiet", "--hard", commit)
    git(root, "clean", "-fdxq")
    if not found:
        raise DataError(f"the eval script produced no test results:\n{log[-3000:]}")
    return status, log


def build_instance(
    repo: RepoSpec, spec: InstanceSpec, root: Path, shas: list[str], *, run: bool = True
) -> dict[str, Any]:
    """The instance row of ``spec``; without ``run`` the test lists are left empty."""
    base_commit = shas[spec.base]
    tree = repo.commit_files(repo.base_files(), spec.base)
    patch = diff_to(root, base_commit, repo.commit_files(repo.base_files(fixed=spec), spec.base))
    test_patch = diff_to(root, base_commit, repo.with_tests(tree, spec))
    if not patch or not test_patch:
        raise DataError(f"{repo.instance_id(spec)}: empty gold patch or test patch")
    fail_to_pass, pass_to_pass = (
        find_test_lists(repo, spec, root, base_commit, patch, test_patch) if run else ([], [])
    )
    return {
        "repo": repo.repo,
        "instance_id": repo.instance_id(spec),
        "base_commit": base_commit,
        "patch": patch,
        "test_patch": test_patch,
        "problem_statement": spec.problem_statement,
        "hints_text": "",
        "created_at": spec.created_at,
        "version": repo.version,
        "FAIL_TO_PASS": json.dumps(fail_to_pass),
        "PASS_TO_PASS": json.dumps(pass_to_pass),
        "environment_setup_commit": shas[0],
        "eval_script": make_eval_script(
            base_commit, test_patch, files_to_run(test_patch, [*fail_to_pass, *pass_to_pass])
        ),
        "log_parser": DEFAULT_LOG_PARSER,
        "eval_type": DEFAULT_EVAL_TYPE,
    }


def find_test_lists(
    repo: RepoSpec, spec: InstanceSpec, root: Path, base_commit: str, patch: str, test_patch: str
) -> tuple[list[str], list[str]]:
    """FAIL_TO_PASS and PASS_TO_PASS, found by running the eval script without and with the fix."""
    local_script = make_eval_script(base_commit, test_patch, workdir=str(root))
    before, _ = run_tests(root, base_commit, "", local_script)
    after, _ = run_tests(root, base_commit, patch, local_script)
    broken = sorted(test for test, status in after.items() if status != "PASSED")
    if broken:
        raise DataError(f"{repo.instance_id(spec)}: tests fail with the gold patch: {broken}")
    fail_to_pass = sorted(t for t in after if before.get(t) != "PASSED")
    pass_to_pass = sorted(t for t in after if before.get(t) == "PASSED")
    if not fail_to_pass:
        raise DataError(f"{repo.instance_id(spec)}: no test fails before the gold patch")
    return fail_to_pass, pass_to_pass


def build_repo(
    repo: RepoSpec, scratch: Path, *, run: bool = True
) -> tuple[bytes, list[dict[str, Any]]]:
    """The bundle bytes and instance rows of one repository (test lists only with ``run``)."""
    root = scratch / repo.slug
    root.mkdir()
    shas = commit_history(repo, root)
    bundle = scratch / f"{repo.slug}.bundle"
    git(root, "bundle", "create", "--quiet", str(bundle), "main")
    rows = [build_instance(repo, spec, root, shas, run=run) for spec in repo.instances]
    return bundle.read_bytes(), rows


def build_all(out_dir: Path = DATA_DIR) -> list[dict[str, Any]]:
    """Regenerate every bundle and ``instances.jsonl`` in ``out_dir``."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="aem-swe-generate-") as tmp:
        for repo in load_repos():
            bundle, repo_rows = build_repo(repo, Path(tmp))
            atomic_write_bytes(out_dir / f"{repo.slug}.bundle", bundle).chmod(0o644)
            rows.extend(repo_rows)
            print(f"{repo.repo}: {len(repo_rows)} instances", file=sys.stderr)
    rows.sort(key=lambda row: row["instance_id"])
    atomic_write_jsonl(out_dir / BUNDLED_INSTANCES.name, rows).chmod(0o644)
    return rows


def check_shipped(*, run: bool = True) -> list[str]:
    """Differences between a fresh generation and the shipped instances (empty when equal).

    Without ``run`` the tests are not executed and the test lists are not compared: commit
    ids, patches and eval scripts still are. Bundles are compared through the commit ids
    their instances name, not byte for byte: pack files depend on the git version.
    """
    shipped = {row["instance_id"]: row for row in map(json.loads, _lines(BUNDLED_INSTANCES))}
    compared = ("FAIL_TO_PASS", "PASS_TO_PASS") if not run else ()
    problems = []
    with tempfile.TemporaryDirectory(prefix="aem-swe-generate-") as tmp:
        for repo in load_repos():
            _, rows = build_repo(repo, Path(tmp), run=run)
            for row in rows:
                old = shipped.pop(row["instance_id"], None)
                if old is None:
                    problems.append(f"{row['instance_id']} is generated but not shipped")
                    continue
                for key in sorted(set(row) | set(old)):
                    if key not in compared and row.get(key) != old.get(key):
                        problems.append(f"{row['instance_id']}: {key} differs from the shipped one")
    problems.extend(f"{ident} is shipped but no longer generated" for ident in shipped)
    return problems


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
