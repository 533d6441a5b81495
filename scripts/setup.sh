#!/usr/bin/env bash
# Create .venv (if missing) and install stackwars into it, with the test extras.
# PyTorch is pinned to the CPU build (an unpinned `torch` pulls several GB of CUDA
# packages); set TORCH_SPEC to install another build, e.g. TORCH_SPEC=torch on a GPU box.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# the mlir (torch-mlir: PyTorch -> StableHLO), kernels (Triton, interpreted on the CPU) and
# reference (transformers: the models' independent implementations) and docs (mkdocs-material:
# the documentation site) extras are optional for users; the tests exercise all four
.venv/bin/python -m pip install --quiet "$TORCH_SPEC" -e ".[test,mlir,kernels,reference,docs,ray,slurm]"
