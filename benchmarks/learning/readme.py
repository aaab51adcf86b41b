"""The small-agent grid's blocks in README.md ("Does it learn?") and docs/results.md, written
from the committed ``results.json`` alone.

Why generated: the grid advances over days and sessions; each time its results are
committed, ``python -m benchmarks.learning.readme`` rewrites the text between the markers, and
a test checks the committed pages equal what this module makes of the committed results, so a
page quoting a stale grid fails CI. ``--check`` says which pages are stale without writing.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from aem_envs.core.errors import DataError
from aem_envs.core.io import atomic_write_text
from benchmarks.learning.collect import load_results
from benchmarks.learning.paper import paper_markdown, reading, start_text
from benchmarks.learning.report import LEARNING_ALT, LEARNING_PNG, PLOTS_DIR, cost_table, hours

ROOT = Path(__file__).resolve().parents[2]
#: The grid the blocks quote, relative to the repository root.
RESULTS_DIR = "benchmarks/learning/results/alfworld-small"
CONFIG = "benchmarks/learning/configs/alfworld-small.yaml"
BEGIN = "<!-- small-agent grid: begin (python -m benchmarks.learning.readme writes this block) -->"
END = "<!-- small-agent grid: end -->"
COMMANDS = (
    "bash benchmarks/learning/configs/alfworld-small-start.sh   # the SFT start alone",
    "bash benchmarks/learning/configs/alfworld-small-grid.sh    # start, every run, resumably",
    f"aem bench learning {CONFIG} \\\n    --out {RESULTS_DIR} --status  # where it stands",
    f"aem bench learning {CONFIG} \\\n    --out {RESULTS_DIR} --carry  # before a session ends",
)


def setting(results: Mapping[str, Any], docs: str = "docs/") -> str:
    """What the grid trains and how its held-out success is scored; ``docs``: the docs
    folder relative to the page."""
    config, start = results["config"], results.get("start") or {}
    train = config["train"]
    batch, group = train["per_device_train_batch_size"], train["num_generations"]
    seeds = config["seeds"]
    sampled = results.get("start_sampled")
    scorings = f"greedy (the runs' own pass over all {config['eval_episodes']} games)" + (
        f" and sampled ({sampled['episodes']} episodes: a standard error of at most "
        f"{50 / sampled['episodes'] ** 0.5:.1f} points)"
        if sampled
        else ""
    )
    return (
        f"A {start.get('parameters', 0) / 1e6:.1f}M-parameter agent trained from scratch "
        f"([{docs}small-agent.md]({docs}small-agent.md)), RL from its SFT start on bundled "
        f"ALFWorld: {batch // group} groups × {group} episodes per step, "
        f"{train['max_turns']}-step episodes, {train['max_steps']} steps, seeds "
        f"{seeds[0]}–{seeds[-1]}. Final success on the `{config['eval_split']}` games, "
        f"{scorings}; mean ± std over finished seeds (%), each seed, and the paired "
        "difference seed by seed:"
    )


def cost_line(results: Mapping[str, Any]) -> str:
    """The grid's hours so far, from what its runs recorded."""
    cost, runs = results["cost"], results["runs"]
    done = sum(r["status"] == "done" for r in runs)
    line = f"Cost so far ({done}/{len(runs)} runs done, {_count(cost['steps_timed'], 'step')}): "
    if cost["wall_s"] is not None:
        line += (
            f"{hours(cost['wall_s'])} h of wall time and {hours(cost['cpu_s'])} CPU h in the "
            f"training processes of the {cost['cpu_runs']} runs that recorded them, one shared "
            f"core each (TRL's `step_time` counts {hours(cost['step_s'])} h of training steps, "
            f"held-out passes {hours(cost['heldout_s'])} h)"
        )
    else:
        line += (
            f"{hours(cost['step_s'])} h of training steps by TRL's `step_time` and "
            f"{hours(cost['heldout_s'])} h of held-out passes"
        )
    if cost["sampled_passes"]:
        passes = _count(cost["sampled_passes"], "sampled pass", "sampled passes")
        line += (
            f", and {hours(cost['sampled_episode_s'])} episode-hours in {passes} (the start's "
            "included)"
        )
    return line + "."


def _count(n: int, noun: str, plural: str = "") -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def _wrap(text: str) -> str:
    """A prose paragraph wrapped as the pages are (links, code spans, and a number with its
    unit kept whole)."""
    kept = re.sub(r"`[^`]*`", lambda span: span.group().replace(" ", "\0"), text)
    kept = re.sub(r"(\d) (h|%)(?=[\s,.;)]|$)", "\\1\0\\2", kept)
    wrapped = textwrap.fill(kept, width=99, break_long_words=False, break_on_hyphens=False)
    return wrapped.replace("\0", " ")


def readme_block(results: Mapping[str, Any]) -> str:
    """The front page's block: the paper's table, the reading, the curves, cost, commands."""
    table = results["paper"]
    return "\n".join(
        [
            "### The small agent at the paper's batch shape",
            "",
            _wrap(setting(results)),
            "",
            paper_markdown(table),
            _wrap(
                f"The start: {start_text(table)}. {reading(table)} {cost_line(results)} The start "
                "and every run rebuild, resumably, with `bash benchmarks/learning/configs/"
                "alfworld-small-grid.sh`; per-run costs, curves and the other commands: "
                "[docs/results.md](docs/results.md#the-small-agent-grid)."
            ),
            "",
            f"![{LEARNING_ALT}]({RESULTS_DIR}/{PLOTS_DIR}/{LEARNING_PNG})",
        ]
    )


def results_block(results: Mapping[str, Any]) -> str:
    """docs/results.md's block: the table, the curves, every run's cost, the commands."""
    table = results["paper"]
    return "\n".join(
        [
            "## The small-agent grid",
            "",
            _wrap(setting(results, docs="")),
            "",
            paper_markdown(table),
            _wrap(
                f"The start: {start_text(table)}. {reading(table)} Unfinished runs are never in "
                "the means; the report, with every curve, is "
                f"[`{RESULTS_DIR}/report.md`](../{RESULTS_DIR}/report.md)."
            ),
            "",
            f"![{LEARNING_ALT}](../{RESULTS_DIR}/{PLOTS_DIR}/{LEARNING_PNG})",
            "",
            _wrap(cost_line(results)),
            "",
            cost_table(results),
            "Rebuild the start and every run (resumable: rerun after anything stops), then the",
            "blocks quoting them here and in the README:",
            "",
            "```bash",
            *COMMANDS,
            "python -m benchmarks.learning.readme",
            "```",
        ]
    )


#: Page (relative to the repository root) → its block's maker.
PAGES: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "README.md": readme_block,
    "docs/results.md": results_block,
}


def with_block(text: str, block: str, page: str) -> str:
    """``text`` with what lies between its markers replaced by ``block``."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise DataError(f"{page}: needs one {BEGIN!r} line and, after it, one {END!r} line")
    head, rest = text.split(BEGIN, 1)
    return f"{head}{BEGIN}\n{block.rstrip()}\n{END}{rest.split(END, 1)[1]}"


def stale_pages(root: Path = ROOT, *, write: bool = False) -> list[str]:
    """The pages whose block differs from what the committed results make; ``write``: fix
    them (atomically)."""
    results = load_results(root / RESULTS_DIR)
    if not results.get("paper"):
        raise DataError(
            f"{RESULTS_DIR}/results.json has no paper table; rewrite it with "
            f"`aem bench learning {CONFIG} --out {RESULTS_DIR} --status`"
        )
    stale = []
    for page, make in PAGES.items():
        text = (root / page).read_text(encoding="utf-8")
        fresh = with_block(text, make(results), page)
        if fresh != text:
            stale.append(page)
            if write:
                atomic_write_text(root / page, fresh)
    return stale


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.learning.readme",
        description=f"rewrite the small-agent grid's blocks in {', '.join(PAGES)} from "
        f"{RESULTS_DIR}/results.json",
    )
    parser.add_argument("--check", action="store_true", help="list stale pages, write nothing")
    args = parser.parse_args(argv)
    stale = stale_pages(ROOT, write=not args.check)
    for page in stale:
        print(f"{page}: {'stale' if args.check else 'rewritten'}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
