#!/usr/bin/env bash
# What must hold on a lent GPU, in stages that each fit one command of a remote runner
# (stackwars/gpucheck.py says how). Results go under $OUT/<stage>/ where $OUT is set (this
# script reads it and never assigns it), else under results/gpu-<device>/.
#
#   scripts/gpu-check.sh --list                  # stages, cells, estimated GPU time
#   scripts/gpu-check.sh --stage tests-eager     # one stage
#   scripts/gpu-check.sh --proof                 # the stages that prove the GPU paths
#
# Without a GPU: says so and exits 3.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -m stackwars.gpucheck "$@"
