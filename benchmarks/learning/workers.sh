#!/usr/bin/env bash
# Run a learning grid as N niced background workers sharing one output folder, each taking
# every N-th run in the grid's order (seeds outermost, so paired runs finish together).
# Resumable: run it again with the same arguments; finished runs are skipped and a killed run
# resumes from its last checkpoint. The start checkpoint and the task check are made first,
# by one process, so the workers never build them at the same time.
#
#   bash benchmarks/learning/workers.sh CONFIG OUT [N]      (N defaults to 2)
#   tail -f "${LOG_DIR:-/tmp/aem-grid-logs}"/worker-*.log
set -euo pipefail
config=${1:?usage: workers.sh CONFIG OUT [N]}
out=${2:?usage: workers.sh CONFIG OUT [N]}
workers=${3:-2}
python=${PYTHON:-python}
logs=${LOG_DIR:-/tmp/aem-grid-logs}
mkdir -p "$out" "$logs"
names=$("$python" -c '
import sys
from benchmarks.learning.config import load_config
print(" ".join(name for *_, name in load_config(sys.argv[1]).run_names()))' "$config")
read -r -a runs <<< "$names"
# The start and the task check: run_grid makes them before any run; --run with the first run.
nice -n 15 "$python" -m aem_cli bench learning "$config" --out "$out" --run "${runs[0]}" \
    > "$logs/start.log" 2>&1
for ((w = 0; w < workers; w++)); do
    args=()
    for ((i = w; i < ${#runs[@]}; i += workers)); do args+=(--run "${runs[$i]}"); done
    setsid nohup nice -n 15 "$python" -m aem_cli bench learning "$config" --out "$out" \
        "${args[@]}" > "$logs/worker-$w.log" 2>&1 &
    echo "worker $w: pid $!, $((${#args[@]} / 2)) runs, log $logs/worker-$w.log"
done
