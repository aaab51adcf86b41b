#!/usr/bin/env bash
# The small-agent grid (alfworld-small.yaml), all of it, resumably: the SFT start
# (alfworld-small-start.sh), a gate on its train-split success, then two processes, one per
# arm (GRPO: seeds 0, 1, 2 in turn; AEM likewise), and after each run its sampled held-out score
# (benchmarks/suites/small-agent-unseen.yaml; the start's first, in the AEM process). Once
# both have ended, DAPO and DAPO+AEM the same way, then GSPO and GSPO+AEM. Rerun the same
# command after anything stops: finished pieces are skipped, a killed run resumes from its
# newest checkpoint, and no later pair starts while an earlier one has a lane that failed.
# The grid's start/ is committed once built, so a fresh clone skips the SFT; before a session
# ends, `aem bench learning CONFIG --out OUT --carry` copies each unfinished run's newest
# checkpoint into its carried/ to commit, and the rerun on another machine resumes from it.
# Where it stands: aem bench learning CONFIG --out OUT --status
# Usage: bash benchmarks/learning/configs/alfworld-small-grid.sh [OUT] (default
# benchmarks/learning/results/alfworld-small; the start goes to runs/small-start).
set -euo pipefail
OUT=${1:-benchmarks/learning/results/alfworld-small}
START=runs/small-start  # alfworld-small.yaml's model.path is $START/act
CONFIG=benchmarks/learning/configs/alfworld-small.yaml
PYTHON=${PYTHON:-python}
AEM="$PYTHON -m aem_cli"
export PYTHON OMP_NUM_THREADS=1
#: The least train-split success (small-agent-train suite) the start must reach: a rule fixed
#: before any RL result, on train games only.
MIN_TRAIN_SUCCESS=20

if [[ ! -f $OUT/start/model.safetensors ]]; then  # committed once built: a fresh clone has it
    bash benchmarks/learning/configs/alfworld-small-start.sh "$START"
    success=$($PYTHON -c "import json,sys; print(json.load(open(sys.argv[1]))['summary'][0]['success_rate'])" \
        "$START/train-success/results.json")
    if ! $PYTHON -c "import sys; sys.exit(float(sys.argv[1]) < $MIN_TRAIN_SUCCESS)" "$success"; then
        echo "the start wins $success % of train games (< $MIN_TRAIN_SUCCESS %): improve it first" >&2
        exit 3
    fi
fi
mkdir -p "$OUT/logs"

sampled() {  # sampled held-out score of one model folder, into $OUT/sampled/NAME
    # a pass the report reads as finished (collect.read_sampled) is done: its episodes are
    # not committed, so a fresh clone would otherwise play all 720 again
    if [[ -f $OUT/sampled/$2/results.json ]] && $PYTHON -c "import sys, pathlib; from benchmarks.learning.collect import read_sampled; sys.exit(read_sampled(pathlib.Path(sys.argv[1])) is None)" \
        "$OUT/sampled/$2"; then
        echo "sampled/$2: scored already"
        return
    fi
    $AEM bench --suite benchmarks/suites/small-agent-unseen.yaml --policy "hf:$1" \
        --out "$OUT/sampled/$2" --no-progress
}

lane() {  # lane ALGO: its three seeds in turn, each followed by its sampled held-out score
    for seed in 0 1 2; do
        $AEM bench learning "$CONFIG" --out "$OUT" --run "$1-seed$seed"
        sampled "$OUT/runs/$1-seed$seed/final" "$1-seed$seed"
    done
}

ended() {  # ended PID...: wait for every lane; stop the grid if one of them failed
    local failed=0 pid
    for pid in "$@"; do wait "$pid" || failed=1; done
    if ((failed)); then
        echo "a lane stopped (logs in $OUT/logs): rerun this script to resume it" >&2
        exit 1
    fi
}

lane grpo > "$OUT/logs/grpo.log" 2>&1 &
grpo=$!
# the first --run of either lane builds the grid's start/ and task check; the other waits
# for it (a lock in benchmarks/learning/grid.py) and reuses them
{ sampled "$START/act" start; lane aem; } > "$OUT/logs/aem.log" 2>&1 &
ended $grpo $!
for estimator in dapo gspo; do  # each estimator without and with AEM, side by side
    lane "$estimator" > "$OUT/logs/$estimator.log" 2>&1 &
    base=$!
    lane "$estimator-aem" > "$OUT/logs/$estimator-aem.log" 2>&1 &
    ended $base $!
done
$AEM bench learning "$CONFIG" --out "$OUT" --status
$PYTHON -m benchmarks.learning.readme  # the README's and docs' grid blocks, from results.json
