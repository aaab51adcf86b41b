"""Render the report's HTML templates, each page self-contained with the one shared style.

Why one style file inlined into every page: the report and the episode pages are opened from
disk, one at a time, with no server, so each carries its CSS; keeping it in ``style.css``
makes them look alike and gives the look one place to change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aem_envs.core.errors import require

HERE = Path(__file__).parent


def render(template: str, **context: Any) -> str:
    """``template`` (a file name in this folder) rendered with ``context`` and the style."""
    jinja2 = require("bench", "jinja2", feature="the HTML benchmark report")
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE), autoescape=True, keep_trailing_newline=True
    )
    style = (HERE / "style.css").read_text(encoding="utf-8")
    return environment.get_template(template).render(style=style, **context)
