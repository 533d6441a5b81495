"""The GPU paths no CPU can prove (the GPU issue's point 9, and the device side of its other
findings): marker ``gpu``, skipped only where NVML sees no NVIDIA GPU; run by
``scripts/gpu-check.sh --stage tests-paths``. Each test names the point it answers.
Their CPU-testable halves are in tests/test_gpu_logic.py."""

import os
import statistics

import pytest

from stackwars import runner
from stackwars.harness.flush import GPU_FLUSH_BYTES
from stackwars.records import CellSpec, MeasureConfig
from tests.gpu_helpers import MARKS, SHARED_CACHE, nvidia_devices

pytestmark = MARKS
FAST = MeasureConfig(warmup=1, min_samples=5, min_time_s=0.0, timeout_s=400, cache_dir=SHARED_CACHE)


def _ok(spec, gpu_probe, config=FAST, **kwargs):
    m = runner.measure_one(spec, config, gpu_probe, None, **kwargs)
    assert m.status == "ok", m.error
    return m


@pytest.mark.parametrize("workload", ("gemm", "llama3-8b"))
def test_point9_torch_cudagraphs_really_replays(gpu_probe, workload):
    """No graph skipped by Inductor (llama's RoPE once built its frequencies from numpy in the step)."""
    m = _ok(CellSpec(workload, "tiny", "forward", "torch-cudagraphs", "cuda"), gpu_probe)
    assert m.compile.extra["cudagraph_skips"] == 0 and "not_as_named" not in m.settings


def test_point9_flush_and_graph_replay_on_cuda(gpu_probe):
    config = MeasureConfig(warmup=1, min_samples=5, min_time_s=0.0, timeout_s=400, flush_cache=True,
                           cuda_graph_replay=True)
    t = _ok(CellSpec("gemm", "small", "forward", "torch-eager", "cuda"), gpu_probe, config)
    assert t.settings["flush"]["bytes"] == GPU_FLUSH_BYTES and t.number == 1
    assert t.settings["graph_replay"]["replayed"] is True and t.to_row()["graph_replayed"]
    j = _ok(CellSpec("gemm", "small", "forward", "jax-jit", "cuda"), gpu_probe, config)
    assert j.settings["flush"]["bytes"] == GPU_FLUSH_BYTES and j.settings["graph_replay"]["replayed"] is False


@pytest.mark.parametrize("backend", ("torch-eager", "jax-jit"))
def test_point9_profiles_and_memory_anatomy_on_cuda(gpu_probe, backend, tmp_path):
    config = MeasureConfig(warmup=1, min_samples=3, min_time_s=0.0, timeout_s=400, profile_steps=2,
                           profile_dir=str(tmp_path), cache_dir=SHARED_CACHE)
    m = _ok(CellSpec("gpt2", "tiny", "train-step", backend, "cuda"), gpu_probe, config, run_id="paths")
    prof = m.settings["profile"]
    assert "error" not in prof, prof
    steps = prof["summary"]["per_step"]
    assert len(steps) == 2 and all(s["busy_s"] > 0 and s["kernels"] > 0 for s in steps)
    anatomy = m.settings["memory_anatomy"]
    assert "error" not in anatomy and anatomy["parts"]["parameters"]["bytes"] > 0
    assert anatomy["peak"]["bytes"] > 0, anatomy  # the parts set beside the allocator's peak on a GPU


@pytest.mark.parametrize("backend", ("torch-eager", "jax-jit"))
def test_point9_triton_and_pallas_kernels_compile_for_real(gpu_probe, backend):
    spec = CellSpec("softmax", "small", "forward", backend, "cuda", overrides=(("impl", "custom"),))
    m = _ok(spec, gpu_probe)
    # an interpreter takes tens of milliseconds for what a compiled kernel does in microseconds
    assert statistics.median(m.samples) < 2e-3, m.samples
    assert "TRITON_INTERPRET" not in os.environ


def test_point9_nccl_scaling_on_one_gpu():
    from stackwars.studies.scaling import launch

    item = {"model": "gpt2", "preset": "tiny", "framework": "torch", "strategy": "dp", "devices": 1, "hosts": 1,
            "scaling": "strong", "global_batch": 4, "per_device_batch": 4, "device": "cuda", "seed": 0,
            "warmup": 1, "steps": 3}
    for framework in ("torch", "jax"):
        o = (launch.torch_cell if framework == "torch" else launch.jax_cell)({**item, "framework": framework}, 300)
        assert o.status == "ok", o.error
        assert o.result["parity"]["ok"], o.result["parity"]


@pytest.mark.skipif(nvidia_devices() < 2, reason="two GPUs needed to stand for two hosts")
def test_point8_two_launches_on_one_machine_use_two_gpus():
    from stackwars.studies.scaling import launch

    item = {"model": "mlp-mnist", "preset": "tiny", "framework": "torch", "strategy": "dp", "devices": 2,
            "hosts": 2, "scaling": "strong", "global_batch": 4, "per_device_batch": 2, "device": "cuda",
            "seed": 0, "warmup": 1, "steps": 3}
    o = launch.torch_cell(item, 300)
    assert o.status == "ok", o.error


@pytest.mark.parametrize("backend", ("torch-compile", "jax-jit"))
def test_point9_bf16_model_cells(gpu_probe, backend, tmp_path):
    m = _ok(CellSpec("gpt2", "tiny", "forward", backend, "cuda", "bfloat16"), gpu_probe, reference_dir=str(tmp_path))
    assert m.parity.ok and m.memory.peak_device_bytes > 0


def test_point9_wall_time_against_cuda_events(gpu_probe):
    """One float32 GEMM of paper size (about 3 ms on an H100), device-bound: the host clock's
    samples and the device's events, read around the same calls (issue 54: one window), agree
    within 5% sample by sample's median; so do the issue time, the clocks and the energy, each
    naming the steady window."""
    m = _ok(CellSpec("gemm", "paper", "forward", "torch-eager", "cuda"), gpu_probe)
    events = m.settings["device_time"]
    assert events["available"] and events["window"] == "steady" and len(events["samples"]) == len(m.samples)
    wall, device = statistics.median(m.samples), statistics.median(events["samples"])
    assert 0.95 * wall <= device <= 1.01 * wall, (wall, device)
    assert m.to_row()["device_time_median_s"] == pytest.approx(device)
    # a GEMM of milliseconds: the host issues it in a small part of its time, at a working SM clock
    issue = m.settings["issue"]
    assert issue["window"] == "steady" and len(issue["samples"]) == len(m.samples)
    assert statistics.median(issue["samples"]) < 0.5 * wall, (issue, wall)
    assert issue["clocks"].get("sm_mhz", 0) > 0 and isinstance(issue["clocks"]["reasons"], list), issue
    # the energy's marks, every 0.1 s of at least a second of the steady window: calls, joules, the SM clock
    e = m.settings["energy"]
    assert e["window"] == "steady" and e["samples"][1] <= len(m.samples)
    trace = e["trace"]
    assert len(trace["t_s"]) >= 8 and all(c and c > 0 for c in trace["sm_mhz"]), trace
    assert trace["calls_per_s"][0] > 0 and m.to_row()["energy_sm_mhz"] == trace["sm_mhz_range"]
    assert m.to_row()["readout_windows"] == {"device_time": "steady", "issue": "steady", "energy": "steady"}
    j = _ok(CellSpec("gemm", "tiny", "forward", "jax-jit", "cuda"), gpu_probe)
    assert j.settings["device_time"]["available"] is False and "--profile" in j.settings["device_time"]["why"]
    assert len(j.settings["issue"]["samples"]) == len(j.samples) and j.to_row()["issue_median_s"] > 0  # both


def test_point2_a_warm_torch_compile_process_starts_no_compile_pool(gpu_probe, tmp_path):
    """On a GPU, Inductor starts its compile pool (a sidecar interpreter and a worker per CPU)
    at a process's first compile, even where the FX-graph cache leaves nothing to compile. A
    run's cold process compiles with it and waits for it to go quiet before its timed calls;
    its warm process compiles with one thread and has no child process to wait for."""
    from stackwars.harness import env as envmod
    from stackwars.store.results import Store

    specs = runner.plan_cells(["gemm"], ["tiny"], ["forward"], ["torch-compile"], devices=("cuda",), repeats=2)
    config = MeasureConfig(warmup=1, min_samples=5, min_time_s=0.0, timeout_s=400)
    with Store(tmp_path / "r.db") as store:
        run_id = runner.new_run(store, specs, config)
        runner.execute(store, run_id, specs, config, envmod.fingerprint(None, gpu_probe))
        cold, warm = sorted((m for _, m in store.cells(run_id)), key=lambda m: m.spec.repeat)
    assert cold.status == warm.status == "ok", (cold.error, warm.error)
    assert (cold.settings["cache"]["mode"], warm.settings["cache"]["mode"]) == ("cold", "warm")
    threads = [m.settings["applied"]["inductor_compile_threads"] for m in (cold, warm)]
    assert threads[0]["value"] > 1 and threads[1]["value"] == 1, threads
    assert cold.settings["settle"]["children"] >= 1, cold.settings["settle"]  # the pool: what the warm one is spared
    assert warm.settings["settle"]["children"] == 0, warm.settings["settle"]
    assert warm.compile.extra["program_sha"] == cold.compile.extra["program_sha"]


def test_point6_the_reference_runs_in_its_own_worker_on_the_gpu(gpu_probe, tmp_path):
    m = _ok(CellSpec("gpt2", "tiny", "forward", "jax-jit", "cuda"), gpu_probe, reference_dir=str(tmp_path))
    worker = m.settings["reference_worker"]
    assert worker["status"] == "ok" and worker["where"] == "cuda", worker
    assert m.settings["reference"]["source"].startswith("reused")


def test_points3_5_7_jax_allocator_cap_command_buffers_and_the_same_warm_up(gpu_probe):
    j = _ok(CellSpec("gpt2", "tiny", "forward", "jax-jit", "cuda"), gpu_probe)
    assert j.settings["applied"]["xla_python_client_mem_fraction"] == "0.95"
    # a many-kernel program is replayed as graphs; jax 0.11's XLA forms them on the thunk sequence
    # (none in its optimized HLO), so the count is read from the thunk sequence it dumps
    src = j.compile.extra["xla_command_buffers_source"]
    assert j.compile.extra["xla_command_buffers"] >= 1, src
    import jax
    if tuple(int(x) for x in jax.__version__.split(".")[:2]) >= (0, 11):
        assert src.startswith("kCommandBuffer thunks in XLA's thunk sequence"), src
    # the same program with command buffers off for this cell (--xla-command-buffers off): none formed
    off = _ok(CellSpec("gpt2", "tiny", "forward", "jax-jit", "cuda", options=(("xla_command_buffers", "off"),)),
              gpu_probe)
    assert off.compile.extra["xla_command_buffers"] == 0, off.compile.extra["xla_command_buffers_source"]
    assert off.settings["applied"]["xla_gpu_flags"]["xla_gpu_enable_command_buffer"]["value"] == ""
    t = _ok(CellSpec("gpt2", "tiny", "forward", "torch-eager", "cuda"), gpu_probe)
    for m in (j, t):  # both frameworks warm cuBLAS (both dtypes) and cuDNN before the first call
        assert {"gemm_s", "gemm_bf16_s", "conv_s"} <= set(m.settings["device_init"]), m.settings["device_init"]
    assert j.settings["device_init"]["compile_options"] == {"xla_gpu_autotune_level": 0}  # XLA took them on CUDA


def test_point3_a_large_outputs_digest_is_folded_on_the_gpu_as_numpy_folds_it(gpu_probe, tmp_path):
    """The digest (harness/digest.py) folded by each framework on the GPU is numpy's fold of the
    same bits on the host (a fresh interpreter: JAX's client on the GPU beside nothing else);
    then a run's later processes of a GEMM whose output is folded take the first comparison."""
    import subprocess
    import sys

    script = (
        "import numpy as np, torch, jax, jax.numpy as jnp\n"
        "from stackwars.harness import digest\n"
        "from stackwars.backends import torch_common as tc, jax_common as jc\n"
        "digest.DIGEST_FROM = 10\n"
        "for dt in ('float32', 'bfloat16'):\n"
        "    t = torch.randn(1000, 131, device='cuda').to(getattr(torch, dt))\n"
        "    j = jax.device_put(jnp.asarray(np.random.default_rng(0).standard_normal((9999, 70)), getattr(jnp, dt)),"
        " jax.devices('gpu')[0])\n"
        "    assert tc.output_digest(t) == digest.digest_numpy(tc.to_numpy(t)), dt\n"
        "    assert jc.output_digest(j) == digest.digest_numpy(jc.to_numpy(j)), dt\n"
        # folded without a temporary of the output's size: the peaks stay, XLA's (which no cell can
        # reset) within a MiB, PyTorch's within its 4 MiB of folding and the weights
        "gpu = jax.devices('gpu')[0]\n"
        "for dt in (jnp.bfloat16, jnp.float32):\n"
        "    x = jax.device_put(jnp.ones((1 << 25,), dt), gpu).block_until_ready()\n"
        "    before = gpu.memory_stats()['peak_bytes_in_use']\n"
        "    jc.output_digest(x)\n"
        "    grew = gpu.memory_stats()['peak_bytes_in_use'] - before\n"
        "    assert grew <= 1 << 20, (dt, grew)\n"
        "    del x\n"
        "t = torch.ones(1 << 25, dtype=torch.bfloat16, device='cuda')\n"
        "torch.cuda.reset_peak_memory_stats()\n"
        "held = torch.cuda.memory_allocated()\n"
        "tc.output_digest(t)\n"
        "grew = torch.cuda.max_memory_allocated() - held\n"
        "assert grew <= 6 << 20, grew\n"
        "print('folded alike')\n")
    env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false", "JAX_PLATFORMS": "cuda,cpu"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0 and "folded alike" in out.stdout, out.stderr[-3000:]
    from stackwars.harness import env as envmod
    from stackwars.store.results import Store

    specs = runner.plan_cells(["gemm"], ["tiny"], ["forward"], ["torch-eager", "jax-jit"], devices=("cuda",),
                              overrides={"m": 4096, "n": 4096, "k": 16}, repeats=2)
    with Store(tmp_path / "r.db") as store:
        run_id = runner.new_run(store, specs, FAST)
        done = runner.execute(store, run_id, specs, FAST, envmod.fingerprint(None, gpu_probe))
    assert [m.status for m in done] == ["ok"] * 4, [m.error for m in done]
    for m in done:
        if m.spec.repeat:
            assert m.settings["reference"]["source"].startswith("reused: the comparison of the same output bits"), \
                m.settings["reference"]
            assert m.timeline["parity_copy_s"] < 0.1 and m.timeline["digest_s"] < 1.0, m.timeline
