"""What the GPU test modules share: the marks that skip them only where NVML sees no NVIDIA
GPU, and one compile cache for their cells (what those cells check is parity, memory and what
ran, not the first call, so a kernel Inductor or XLA built for one cell is reused by the
next). The probe that fails when a framework does not see the GPU NVML sees is the
``gpu_probe`` fixture (conftest.py)."""

import atexit
import os
import shutil
import tempfile

import pytest


def nvidia_devices() -> int:
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no library, no driver: no GPU
        return 0


MARKS = [pytest.mark.gpu, pytest.mark.skipif(nvidia_devices() == 0, reason="no NVIDIA GPU visible (NVML)")]
SHARED_CACHE = os.path.join(tempfile.gettempdir(), f"stackwars-gpu-tests-cache-{os.getpid()}")  # made by the cells
atexit.register(shutil.rmtree, SHARED_CACHE, True)
