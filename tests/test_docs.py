"""The project's docs hold together: every cited docs page exists, every relative link resolves.

Citations are paths of the form ``docs/<name>.md`` in the repository's Python, Markdown and
YAML files; links are Markdown links in ``docs/*.md`` and ``README.md`` (outside code blocks
and inline code), checked down to the heading anchor.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUFFIXES = (".py", ".md", ".yaml", ".yml")
#: Folders never scanned: tooling, caches and local run outputs (the last ones at the top only).
SKIP_ANYWHERE = {"__pycache__", "node_modules"}
SKIP_AT_TOP = {"build", "dist", "runs", "bench-runs"}

CITATION = re.compile(r"(?<![\w./-])docs/[\w./-]+\.md\b")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`+[^`]*`+")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def _source_files() -> Iterator[Path]:
    for folder, dirs, files in os.walk(ROOT):
        here = Path(folder)
        dirs[:] = [
            d
            for d in dirs
            if not d.startswith(".")
            and d not in SKIP_ANYWHERE
            and not d.endswith(".egg-info")
            and not (here == ROOT and d in SKIP_AT_TOP)
        ]
        for name in files:
            if name.endswith(SUFFIXES):
                yield here / name


def _prose_lines(text: str) -> Iterator[str]:
    """Lines outside fenced code blocks, with inline code removed."""
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield INLINE_CODE.sub("", line)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            slug = _slug(match.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _broken_link(page: Path, target: str) -> str | None:
    """Why ``target`` (a link on ``page``) does not resolve, or None when it does."""
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
        return None  # http:, https:, mailto: ...: not a file of the repository
    path_part, _, anchor = target.partition("#")
    resolved = (page.parent / path_part).resolve() if path_part else page
    if not resolved.exists():
        return f"{path_part} does not exist"
    if anchor and resolved.suffix == ".md" and anchor.lower() not in _anchors(resolved):
        return f"{resolved.name} has no heading with anchor #{anchor}"
    return None


def test_every_cited_docs_page_exists() -> None:
    missing = []
    for path in _source_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for cited in CITATION.findall(line):
                if not (ROOT / cited).is_file():
                    missing.append(f"{path.relative_to(ROOT)}:{number}: {cited}")
    assert not missing, "cited docs pages that do not exist:\n" + "\n".join(missing)


def test_docs_folder_has_the_pages_the_project_cites() -> None:
    names = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert {"architecture.md", "envs.md", "sandboxes.md", "aem.md", "toolchain.md"} <= names
    # The README's detail lives here; its front page links each of them.
    moved = {"swe.md", "benchmarks.md", "training.md", "results.md", "mechanism.md"}
    moved |= {"models.md", "performance.md", "scaling.md", "credit.md"}
    assert moved <= names
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    unlinked = sorted(n for n in names if f"(docs/{n})" not in readme)
    assert not unlinked, f"docs pages the README does not link: {unlinked}"


def test_relative_links_in_docs_and_readme_resolve() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for line in _prose_lines(page.read_text(encoding="utf-8")):
            for target in LINK.findall(line):
                reason = _broken_link(page, target)
                if reason:
                    broken.append(f"{page.relative_to(ROOT)}: ({target}): {reason}")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_link_checker_catches_a_broken_file_and_anchor(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A title\n\n## Vector envs\n")
    assert _broken_link(page, "#vector-envs") is None
    assert _broken_link(page, "page.md#a-title") is None
    assert _broken_link(page, "https://example.org/x.md") is None
    assert "does not exist" in (_broken_link(page, "missing.md") or "")
    assert "no heading" in (_broken_link(page, "page.md#no-such-part") or "")
    assert CITATION.findall("see docs/envs.md and shared/docs/x.md") == ["docs/envs.md"]
