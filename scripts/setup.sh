#!/usr/bin/env bash
# Create .venv (if missing) and install stackwars into it: what the main job needs.
#   ./scripts/setup.sh           stackwars, PyTorch (pinned CPU build) and the mlir extra (torch-mlir: the
#                                main job's torch-mlir-xla rows)
#   ./scripts/setup.sh --tests   that, and what only the tests need: the kernels (Triton), reference
#                                (transformers), docs (mkdocs-material, mkdocstrings), ray and slurm (submitit),
#                                notebook (cloudpickle, ipykernel; nbclient runs the tutorial notebook) extras, pytest
#                                with pytest-xdist (the suite runs in three workers),
#                                the GPU image's wheels read for API names (about 530 MB, once) and .gpu-site
# PyTorch is pinned to the CPU build (an unpinned `torch` pulls several GB of CUDA packages); set
# TORCH_SPEC to install another build, e.g. TORCH_SPEC=torch on a GPU box.
set -euo pipefail
cd "$(dirname "$0")/.."
TESTS=0
for arg in "$@"; do
    case "$arg" in
        --tests) TESTS=1 ;;
        -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
        *) echo "setup.sh: unknown argument '$arg'; allowed: --tests" >&2; exit 2 ;;
    esac
done
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# pip byte-compiles what it installs one file at a time (18,000 files with the test extras); it installs with
# --no-compile instead, and compileall compiles the same files on every core afterwards: the same .pyc files
# (18,315 either way). `setup.sh --tests` from a fresh clone, five of each in turn: 111-163 s (median 149 s)
# before, 115-144 s (median 124 s) after (2-CPU AMD EPYC VM, 2026-12-02). A file no Python 3.11 compiles
# (torch's py312-only test helper) is left uncompiled, as pip leaves it.
compile_venv() {
    local site marker=.venv/.compiled
    site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
    # the marker: when the last compile that ended began (an interrupted one leaves the one before)
    touch "$marker.new"
    if [ -e "$marker" ]; then  # compiled before: only what pip wrote since (checking all 18,000 took 6 s)
        find "$site" -name '*.py' -newer "$marker" | .venv/bin/python -m compileall -qq -j 0 -i - || true
    else
        .venv/bin/python -m compileall -qq -j 0 "$site" || true
    fi
    mv "$marker.new" "$marker"
    # stackwars's own modules too (checked each time: 153 files): where PYTHONDONTWRITEBYTECODE is set, as in
    # this project's development sessions, no process writes them, and each one that imports stackwars compiled
    # its modules again (the CLI 0.27 s, a fork server's preload 0.14 s; 0.06 s each read back)
    .venv/bin/python -m compileall -qq -j 0 stackwars || true
}
# the mlir extra (torch-mlir: PyTorch -> StableHLO) is optional for users; the main job measures its backend
if [ "$TESTS" = 0 ]; then
    .venv/bin/python -m pip install --quiet --no-compile "$TORCH_SPEC" -e ".[mlir]"
    compile_venv
    exit 0
fi
# the tests exercise every optional extra: kernels (Triton, interpreted on the CPU), reference (transformers:
# the models' independent implementations), docs (mkdocs-material: the documentation site), notebook (the
# tutorial notebook, executed headless), ray and slurm
.venv/bin/python -m pip install --quiet --no-compile "$TORCH_SPEC" -e ".[test,mlir,kernels,reference,docs,ray,slurm,notebook]"
compile_venv
# the GPU image's frameworks (jax 0.11.2 needs Python 3.12; torch 2.11 has no CPU wheel on PyPI),
# which cannot be installed here: their wheels, read by tests/test_gpu_image.py for every name of
# their API stackwars uses (torch's is a CUDA build, about 530 MB: its Python source and stubs are read)
GPU_IMAGE_WHEELS=${GPU_IMAGE_WHEELS:-"jax==0.11.2 flax==0.12.10 optax==0.2.8 torch==2.11.0"}
if [ ! -e .whl/gpu-image/.complete ]; then
    mkdir -p .whl/gpu-image
    # shellcheck disable=SC2086
    .venv/bin/python -m pip download --quiet --no-deps --python-version 3.12 --only-binary=:all: \
        --platform manylinux_2_28_x86_64 --platform any -d .whl/gpu-image $GPU_IMAGE_WHEELS && touch .whl/gpu-image/.complete \
        || echo "setup: could not download the GPU image's wheels ($GPU_IMAGE_WHEELS)" >&2
fi
# pytest for the GPU image (its package list names none; it reaches no registry): pure-Python wheels for its
# Python 3.12 in .gpu-site, which a remote GPU command carries; gpu-check adds it where pytest is missing
if [ ! -e .gpu-site/.complete ]; then
    .venv/bin/python -m pip install --quiet --target .gpu-site --python-version 3.12 --only-binary=:all: \
        --no-compile --upgrade pytest && touch .gpu-site/.complete \
        || echo "setup: could not prepare .gpu-site (pytest for the GPU image)" >&2
fi
