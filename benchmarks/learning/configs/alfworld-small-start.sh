#!/usr/bin/env bash
# The small agent's SFT start (docs/small-agent.md): two `aem sft` stages from `aem-small-init`
# on the searching expert's episodes of the ALFWorld train split, then its train-split success.
#   stage 1 (reading): every token scored (--prompt-loss), so the model learns the env's text
#   stage 2 (acting):  replies only, on fresh episodes (other seeds), from stage 1's model
# Resumable: rerun the same command; a finished stage is skipped, a killed one resumes from its
# newest checkpoint. Usage: bash benchmarks/learning/configs/alfworld-small-start.sh [OUT]
# (default runs/small-start; stage outputs in OUT/read, OUT/act; the start is OUT/act).
set -euo pipefail
OUT=${1:-runs/small-start}
PYTHON=${PYTHON:-python}
AEM="$PYTHON -m aem_cli"
export OMP_NUM_THREADS=1
COMMON=(aem/ALFWorld-v0 --full --max-turns 30 --explore 0.15 --prompt-style compact
        --history-window 1 --reply-prefix "<action>" --max-turn-tokens 16 --batch-size 32
        --grad-accum 1 --torch-threads 1 --env-kwargs '{"expert": "search"}' --save-steps 50)

stage() {  # stage DIR ARGS...: run `aem sft` into DIR unless finished; resume if checkpointed
    local dir=$1; shift
    if [[ -f $dir/model.safetensors ]]; then echo "done: $dir"; return; fi
    local resume=()
    # only from a checkpoint `aem sft --resume` takes (last_checkpoint: one killed mid-save is
    # not), else the stage starts over
    if compgen -G "$dir/checkpoint-*" > /dev/null && $PYTHON -c "import sys, pathlib; from aem_agent.grpo.run import last_checkpoint; sys.exit(last_checkpoint(pathlib.Path(sys.argv[1])) is None)" \
        "$dir"; then resume=(--resume); fi
    $AEM sft "${COMMON[@]}" "$@" --output-dir "$dir" --overwrite "${resume[@]}"
}

stage "$OUT/read" --model aem-small-init --prompt-loss --episodes 1080 --seed 0 --epochs 1 --lr 2e-3
stage "$OUT/act" --model "$OUT/read" --episodes 720 --seed 2000 --epochs 1 --lr 1e-3
$AEM bench --suite benchmarks/suites/small-agent-train.yaml --policy "hf:$OUT/act" --out "$OUT/train-success"
