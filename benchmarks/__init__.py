"""The benchmark harness: run policies on env suites, write results, reports and plots.

Entry points: :func:`benchmarks.runner.run_bench` (play a suite), :func:`benchmarks.results.
build_results` (aggregate), :func:`benchmarks.report.write_report` (markdown, HTML, PNG),
:mod:`benchmarks.compare` (diff two runs), :mod:`benchmarks.perf.table` (the perf table).
The ``aem bench`` command (``aem_cli/bench.py``) strings them together.
"""
