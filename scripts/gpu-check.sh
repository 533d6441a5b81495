#!/usr/bin/env bash
# One command for a lent GPU: run what must hold on it and record what it measured.
#
#   scripts/gpu-check.sh                 # on the GPU image: PYTHONPATH=. is set here
#   GPU_CHECK_BUDGET=570 scripts/gpu-check.sh
#
# Stages, in order of importance (each writes under results/gpu-<device>/ and leaves a
# .done marker, so a second invocation continues where a first one ran out of time):
#   1. tests      the GPU tests (pytest -m gpu): a framework that sees no GPU fails here
#   2. peaks      device peaks, both frameworks, float32 and bfloat16
#   3. models     the six models, paper preset, forward, bfloat16, default backends
#   4. micro-bf16 gemm/ffn/mha, paper preset, forward and train-step, bfloat16
#   5. micro-f32  the same in float32 (exact matmul precision)
#   6. mnist      train mnist, two epochs, both frameworks (needs the data: STACKWARS_DATA_DIR)
#   7. scaling    data parallelism over the visible GPUs (dp, fsdp; NCCL)
#   8. why        GPT-2 paper train step profiled, with its memory anatomy (traces under traces/)
#   9. kernels    softmax and layernorm: Triton and Pallas kernels beside the framework operators
#  10. flush      gemm and mha with caches flushed before every call and CUDA-graph replay
# A stage that would start after the budget (default 570 s) is reported as not reached;
# SUMMARY.md lists every stage with its status and time. Without a GPU: says so, exits 3.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"
BUDGET=${GPU_CHECK_BUDGET:-570}
START=$(date +%s)

name=$("$PYTHON" - <<'EOF' 2>/dev/null
import re
try:
    import pynvml
    pynvml.nvmlInit()
    n = pynvml.nvmlDeviceGetCount()
    name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0)) if n else ""
except Exception:
    name = ""
if isinstance(name, bytes):
    name = name.decode()
print(re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-"))
EOF
)
if [ -z "$name" ]; then
    echo "gpu-check: no NVIDIA GPU visible (NVML reports none, or no driver): this script needs one." >&2
    echo "gpu-check: nothing was run; on a CPU machine use the README's test command." >&2
    exit 3
fi
OUT=results/gpu-$name
mkdir -p "$OUT"
DB=$OUT/stackwars.db
echo "gpu-check: $name -> $OUT (budget ${BUDGET}s)"
"$PYTHON" -c "import json, sys; sys.path.insert(0, '.'); from stackwars.harness.env import fingerprint; \
json.dump(fingerprint(), open('$OUT/env.json', 'w'), indent=1, default=str)"

summary=()
stage() {  # stage NAME TIMEOUT COMMAND...
    local stage_name=$1 limit=$2; shift 2
    if [ -e "$OUT/$stage_name.done" ]; then
        summary+=("| $stage_name | done earlier | $(cat "$OUT/$stage_name.done") |")
        return
    fi
    local now=$(date +%s); local left=$((BUDGET - (now - START)))
    if [ "$left" -le 20 ]; then
        summary+=("| $stage_name | not reached (budget of ${BUDGET}s spent; run the script again to continue) | |")
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "gpu-check: stage $stage_name (at most ${limit}s)"
    local t0=$(date +%s)
    timeout --signal=TERM --kill-after=15 "$limit" "$@" > "$OUT/$stage_name.txt" 2> "$OUT/$stage_name.log"
    local rc=$? t=$(( $(date +%s) - t0 ))
    if [ $rc -eq 0 ]; then
        echo "${t}s" > "$OUT/$stage_name.done"
        summary+=("| $stage_name | ok | ${t}s |")
    else
        summary+=("| $stage_name | exit $rc$([ $rc -eq 124 ] && echo ' (stage time limit)') | ${t}s; see $stage_name.log |")
    fi
    tail -n 3 "$OUT/$stage_name.txt"
}

FAST=(--warmup 2 --min-samples 5 --min-time 0.3 --timeout 240)
stage tests 300 "$PYTHON" -m pytest -q -m gpu -rs -p no:cacheprovider
stage peaks 90 "$PYTHON" -m stackwars peaks --device cuda --min-time 1 --db "$DB"
stage models 300 "$PYTHON" -m stackwars run resnet50 bert-base gpt2 vit-b16 gpt-neo-1.3b llama3-8b --preset paper \
    --device cuda --dtype bfloat16 --phase forward "${FAST[@]}" --db "$DB" --json "$OUT/models-paper-bf16.json"
stage micro-bf16 240 "$PYTHON" -m stackwars run gemm ffn mha --preset paper --device cuda --dtype bfloat16 \
    --phase forward --phase train-step "${FAST[@]}" --db "$DB" --json "$OUT/micro-paper-bf16.json"
stage micro-f32 240 "$PYTHON" -m stackwars run gemm ffn mha --preset paper --device cuda --dtype float32 \
    --phase forward --phase train-step "${FAST[@]}" --db "$DB" --json "$OUT/micro-paper-f32.json"
DATA=${STACKWARS_DATA_DIR:-}
for candidate in ../shared/data/mnist .data/mnist; do
    [ -z "$DATA" ] && [ -e "$candidate/train-images-idx3-ubyte.gz" ] && DATA=$candidate
done
if [ -n "$DATA" ]; then
    stage mnist 180 "$PYTHON" -m stackwars train mnist --device cuda --epochs 2 --lr 0.1 --data-dir "$DATA" \
        --out "$OUT/mnist" --db "$DB"
else
    summary+=("| mnist | not run: no MNIST files (set STACKWARS_DATA_DIR) | |")
fi
# data parallelism over the visible GPUs (1, 2, 4, 8 of them): NCCL, per-device memory, parity
NGPU=$("$PYTHON" -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 1)
COUNTS=1; for n in 2 4 8; do [ "$n" -le "$NGPU" ] && COUNTS="$COUNTS,$n"; done
stage scaling 240 "$PYTHON" -m stackwars study scaling gpt2 --preset small --device cuda --devices "$COUNTS" \
    -s dp -s fsdp --steps 10 --db "$DB" --out "$OUT/scaling"
# why: GPT-2 paper train step profiled (kernels, launch gaps, copies) with its memory anatomy, the
# 14.6 GB (jax-jit) vs 6.3 GB (torch-compile) gap measured by hand on an H100 explained part by part
stage why 300 "$PYTHON" -m stackwars run gpt2 --preset paper --device cuda --dtype bfloat16 --phase train-step \
    -b jax-jit -b torch-compile -b torch-eager "${FAST[@]}" --profile 2 --profile-dir "$OUT/traces" --db "$DB" \
    --json "$OUT/why-gpt2-paper.json"
# S2's custom kernels compiled for real: Triton and Pallas beside each framework's operator
stage kernels 180 "$PYTHON" -m stackwars run softmax layernorm --preset paper --device cuda \
    --set impl=framework,custom "${FAST[@]}" --db "$DB" --json "$OUT/kernels-paper.json"
# do_bench's conditions: caches flushed before every call, CUDA-graph replay of PyTorch's calls
stage flush 180 "$PYTHON" -m stackwars run gemm mha --preset paper --device cuda -b torch-eager -b jax-jit \
    --flush-l2 --cuda-graph-replay "${FAST[@]}" --db "$DB" --json "$OUT/micro-paper-flushed-graphs.json"

{
    echo "# gpu-check on $name"
    echo
    echo "Written by scripts/gpu-check.sh at $(date -u +%Y-%m-%dT%H:%M:%SZ); environment in env.json;"
    echo "each stage's output in STAGE.txt (tables) and STAGE.log (progress, errors)."
    echo
    echo "| stage | status | time |"
    echo "|---|---|---|"
    printf '%s\n' "${summary[@]}"
} > "$OUT/SUMMARY.md"
cat "$OUT/SUMMARY.md"
grep -q "| exit \|not reached" "$OUT/SUMMARY.md" && exit 1
exit 0
