"""GPU cells (marker ``gpu``): skipped cleanly where no NVIDIA device is visible.

Cells run in workers (the test process pins JAX to the CPU); each must pass parity and
report the device allocator's peak, not the host RSS.
"""

import pytest

from stackwars import runner
from stackwars.records import CellSpec, MeasureConfig


def _nvidia_devices() -> int:
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no library, no driver: no GPU
        return 0


pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(_nvidia_devices() == 0, reason="no NVIDIA GPU visible (NVML)")]

FAST = MeasureConfig(warmup=1, min_samples=3, min_time_s=0.0, timeout_s=600)


@pytest.fixture(scope="module")
def probe():
    p = runner.probe_machine()
    if not (p["torch"].get("cuda") and p["jax"].get("cuda")):
        pytest.skip(f"torch or jax sees no CUDA device: {p['torch'].get('cuda_reason')} / {p['jax'].get('cuda_reason')}")
    return p


@pytest.mark.parametrize("phase", ("forward", "train-step"))
@pytest.mark.parametrize("backend", ("torch-eager", "torch-compile", "torch-cudagraphs", "jax-jit"))
@pytest.mark.parametrize("workload", ("gemm", "ffn", "mha"))
def test_cuda_parity_and_device_memory(probe, workload, phase, backend):
    m = runner.measure_one(CellSpec(workload, "tiny", phase, backend, "cuda"), FAST, probe, peak=None)
    assert m.status == "ok", m.error
    assert m.memory.peak_device_bytes > 0 and "since worker start" in m.memory.device_counter


def test_cuda_bfloat16_and_tf32(probe):
    cfg = MeasureConfig(warmup=1, min_samples=3, min_time_s=0.0, matmul_precision="tf32")
    for backend in ("torch-eager", "jax-jit"):
        m = runner.measure_one(CellSpec("mha", "tiny", "train-step", backend, "cuda", "bfloat16"), cfg, probe, None)
        assert m.status == "ok", m.error
        m = runner.measure_one(CellSpec("gemm", "tiny", "forward", backend, "cuda"), cfg, probe, None)
        assert m.status == "ok", m.error
        applied = m.settings["applied"]
        assert applied.get("torch_cuda_matmul_allow_tf32", True) and \
            applied.get("jax_default_matmul_precision", "tensorfloat32") == "tensorfloat32"
