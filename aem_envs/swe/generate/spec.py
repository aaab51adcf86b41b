"""Reading a task repository's ``tasks.yaml`` and deriving its states from the fixed tree."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from aem_envs.core.errors import DataError

REPOS_DIR = Path(__file__).with_name("repos")
TASK_BLOCK_RE = re.compile(
    r"^# aem-task: (?P<number>\d+)\n(?P<body>.*?)^# aem-task-end\n", re.M | re.S
)
#: Files of a repository folder that are generator input, never committed.
NOT_COMMITTED = {"tasks.yaml"}
SKIPPED_DIRS = {"__pycache__", ".pytest_cache"}


@dataclass(frozen=True)
class Substitution:
    """Replacing ``fixed`` by ``buggy`` in ``file`` introduces (part of) a bug."""

    file: str
    fixed: str
    buggy: str


@dataclass(frozen=True)
class InstanceSpec:
    number: int
    base: int
    created_at: str
    problem_statement: str
    bug: tuple[Substitution, ...]


@dataclass(frozen=True)
class Commit:
    message: str
    files: tuple[str, ...]


@dataclass(frozen=True)
class RepoSpec:
    """One task repository: its GitHub-style name, version, history and instances."""

    root: Path
    repo: str
    version: str
    history: tuple[Commit, ...]
    instances: tuple[InstanceSpec, ...]

    @property
    def slug(self) -> str:
        """``owner__name``, as swebench writes a repository inside instance ids."""
        return self.repo.replace("/", "__")

    def instance_id(self, spec: InstanceSpec) -> str:
        return f"{self.slug}-{spec.number}"

    def fixed_files(self) -> dict[str, str]:
        """Every committed file of the fixed tree, path → text."""
        files: dict[str, str] = {}
        for path in sorted(self.root.rglob("*")):
            relative = path.relative_to(self.root)
            if path.is_dir() or SKIPPED_DIRS & set(relative.parts):
                continue
            if relative.as_posix() in NOT_COMMITTED:
                continue
            files[relative.as_posix()] = path.read_text(encoding="utf-8")
        return files

    def base_files(self, *, fixed: InstanceSpec | None = None) -> dict[str, str]:
        """The tree a base commit shows: task test blocks out, every bug in but ``fixed``'s.

        With ``fixed`` this is the target of that instance's gold patch; bugs are only ever
        applied forward, so a bug may delete code.
        """
        files = {
            path: strip_task_blocks(text, keep=None) for path, text in self.fixed_files().items()
        }
        for spec in self.instances:
            if spec is fixed:
                continue
            for sub in spec.bug:
                files[sub.file] = substitute(files[sub.file], sub.fixed, sub.buggy, sub.file)
        return files

    def with_tests(self, files: dict[str, str], spec: InstanceSpec) -> dict[str, str]:
        """``files`` with the test block of ``spec`` added (the test patch's target)."""
        fixed_tree = self.fixed_files()
        result = dict(files)
        for path, text in fixed_tree.items():
            if f"# aem-task: {spec.number}\n" in text:
                result[path] = strip_task_blocks(text, keep=spec.number)
        return result

    def commit_files(self, files: dict[str, str], index: int) -> dict[str, str]:
        """The subset of ``files`` present at history entry ``index``."""
        later = {name for commit in self.history[index + 1 :] for name in commit.files}
        return {path: text for path, text in files.items() if path not in later}


def strip_task_blocks(text: str, *, keep: int | None) -> str:
    """Remove every task test block except ``keep``'s, whose markers alone are removed."""

    def replace(match: re.Match[str]) -> str:
        return match.group("body") if int(match.group("number")) == keep else ""

    return TASK_BLOCK_RE.sub(replace, text)


def substitute(text: str, old: str, new: str, where: str) -> str:
    if text.count(old) != 1:
        raise DataError(
            f"{where}: expected exactly one occurrence of {old!r}, found {text.count(old)}"
        )
    return text.replace(old, new)


def load_repo(root: Path) -> RepoSpec:
    data = yaml.safe_load((root / "tasks.yaml").read_text(encoding="utf-8"))
    history = tuple(
        Commit(entry["message"], tuple(entry.get("files", ()))) for entry in data["history"]
    )
    instances = tuple(
        InstanceSpec(
            number=int(item["number"]),
            base=int(item["base"]),
            created_at=str(item["created_at"]),
            problem_statement=item["problem_statement"].strip() + "\n",
            bug=tuple(Substitution(**sub) for sub in item["bug"]),
        )
        for item in data["instances"]
    )
    return RepoSpec(root, data["repo"], str(data["version"]), history, instances)


def load_repos(root: Path = REPOS_DIR) -> list[RepoSpec]:
    return [load_repo(path) for path in sorted(root.iterdir()) if (path / "tasks.yaml").is_file()]
