"""Markdown pipe tables: the one place aem's reports and commands write them.

Why a module of its own: every report, status table and analysis command prints the same
pipe-table markup, and a module without dependencies can be imported by any of them without
loading the report writer (plots, HTML).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def pipe_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A pipe table of already formatted cells, one line per row, no trailing newline. Cells
    are written as given: a caller whose cells may hold ``|`` escapes them."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])
