#!/usr/bin/env bash
# The GPU check of the learning harness: GRPO and AEM on the bundled SmolLM2-135M at the
# paper's batch shape (16 groups × 8 episodes per step) on bundled ALFWorld, scored on
# valid_unseen, with the same report as every learning experiment (report.md, results.json,
# plots/). Needs one CUDA GPU and only this repository plus what scripts/install.sh installs;
# nothing is downloaded. Bounded to 8 minutes: a run cut off by the bound resumes from its
# newest checkpoint when the script is run again with the same OUT.
#
#   bash benchmarks/learning/gpu_check.sh [OUT]      # default OUT: runs/gpu-check
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:-runs/gpu-check}"
PY="${PYTHON:-.venv/bin/python}"
LIMIT_S="${AEM_GPU_CHECK_LIMIT_S:-480}"

if [ ! -x "$PY" ]; then
    echo "gpu_check: $PY not found; run 'bash scripts/install.sh' first (or set PYTHON=)" >&2
    exit 2
fi
if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "gpu_check: no CUDA GPU visible to torch; this check is for a machine with one" \
        "(the CPU experiments are in benchmarks/learning/configs/mechanism.yaml)" >&2
    exit 2
fi
"$PY" -c 'import torch; p = torch.cuda.get_device_properties(0); print(f"gpu_check: {p.name}, {p.total_memory / 2**30:.0f} GiB")'

started=$(date +%s)
status=0
timeout --signal=INT --kill-after=30 "$LIMIT_S" \
    "$PY" -m aem_cli bench learning benchmarks/learning/configs/gpu-check.yaml --out "$OUT" \
    || status=$?
echo "gpu_check: $(( $(date +%s) - started )) s wall, exit status $status"
if [ "$status" -eq 124 ] || [ "$status" -eq 130 ]; then
    echo "gpu_check: stopped at the ${LIMIT_S} s bound; what finished is reported below," \
        "run again with the same OUT to resume" >&2
    "$PY" -m aem_cli bench learning benchmarks/learning/configs/gpu-check.yaml --out "$OUT" \
        --report-only || true
fi
[ -f "$OUT/report.md" ] && echo "gpu_check: report in $OUT/report.md"
exit "$status"
