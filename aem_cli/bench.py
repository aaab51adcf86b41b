"""``aem bench``: run policies on a suite and write results and a report; ``compare``; ``perf``.

aem bench --suite quick --policy expert --policy smollm2
aem bench --suite quick --policy expert --ray        # envs in Ray actors, local Ray
aem bench compare runs/before runs/after
aem bench perf --quick
aem bench learning benchmarks/learning/configs/mechanism.yaml --out DIR
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from aem_cli.arguments import policy_spec, positive_int
from aem_cli.run_flags import add_ray_flag
from aem_envs.core.errors import AEMError

DEFAULT_OUT = Path("bench-runs")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="benchmark policies on env suites; write results.json and a report",
        description="Play every task of a suite with each policy, then write results.json, "
        "report.md, report.html and plots into the run folder. A rerun into the same folder "
        "skips finished episodes.",
    )
    parser.add_argument(
        "--suite",
        default="quick",
        help="quick, full, alfworld-real, swebench-verified, or a suite YAML path (default: quick)",
    )
    parser.add_argument(
        "--policy",
        action="append",
        dest="policies",
        type=policy_spec,
        metavar="SPEC",
        help="expert, random, smollm2, aem-ref, hf:<path>, openai:<model>@<base_url>; repeatable "
        "(default: expert)",
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=min(4, os.cpu_count() or 1),
        help="processes playing expert/random episodes in parallel (default: min(4, cores))",
    )
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=8,
        help="episodes a model policy plays side by side, one batched call per turn (default: 8)",
    )
    parser.add_argument("--out", type=Path, help=f"run folder (default: {DEFAULT_OUT}/<suite>)")
    parser.add_argument("--limit", type=positive_int, help="play at most N tasks of each env")
    parser.add_argument(
        "--resume",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="skip episodes already finished in the run folder (default: on)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_ray_flag(parser)
    parser.set_defaults(func=run)

    commands = parser.add_subparsers(dest="bench_command", metavar="{compare,perf,learning}")
    compare = commands.add_parser("compare", help="diff two runs per env and task type")
    compare.add_argument("a", type=Path, help="run folder or results.json (before)")
    compare.add_argument("b", type=Path, help="run folder or results.json (after)")
    compare.set_defaults(func=run_compare)

    from benchmarks.perf.table import MODULES as PERF_MODULES

    perf = commands.add_parser("perf", help="measure env and trainer speed; write one table")
    perf.add_argument("--quick", action="store_true", help="short measurements (CI)")
    perf.add_argument("--out", type=Path, default=DEFAULT_OUT / "perf", help="output folder")
    perf.add_argument(
        "--only",
        action="append",
        choices=PERF_MODULES,
        metavar="NAME",
        help=f"measure only this benchmark (repeatable): {', '.join(PERF_MODULES)}",
    )
    perf.set_defaults(func=run_perf)

    learning = commands.add_parser(
        "learning",
        help="train AEM and GRPO over seeds from one start; held-out curves and a report",
    )
    learning.add_argument("config", help="experiment YAML (e.g. benchmarks/learning/configs/...)")
    learning.add_argument("--out", type=Path, help="output folder (default: bench-runs/<name>)")
    learning.add_argument(
        "--run",
        action="append",
        default=[],
        metavar="NAME",
        help="train only this run of the grid (repeatable, e.g. aem-seed0): several processes "
        "or machines sharing --out each take their runs; the report covers every run done",
    )
    learning.add_argument(
        "--status",
        action="store_true",
        help="say which runs are done, running, stopped (and where each resumes) or waiting, "
        "and rewrite results.json and the report from the runs done; train nothing",
    )
    learning.add_argument(
        "--training-only",
        action="store_true",
        help="with --status: leave the held-out scores out of what it prints (the reports it "
        "rewrites keep them), for choosing settings on training metrics only",
    )
    learning.add_argument(
        "--carry",
        action="store_true",
        help="copy each unfinished run's newest checkpoint into its folder's carried/, to "
        "commit with its metrics: a run resumes from it on a machine without its checkpoints; "
        "train nothing",
    )
    learning.add_argument(
        "--report-only",
        action="store_true",
        help="regenerate report.md, report.html and plots from results.json; train nothing",
    )
    learning.set_defaults(func=run_learning)


def run(args: argparse.Namespace) -> int:
    from benchmarks.report import write_report
    from benchmarks.results import build_results, write_results
    from benchmarks.runner import policy_source, run_bench
    from benchmarks.suite import load_suite
    from benchmarks.summary import summary_lines

    suite = load_suite(args.suite)
    specs = list(dict.fromkeys(args.policies or ["expert"]))
    sources = [policy_source(spec, suite.kwargs_for(spec)) for spec in specs]
    out = args.out or DEFAULT_OUT / suite.name
    if out.exists() and not out.is_dir():
        raise AEMError(f"--out {out} is a file; give a run folder (new or an earlier run's)")
    bench = run_bench(
        suite,
        sources,
        out,
        workers=args.workers,
        batch_size=args.batch_size,
        limit=args.limit,
        resume=args.resume,
        progress=not args.no_progress,
        ray_address=args.ray,
    )
    if not bench.records:
        raise AEMError(
            f"no episode finished ({len(bench.errors)} failed; first: "
            f"{bench.errors[0]['error'] if bench.errors else 'none planned'})"
        )
    results = build_results(
        suite,
        [(s.name, s.model) for s in sources],
        bench.records,
        errors=bench.errors,
        planned=len(bench.jobs),
        settings={
            "workers": args.workers,
            "batch_size": args.batch_size,
            "limit": args.limit,
            "resume": args.resume,
            "ray": args.ray,
        },
    )
    results_path = write_results(out, results)
    report = write_report(out, results)
    print("\n".join(summary_lines(results)))
    print(
        f"played {bench.played - len(bench.errors)} episodes, reused {bench.skipped}, "
        f"failed {len(bench.errors)}"
    )
    print(f"results: {results_path}")
    print(f"report:  {report['html']}")
    print(f"         {report['markdown']}")
    return 1 if bench.errors else 0


def run_compare(args: argparse.Namespace) -> int:
    from benchmarks.compare import compare, format_comparison
    from benchmarks.results import load_results

    a, b = load_results(args.a), load_results(args.b)
    print(format_comparison(compare(a, b), str(args.a), str(args.b)), end="")
    return 0


def run_perf(args: argparse.Namespace) -> int:
    from benchmarks.perf.table import write_table

    paths = write_table(args.out, quick=args.quick, modules=args.only)
    print(paths["markdown"].read_text(encoding="utf-8"), end="")
    print(f"table: {paths['markdown']}\n       {paths['json']}")
    return 0


def run_learning(args: argparse.Namespace) -> int:
    from benchmarks.learning.collect import load_results
    from benchmarks.learning.config import load_config
    from benchmarks.learning.grid import run_grid
    from benchmarks.learning.report import final_table, remaining_line, write_report

    if args.training_only and not args.status:
        raise AEMError("--training-only shapes what --status prints: add --status")
    config = load_config(args.config)
    out = args.out or DEFAULT_OUT / config.name
    if args.carry:
        from benchmarks.learning.carry import carry

        if args.status or args.run or args.report_only:
            raise AEMError("--carry copies checkpoints and does nothing else: run it alone")
        if not out.is_dir():
            raise AEMError(f"--out {out} holds no grid yet: there is nothing to carry")
        print("\n".join(carry(out)) or "no unfinished run has a checkpoint: nothing to carry")
        return 0
    if args.status:
        from benchmarks.learning.collect import write_results
        from benchmarks.learning.status import format_status, run_status, start_status

        if not out.is_dir():
            raise AEMError(f"--out {out} holds no grid yet; start it without --status")
        heldout = not args.training_only
        print(start_status(out, heldout=heldout))
        statuses = run_status(config, out)
        print(format_status(statuses, config.train.get("max_steps"), heldout=heldout), end="")
        results = write_results(out, config)
        paths = write_report(out, results)
        print(remaining_line(results) or "", f"results: {out / 'results.json'}",
              f"report:  {paths['markdown']}", sep="\n")  # fmt: skip
        return 0
    results = load_results(out) if args.report_only else run_grid(config, out, only=args.run)
    paths = write_report(out, results)
    print(final_table(results), end="")
    print(f"results: {out / 'results.json'}\nreport:  {paths['markdown']}")
    return 0
