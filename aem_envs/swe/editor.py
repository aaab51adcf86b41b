"""The file editor action: view / create / str_replace / insert, confined to the repository.

The commands and their arguments follow the editor tool SWE agents use
(``str_replace_editor``): a JSON object such as
``{"command": "str_replace", "path": "pkg/mod.py", "old_str": "a", "new_str": "b"}``.
Paths are relative to the repository root or absolute inside it; a path that leaves the
repository — through ``..`` or through a symlink, resolved inside the sandbox — is refused.
"""

from __future__ import annotations

import json
import posixpath
import shlex
from dataclasses import dataclass
from typing import Any

COMMANDS = ("view", "create", "str_replace", "insert")
#: Lines ``view`` shows of a file at most, and entries of a directory listing.
VIEW_LINES = 2000


class EditorRefusal(ValueError):
    """The edit is malformed or reaches outside the repository: an invalid action."""


@dataclass(frozen=True)
class EditResult:
    """A well-formed edit's outcome; ``ok`` is false when it could not be carried out."""

    ok: bool
    message: str


def parse_edit(payload: str) -> dict[str, Any]:
    """The JSON arguments of an ``edit`` action, checked for shape."""
    try:
        args = json.loads(payload)
    except json.JSONDecodeError as exc:
        raise EditorRefusal(f"edit expects a JSON object after 'edit' ({exc.msg})") from None
    if not isinstance(args, dict):
        raise EditorRefusal("edit expects a JSON object after 'edit'")
    command = args.get("command")
    if command not in COMMANDS:
        raise EditorRefusal(f"edit command must be one of {', '.join(COMMANDS)}, got {command!r}")
    if not isinstance(args.get("path"), str) or not args["path"].strip():
        raise EditorRefusal("edit needs a 'path' string")
    required = {"create": ("file_text",), "str_replace": ("old_str",), "insert": ("new_str",)}
    for name in required.get(command, ()):
        if not isinstance(args.get(name), str):
            raise EditorRefusal(f"edit {command} needs a '{name}' string")
    if command == "str_replace" and not isinstance(args.get("new_str", ""), str):
        raise EditorRefusal("edit str_replace: 'new_str' must be a string")
    if command == "insert" and not isinstance(args.get("insert_line"), int):
        raise EditorRefusal("edit insert needs an integer 'insert_line'")
    if command == "view" and "view_range" in args:
        view_range = args["view_range"]
        if not (
            isinstance(view_range, list)
            and len(view_range) == 2
            and all(isinstance(n, int) for n in view_range)
        ):
            raise EditorRefusal("edit view: 'view_range' must be [start, end] line numbers")
    return args


class Editor:
    """Runs edits in a sandbox whose repository lives at ``root``."""

    def __init__(self, sandbox: Any, root: str = "/testbed") -> None:
        self.sandbox = sandbox
        self.root = root.rstrip("/") or "/"

    def _inside(self, path: str) -> bool:
        return path == self.root or path.startswith(self.root + "/")

    def resolve(self, path: str) -> str:
        """The absolute, symlink-free path of ``path``; refused when outside the root."""
        if "\x00" in path:
            raise EditorRefusal("paths cannot contain NUL characters")
        joined = posixpath.normpath(posixpath.join(self.root, path.strip()))
        if not self._inside(joined):
            raise EditorRefusal(f"{path} is outside the repository {self.root}")
        code, output = self.sandbox.exec(f"realpath -m -- {shlex.quote(joined)}", 30)
        real = output.strip()
        if code != 0 or not self._inside(real):
            raise EditorRefusal(f"{path} resolves outside the repository {self.root}")
        if real == f"{self.root}/.git" or real.startswith(f"{self.root}/.git/"):
            raise EditorRefusal("the editor does not touch the .git directory")
        return real

    def run(self, args: dict[str, Any]) -> EditResult:
        path = self.resolve(args["path"])
        return getattr(self, f"_{args['command']}")(path, args)

    def _kind(self, path: str) -> str:
        quoted = shlex.quote(path)
        _, output = self.sandbox.exec(
            f"if [ -d {quoted} ]; then echo dir; elif [ -e {quoted} ]; then echo file; "
            "else echo none; fi",
            30,
        )
        return output.strip()

    def _view(self, path: str, args: dict[str, Any]) -> EditResult:
        kind = self._kind(path)
        if kind == "none":
            return EditResult(False, f"{path} does not exist")
        if kind == "dir":
            code, output = self.sandbox.exec(
                f"find {shlex.quote(path)} -maxdepth 2 -not -path '*/.git*' | sort "
                f"| head -n {VIEW_LINES}",
                30,
            )
            return EditResult(code == 0, output)
        lines = self.sandbox.read_file(path).splitlines()
        start, end = args.get("view_range", [1, -1])
        end = len(lines) if end == -1 else end
        if not 1 <= start <= max(end, 1) or end > len(lines):
            return EditResult(False, f"view_range {[start, end]} is outside 1..{len(lines)}")
        end = min(end, start + VIEW_LINES - 1)
        numbered = [f"{n:6}\t{lines[n - 1]}" for n in range(start, end + 1)]
        return EditResult(True, "\n".join(numbered))

    def _create(self, path: str, args: dict[str, Any]) -> EditResult:
        if self._kind(path) != "none":
            return EditResult(False, f"{path} already exists; use str_replace or insert on it")
        self.sandbox.write_file(path, args["file_text"])
        return EditResult(True, f"created {path}")

    def _existing_text(self, path: str) -> str | None:
        return self.sandbox.read_file(path) if self._kind(path) == "file" else None

    def _str_replace(self, path: str, args: dict[str, Any]) -> EditResult:
        text = self._existing_text(path)
        if text is None:
            return EditResult(False, f"{path} is not a file")
        old, new = args["old_str"], args.get("new_str", "")
        count = text.count(old) if old else 0
        if count != 1:
            found = "does not occur" if count == 0 else f"occurs {count} times"
            return EditResult(False, f"old_str {found} in {path}; it must occur exactly once")
        self.sandbox.write_file(path, text.replace(old, new))
        line = text[: text.index(old)].count("\n") + 1
        return EditResult(True, f"replaced 1 occurrence in {path} at line {line}")

    def _insert(self, path: str, args: dict[str, Any]) -> EditResult:
        text = self._existing_text(path)
        if text is None:
            return EditResult(False, f"{path} is not a file")
        lines = text.split("\n")
        # A final newline leaves an empty last item, which is not a line one can insert after.
        count = len(lines) - 1 if text.endswith("\n") else len(lines)
        at = args["insert_line"]
        if not 0 <= at <= count:
            return EditResult(False, f"insert_line {at} is outside 0..{count}")
        new_lines = args["new_str"].split("\n")
        self.sandbox.write_file(path, "\n".join([*lines[:at], *new_lines, *lines[at:]]))
        return EditResult(True, f"inserted {len(new_lines)} line(s) after line {at} of {path}")
