"""The machine probe forces no platform on any framework: it reports each framework's
devices as that framework sees them, whatever JAX_PLATFORMS the parent has (the test
session itself pins JAX to the CPU). The cells still pin their own platform."""

import os

import pytest

from stackwars import runner
from stackwars.harness import settings


@pytest.fixture
def restored_env(monkeypatch):
    """settings.apply writes the process environment: restore it after the test."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "JAX_PLATFORMS", "XLA_FLAGS",
                "XLA_PYTHON_CLIENT_PREALLOCATE"):
        monkeypatch.setenv(var, os.environ.get(var, ""))
    before = os.sched_getaffinity(0)
    yield monkeypatch
    os.sched_setaffinity(0, before)


def test_probe_runs_with_no_platform_forced(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")  # what the parent (this test session) has
    p = runner.probe_machine()
    assert p["status"] == "ok"
    assert p["process_settings"]["jax_platforms"] == settings.NO_PLATFORM
    jax = p["jax"]
    assert jax["importable"] and jax["jax_platforms_env"] is None  # the probe's JAX saw no JAX_PLATFORMS
    assert jax["default_backend"] in ("cpu", "gpu")
    # where JAX sees no GPU, the reason is JAX's own words, not ours
    assert jax["cuda"] or "gpu" in jax["cuda_reason"].lower() or "backend" in jax["cuda_reason"].lower()
    assert os.environ["JAX_PLATFORMS"] == "cpu"  # the parent is untouched


def test_cells_pin_their_platform(restored_env):
    applied = settings.apply(None, "cpu", None)
    assert applied["jax_platforms"] == "cpu" and os.environ["JAX_PLATFORMS"] == "cpu"


def test_process_env_is_applied_before_the_framework(restored_env):
    restored_env.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
    applied = settings.apply(None, "cpu", None, {"XLA_FLAGS": "--xla_gpu_autotune_level=0"})
    assert os.environ["XLA_FLAGS"] == "--xla_cpu_enable_fast_math=false --xla_gpu_autotune_level=0"
    assert applied["env"]["XLA_FLAGS"].endswith("--xla_gpu_autotune_level=0")


def test_each_frameworks_probe_runs_in_its_own_worker_at_once_and_fails_alone(monkeypatch):
    """PyTorch's side and JAX's are probed in two workers at the same time (one after the other
    in one worker, the run's first cell waited for both); a side whose worker fails is named
    unavailable with the reason, and the other side stands."""
    import threading

    from stackwars.harness.isolation import Outcome

    both = threading.Barrier(2, timeout=60)  # broken unless both workers are in flight together
    real = runner.run_task

    def run_task(task, **kwargs):
        both.wait()
        if task["target"].endswith(":probe_jax"):
            return Outcome(status="error", result=None, error="the JAX worker died", wall_s=0.1)
        return real(task, **kwargs)

    monkeypatch.setattr(runner, "run_task", run_task)
    p = runner.probe_machine()
    assert p["torch"]["importable"] is True and "torch_mlir" in p
    assert p["jax"] == {"importable": False, "error": "probe failed: the JAX worker died"}


def test_the_probes_guess_imports_no_framework_and_names_what_is_installed():
    """runner.probe_guess: what the fork servers started during the probe are planned from.
    It finds the packages without importing them, and says CUDA only where a GPU is asked for
    and NVML sees one."""
    import importlib.util
    import subprocess
    import sys

    code = ("import sys; from stackwars import runner; g = runner.probe_guess(['cpu', 'cuda']); "
            "print(sorted(m for m in ('torch', 'jax', 'torch_mlir') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout  # found, not imported
    g = runner.probe_guess("cpu")
    for name in ("torch", "jax", "torch_mlir"):
        assert g[name]["importable"] == (importlib.util.find_spec(name) is not None)
    assert not g["torch"]["cuda"] and not g["jax"]["cuda"]  # a CPU run asks for no GPU
    assert runner.probe_guess("cuda")["torch"]["cuda"] == (runner.machine_memory()[1] is not None)


def test_servers_during_the_probe_start_nothing_for_a_plan_the_guess_refuses(monkeypatch):
    """A guess the plan refuses (no backend it allows, say) costs nothing: no server starts,
    and the run starts its servers itself after the probe, as before."""
    from stackwars.errors import SpecError
    from stackwars.harness import forkserver
    from stackwars.records import MeasureConfig

    def refuses(found):
        assert found["torch"]["importable"] in (True, False)  # planned from the guess
        raise SpecError("no backend can run here")

    started = []
    monkeypatch.setattr(forkserver, "start_ahead", lambda *a, **k: started.append(a))
    assert runner.start_servers_during_probe(refuses, "cpu", MeasureConfig()) is None
    assert runner.start_servers_during_probe(lambda found: [], "cpu", MeasureConfig()) is None
    assert not started
