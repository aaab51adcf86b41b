"""WebShop speed and memory: text steps, searches and RSS at 10k and 100k products, and browser
steps, each beside a naive baseline run in the same script.

The baseline is rank-bm25 (``BM25Okapi``, pure Python) over the same tokenized documents,
plugged into the same site: it is what a straightforward port of WebShop's search without Java
looks like (rows leave it out where rank-bm25 is not installed). pyserini (the original's
Lucene) needs a JVM and is not installed here.

Each catalog size runs in a fresh interpreter so that its RSS is its own. Targets (issue 4):
text step p50 ≤ 5 ms and search p50 ≤ 2 ms at 100k products, RSS ≤ 1 GB, browser step p50
≤ 0.15 s. ``ratio`` is baseline ÷ ours (how many times faster ours is).

Run ``python -m benchmarks.perf.webshop [--quick]``; ``aem bench perf`` gathers the rows.
"""

from __future__ import annotations

import functools
import gc
import importlib.util
import multiprocessing
import resource
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.perf import perf_main, perf_row

BENCHMARK = "webshop"
SIZES = (10_000, 100_000)
#: Goals generated for the 100k catalog (the 10k one is the bundled catalog).
LARGE_GOALS = 2_000
LARGE_SEED = 7


class NaiveEngine:
    """rank-bm25 over the same documents, with :class:`SearchEngine`'s ``search`` interface."""

    def __init__(self, catalog: Any) -> None:
        from rank_bm25 import BM25Okapi

        from aem_envs.webshop.search import document_text, tokenize

        self.asins = tuple(p.asin for p in catalog.products)
        self._tokenize = tokenize
        self._bm25 = BM25Okapi([tokenize(document_text(p)) or [""] for p in catalog.products])

    def search(self, query: str, k: int = 50) -> list[str]:
        scores = self._bm25.get_scores(self._tokenize(query))
        top = np.argsort(-scores, kind="stable")[:k]
        return [self.asins[i] for i in top if scores[i] > 0]


def _rss_mb() -> float:
    """Current resident memory of this process (Linux), else its peak."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def percentiles(seconds: Sequence[float]) -> tuple[float, float]:
    values = np.asarray(seconds) * 1000
    return float(np.percentile(values, 50)), float(np.percentile(values, 95))


class Clock:
    """Wall and CPU seconds per call: on a shared machine wall time includes waiting for a
    core, so the CPU time tells what the code itself costs."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def time(self, call: Callable[[], Any]) -> Any:
        wall, cpu = time.perf_counter(), time.thread_time()
        result = call()
        self.cpu.append(time.thread_time() - cpu)
        self.wall.append(time.perf_counter() - wall)
        return result


def timed(calls: Sequence[Callable[[], Any]]) -> Clock:
    clock = Clock()
    for call in calls:
        clock.time(call)
    return clock


def expert_steps(env: Any, goal_ids: Sequence[str], split: str) -> Clock:
    """Times of ``env.step`` over expert episodes (the expert's planning is not timed)."""
    clock = Clock()
    for goal_id in goal_ids:
        env.reset(options={"split": split, "task_id": goal_id})
        for _ in range(env.max_steps):
            action = env.expert_action()
            *_, terminated, truncated, _ = clock.time(functools.partial(env.step, action))
            if terminated or truncated:
                break
    return clock


def catalog_dir(size: int) -> Path | None:
    """Folder of the generated ``size``-product catalog in the original format (None: bundled).

    Why files: a large catalog reaches users as files (``data_dir=``), and loading it in a
    fresh process measures the RSS a user gets, not the generator's.
    """
    if size == SIZES[0]:
        return None
    from sandboxes.cache import aem_cache_root

    return aem_cache_root() / "webshop" / f"generated-{size}-{LARGE_GOALS}-{LARGE_SEED}"


def prepare(size: int) -> None:
    """Write the generated catalog once (the manifest, written last, marks it complete)."""
    folder = catalog_dir(size)
    if folder is None or (folder / "manifest.json").is_file():
        return
    from aem_envs.webshop.generate.build import write_catalog

    write_catalog(size, LARGE_GOALS, LARGE_SEED, folder, compress=False)


def measure_size(size: int, quick: bool) -> dict[str, Any]:
    """Text-mode numbers for one catalog size (run in its own process by :func:`measure`)."""
    from aem_envs.webshop.env import WebShopEnv

    env = WebShopEnv(data_dir=catalog_dir(size))
    catalog = env.catalog
    split = "test"
    goal_ids = list(env.task_ids(split))[: 10 if quick else 50]
    env.site.engine  # noqa: B018 - load (or build and cache) the index before timing
    steps = expert_steps(env, goal_ids, split)
    queries = [catalog.goals_by_id[g].instruction for g in env.task_ids(split)[:200]]
    searches = timed([functools.partial(env.site.engine.search, q) for q in queries])
    gc.collect()
    rss = _rss_mb()

    got: dict[str, Any] = {
        "step": percentiles(steps.wall),
        "step_cpu": percentiles(steps.cpu),
        "search": percentiles(searches.wall),
        "search_cpu": percentiles(searches.cpu),
        "rss_mb": rss,
        "naive_step": (None, None),
        "naive_search": (None, None),
    }
    if importlib.util.find_spec("rank_bm25") is None:
        return got
    naive = NaiveEngine(catalog)
    few = 3 if quick else 10
    naive_searches = timed([functools.partial(naive.search, q) for q in queries[:few]])
    env.site._engine = naive  # type: ignore[assignment]  # the same site on the naive engine
    naive_steps = expert_steps(env, goal_ids[: max(1, few // 3)], split)
    got["naive_step"] = percentiles(naive_steps.wall)
    got["naive_search"] = percentiles(naive_searches.wall)
    return got


def measure_browser(quick: bool) -> dict[str, Any]:
    from aem_envs.webshop.browser import WebShopBrowserEnv

    env = WebShopBrowserEnv()
    try:
        goal_ids = list(env.task_ids("test"))[: 2 if quick else 6]
        env.reset(options={"split": "test", "task_id": goal_ids[0]})  # start the browser
        steps = expert_steps(env, goal_ids, "test")
    finally:
        env.close()
    return {"step": percentiles(steps.wall), "step_cpu": percentiles(steps.cpu)}


def in_subprocess(function: Callable[..., Any], *args: Any) -> Any:
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(function, *args).result()


_row = functools.partial(perf_row, BENCHMARK, digits=3)


def measure(quick: bool = False) -> list[dict[str, Any]]:
    """Rows for ``aem bench perf``; ``quick`` runs the 10k catalog and fewer episodes."""
    rows: list[dict[str, Any]] = []
    for size in SIZES[:1] if quick else SIZES:
        in_subprocess(prepare, size)
        got = in_subprocess(measure_size, size, quick)
        label = f"{size // 1000}k products"
        baseline_note = "baseline: rank-bm25 search in the same site"
        if got["naive_search"][0] is None:
            baseline_note = "baseline not run: pip install rank-bm25==0.2.2"
        for name, key, target in (("text step", "step", 5.0), ("search", "search", 2.0)):
            for i, pct in enumerate(("p50", "p95")):
                note = f"{baseline_note}; CPU {pct} {got[f'{key}_cpu'][i]:.2f} ms"
                if pct == "p50" and size == SIZES[-1]:
                    note += f"; target ≤ {target:g} ms"
                rows.append(
                    _row(f"{name} {pct}, {label}", got[key][i], got[f"naive_{key}"][i], "ms", note)
                )
        rss_note = "text env with its catalog and index loaded; target ≤ 1024 MB at 100k"
        rows.append(_row(f"RSS, {label}", got["rss_mb"], None, "MB", rss_note))
    browser = in_subprocess(measure_browser, quick)
    for i, pct in enumerate(("p50", "p95")):
        note = (
            "headless Chromium via Selenium, page load included; this process's CPU "
            f"{browser['step_cpu'][i]:.1f} ms; target p50 ≤ 0.15 s"
        )
        metric = f"browser step {pct}, 10k products"
        rows.append(_row(metric, browser["step"][i] / 1000, None, "s", note))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    return perf_main(measure, __doc__, "10k products, fewer episodes", argv)


if __name__ == "__main__":
    raise SystemExit(main())
