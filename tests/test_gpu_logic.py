"""The GPU issue's findings, where their logic runs without a GPU: each test names its point.
What needs the device itself is in tests/test_gpu_paths.py (marker gpu)."""

from __future__ import annotations

import pytest

from stackwars.harness.measure import measure_cell
from stackwars.records import CellSpec, MeasureConfig, Measurement

FAST = MeasureConfig(warmup=1, min_samples=2, min_time_s=0.0)


def _cell(spec: CellSpec, config: MeasureConfig = FAST) -> Measurement:
    return Measurement.from_dict(measure_cell(spec.to_dict(), config.to_dict()))


def test_point2_graphs_inductor_skipped_make_the_cell_unsupported_not_a_cudagraphs_result():
    """mode='reduce-overhead' where Inductor cannot capture (here: a CPU graph; on a GPU a host
    copy or a CPU tensor) runs plain kernels; the counter says so and the cell is not
    reported as a CUDA-graph result."""
    m = _cell(CellSpec("gemm", "tiny", "forward", "torch-compile", options=(("mode", "reduce-overhead"),)))
    assert m.status == "unsupported"
    assert "CUDA graphs skipped" in m.error and "cudagraph_skips" in m.error
    assert m.compile.extra["cudagraph_skips"] >= 1
    assert m.samples  # the timings are kept in the record
    plain = _cell(CellSpec("gemm", "tiny", "forward", "torch-compile"))
    assert plain.status == "ok" and plain.compile.extra["cudagraph_skips"] == 0


def test_point2_rope_frequencies_live_on_the_model_device_not_built_from_numpy_in_the_step():
    import numpy as np
    import torch

    from stackwars import registry
    from stackwars.workloads.models import torch_nets
    from stackwars.workloads.models.config import rope_inv_freq

    wl = registry.workload("llama3-8b")
    cfg = wl.config("tiny", {})
    params, _ = wl.init(cfg, 0)
    model = torch_nets.build(cfg, {k: torch.from_numpy(np.asarray(v, np.float32)) for k, v in params.items()})
    assert model.rope_inv.dtype == torch.float64 and model.rope_inv.device.type == "cpu"
    np.testing.assert_array_equal(model.rope_inv.numpy(), rope_inv_freq(cfg))
    assert "rope_inv" not in torch_nets.canonical(model)  # not a weight: no transfer, no parity entry
    # the step itself holds no numpy: Dynamo captures one graph with no graph break
    with torch.no_grad():
        explained = torch._dynamo.explain(model)({"ids": torch.zeros(1, 8, dtype=torch.long)})
    assert explained.graph_break_count == 0


def test_point3_jax_workers_on_a_gpu_may_use_the_device_as_pytorch_does(monkeypatch):
    from stackwars.harness import settings

    monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION", raising=False)
    cuda = settings.device_env("cuda")
    assert cuda == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false",
                    "XLA_PYTHON_CLIENT_MEM_FRACTION": settings.JAX_GPU_MEMORY_FRACTION}
    assert float(settings.JAX_GPU_MEMORY_FRACTION) > 0.75  # above XLA's own default cap
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in settings.device_env("cpu")
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.5")  # a user's choice is kept
    assert settings.device_env("cuda")["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.5"
    assert settings.jax_memory_fraction() == 0.5


def test_point3_the_preflight_check_holds_jax_cells_to_their_allocator_cap(monkeypatch):
    from stackwars import registry, runner
    from stackwars.harness.settings import jax_memory_fraction

    monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION", raising=False)
    wl = registry.workload("gpt2")
    est = wl.memory_estimate(wl.config("paper", {}), "forward", "bfloat16")
    running = est["parameters"] + est["optimizer"] + est["activations"]
    total = int(running / (runner.HEADROOM * jax_memory_fraction()) * 0.99)  # the cap is a little too small
    free = total  # ... but the device is empty: PyTorch fits
    host = 10**15

    def check(backend):
        return runner.preflight(CellSpec("gpt2", "paper", "forward", backend, "cuda", "bfloat16"),
                                host_available=host, device_free=free, device_total=total)

    assert check("torch-compile") is None
    refused = check("jax-jit")
    assert refused["checked_against"] == "jax allocator" and "XLA_PYTHON_CLIENT_MEM_FRACTION=0.95" in refused["message"]
    assert check("jax-jit") and runner.preflight(CellSpec("gpt2", "paper", "forward", "jax-jit", "cuda", "bfloat16"),
                                                 host_available=host, device_free=free, device_total=2 * total) is None


def test_point6_a_cuda_cells_reference_is_computed_in_its_own_worker_first(tmp_path, machine_probe):
    """The gate: CUDA cells of workloads whose reference runs on a GPU, with a run directory
    to hand it over; then the handover itself, run here on the CPU: the reference worker fills
    the cache, the cell's worker reuses it and both say so."""
    from stackwars import registry, runner
    from stackwars.harness import reference as refmod

    gpt2, gemm = registry.workload("gpt2"), registry.workload("gemm")
    assert refmod.own_worker_wanted(gpt2, "cuda", "auto", str(tmp_path))
    assert not refmod.own_worker_wanted(gpt2, "cpu", "auto", str(tmp_path))  # host memory is given back
    assert not refmod.own_worker_wanted(gpt2, "cuda", "peer", str(tmp_path))
    assert not refmod.own_worker_wanted(gpt2, "cuda", "auto", None)  # no directory to hand it over
    assert not refmod.own_worker_wanted(gemm, "cuda", "auto", str(tmp_path))  # its reference is host-only

    spec = CellSpec("gpt2", "tiny", "forward", "torch-eager")
    first = runner.reference_first(spec, FAST, str(tmp_path))
    assert first["status"] == "ok" and first["source"] == "computed" and first["where"] == "cpu", first
    # where the worker's seconds went: each stage timed, within the whole; the stored bytes are
    # float32's (gpt2 tiny's logits: batch 2 x seq 16 x vocab 96)
    stages = first["stages"]
    assert set(stages) == {"float64_run_s", "float64_parts", "float32_run_s", "to_float32_s", "store_s",
                           "stored_bytes"}, stages
    assert sum(stages["float64_parts"].values()) <= stages["float64_run_s"]  # the model's parts, within its run
    assert 0 < sum(v for k, v in stages.items() if k.endswith("_s")) <= first["computed_s"] and first["init_s"] > 0
    assert stages["stored_bytes"] == 2 * 16 * 96 * 4
    assert runner.reference_first(spec, FAST, str(tmp_path))["source"] == "already in the run's cache"
    m = runner.measure_one(spec, FAST, machine_probe, None, reference_dir=str(tmp_path))
    assert m.status == "ok", m.error
    ref = m.settings["reference"]
    assert ref["source"].startswith("reused") and ref["worker"].startswith("own") and m.timeline["reference_s"] == 0
    assert ref["stages"] == stages and ref["init_s"] == first["init_s"]  # the cell's record carries them


def test_point8_hosts_stood_for_on_one_machine_each_get_their_own_gpus():
    from stackwars.studies.scaling.launch import gpu_slices, launch_envs

    assert gpu_slices(2, 2, None) == ["0,1", "2,3"]  # two torchrun launches: never two ranks on cuda:0
    assert gpu_slices(4, 1, None) == ["0", "1", "2", "3"]  # one JAX process per GPU, not each claiming all
    assert gpu_slices(2, 1, "6,7") == ["6", "7"]  # within what this process may use
    with pytest.raises(ValueError, match="need 4 GPUs"):
        gpu_slices(2, 2, "0,1,2")
    envs = launch_envs({"device": "cuda"}, 2, 1, {"PATH": "/bin"})
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["0", "1"] and envs[0]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    cpu = launch_envs({"device": "cpu"}, 2, 1, {"PATH": "/bin"})
    assert cpu == [{"PATH": "/bin"}, {"PATH": "/bin"}]


def test_point5_command_buffers_are_read_from_the_compiled_program_not_assumed():
    """XLA forms a command buffer only from a run of several kernels; what the program holds
    is counted from its optimized HLO (a GPU program's text: here two outlined computations
    as XLA names them, and one GEMM alone with none)."""
    from stackwars.backends.jax_jit import command_buffers

    graphs = """
%command_buffer (p: f32[8,8], p.1: f32[8,8]) -> f32[8,8] {
  %fusion = f32[8,8]{1,0} fusion(%p, %p.1), kind=kLoop, calls=%fused_add
}
%command_buffer.1 (p.2: f32[8]) -> f32[8] {
  %fusion.3 = f32[8]{0} fusion(%p.2), kind=kLoop, calls=%fused_exp
}
ENTRY %main (a: f32[8,8]) -> f32[8,8] {
  %call = f32[8,8]{1,0} call(%a, %a), to_apply=%command_buffer
  %call.1 = f32[8]{0} call(%b), to_apply=%command_buffer.1
}"""
    assert command_buffers(graphs) == 2
    one_gemm = """ENTRY %main (a: f32[4096,4096]) -> f32[4096,4096] {
  %custom-call = (f32[4096,4096]{1,0}, s8[4194304]{0}) custom-call(%a, %a), custom_call_target="__cublas$gemm"
}"""
    assert command_buffers(one_gemm) == 0


def test_point10_xla_flags_say_where_each_value_came_from():
    from stackwars.backends.jax_common import xla_flags_in_effect

    flags = xla_flags_in_effect("--xla_gpu_autotune_level=0")
    assert flags["xla_gpu_autotune_level"] == {"value": "0", "source": "XLA_FLAGS"}
    default = flags["xla_gpu_graph_min_graph_size"]
    assert default["value"] == "5" and "not readable from jaxlib" in default["source"]


def test_point5_a_framework_without_device_events_says_where_device_time_comes_from():
    from stackwars import registry

    jax_backend = registry.backend("jax-jit").load({})
    make, why = jax_backend.device_events("cuda")
    assert make is None and "--profile" in why
    make, why = registry.backend("torch-eager").load({}).device_events("cpu")
    assert make is None and "the wall clock is the device's clock" in why


def test_point6_the_runs_time_split_counts_references_computed_in_their_own_workers():
    from stackwars.report.tables import overhead_summary

    rows = [{"wall_s": 10.0, "measured_s": 4.0, "overhead_s": 6.0, "reference_source": "reused from this run's cache",
             "reference_worker_s": 30.0},
            {"wall_s": 8.0, "measured_s": 4.0, "overhead_s": 4.0, "reference_source": "reused from this run's cache"}]
    line = overhead_summary(rows)
    assert "(computed 0, reused 1); 1 computed in workers of their own, 30.00 s more" in line, line
    # computed while the run's fork servers started: only what it took beyond them is more
    rows[0]["reference_worker_extra_s"] = 2.5
    line = overhead_summary(rows)
    assert "1 computed in workers of their own, 30.00 s, 2.50 s more than the fork servers' start they ran beside" \
        in line, line


def test_point5_command_buffers_formed_on_the_thunk_sequence_are_counted_from_its_dump(tmp_path):
    """Newer XLA forms command buffers after the HLO is final, on the thunk sequence (jaxlib
    0.11.2's CUDA plugin holds only CommandBufferConversionPass): its optimized HLO shows none,
    which made the H100 run read 0 for GPT-2 tiny. The count reads the thunk sequence XLA
    dumps; where an XLA writes none (this CPU's), it falls back to the HLO and says so."""
    import jax
    import jax.numpy as jnp

    from stackwars.backends.jax_jit import count_command_buffers, thunk_command_buffers

    assert thunk_command_buffers(str(tmp_path)) is None  # no dump: not "zero"
    dump = tmp_path / "module_0007.jit_step.thunk_sequence_after_thunk_passes.txt"
    dump.write_text("000: kCommandBuffer\n  000: kKernel fusion\n  001: kKernel fusion.1\n001: kGemm\n"
                    "002: kCommandBuffer\n  000: kKernel fusion.2\n")
    assert thunk_command_buffers(str(tmp_path)) == 2
    lowered = jax.jit(lambda x: jnp.tanh(x @ x) + 1).trace(jnp.ones((8, 8))).lower()
    got = count_command_buffers(lowered, lowered.compile().as_text())
    assert got["xla_command_buffers"] == 0
    assert got["xla_command_buffers_source"].startswith("command_buffer computations in the optimized HLO (no "
                                                        "thunk-sequence dump")


def test_point5_the_issue_time_and_the_device_clock_come_from_the_timed_calls_themselves():
    """harness/window.py: each sample starts after a sync, so its first call is timed to its
    return (the host's part), not to its output's completion; the device's events bracket the
    very calls the host clock times (the end event after the last call, before the sync); the
    GPU's clocks are read between samples, outside the clock. No window of calls of its own."""
    from stackwars.harness.timer import Timer
    from stackwars.harness.window import DeviceClock

    now, events = [0.0], []

    def call():
        now[0] += 1.0  # the host's part: issuing the call
        events.append("call")
        return "out"

    def sync(outs):
        now[0] += 10.0  # the device's part, which the issue time must not hold
        events.append("sync")

    class Events:  # a device clock that sees the device's part of every call
        def start(self):
            events.append("start")
            self.t0 = now[0]

        def end(self):
            events.append("end")
            self.calls = events.count("call")

        def seconds(self):
            return 10.0 * 3  # three calls of 10 s of device time, whatever the host did

    clock = DeviceClock(Events)
    st = Timer(call, sync, lambda: now[0]).steady(min_samples=2, min_time_s=0.0, max_samples=2, number=3,
                                                  readouts=[clock], issue=True, mode="throughput")
    assert st.issue == (1.0, 1.0)  # the first call of each sample, to its return
    assert st.samples == (13.0 / 3, 13.0 / 3)  # three calls issued and synced: 3 s of host, 10 s of device
    assert events[:6] == ["start", "call", "call", "call", "end", "sync"]
    rec = clock.record(st.number)
    assert rec["samples"] == [10.0, 10.0] and rec["window"] == "steady" and rec["number"] == 3


def test_point5_nvml_clocks_and_slowdown_reasons_in_words(monkeypatch):
    """The GPU's clocks from NVML with its reason bits named (a fake NVML: no driver here), and
    a clear why where NVML cannot start."""
    import sys
    import types

    from stackwars.harness import issue

    assert issue.reasons(0x1 | 0x80) == ["idle", "hardware power brake"]
    assert issue.reasons(0x4000) == ["unknown reason bits 0x4000"]
    fake = types.SimpleNamespace(
        NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2, nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda i: f"gpu{i}",
        nvmlDeviceGetClockInfo=lambda h, which: {1: 1410, 2: 2619}[which],
        nvmlDeviceGetMaxClockInfo=lambda h, which: 1980,
        nvmlDeviceGetTemperature=lambda h, sensor: 71,
        nvmlDeviceGetPowerUsage=lambda h: 612_000,
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0x4 | 0x40)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert issue.gpu_clocks() == {"sm_mhz": 1410, "sm_max_mhz": 1980, "mem_mhz": 2619, "temperature_c": 71,
                                  "power_w": 612.0, "reasons": ["software power cap", "hardware thermal slowdown"]}

    def no_driver():
        raise RuntimeError("NVML Shared Library Not Found")

    monkeypatch.setattr(fake, "nvmlInit", no_driver)
    assert issue.gpu_clocks() == {"why": "NVML cannot be initialised (RuntimeError: NVML Shared Library Not Found)"}


def test_point5_a_cpu_cell_has_no_issue_window():
    """The issue time and the clocks are a CUDA cell's evidence; a CPU cell's record has none."""
    m = _cell(CellSpec("gemm", "tiny", "forward", "torch-eager"))
    assert "issue" not in m.settings and m.to_row()["issue_median_s"] is None
    # every cell waits for its own busy children before its timed calls, and says how long
    assert m.settings["settle"]["quiet"] and m.timeline["settle_s"] >= m.settings["settle"]["waited_s"]


def test_point6_the_reference_workers_server_preloads_what_a_model_reference_imports(tmp_path):
    """In a fresh interpreter holding only what the reference worker's server preloads, a model's
    float64 reference imports no framework module of its own: building the twin on the meta
    device imported torch._dynamo (2.5 s of the worker's float64 run on the 2-core VM)."""
    import json
    import subprocess
    import sys

    from stackwars import runner

    preload = runner.reference_process(CellSpec("gpt2", "tiny", "forward", "torch-eager"), FAST, None)["preload"]
    script = (
        "import importlib, json, sys\n"
        f"for name in {preload!r}: importlib.import_module(name)\n"
        "from stackwars import registry\n"
        "wl = registry.workload('gpt2'); cfg = wl.config('tiny', {}); p, b = wl.init(cfg, 0)\n"
        "before = set(sys.modules)\n"
        "wl.reference(cfg, 'forward', p, b)\n"
        "print(json.dumps(sorted(m for m in set(sys.modules) - before if m.startswith('torch'))))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    late = json.loads(out.stdout.strip().splitlines()[-1])
    assert not [m for m in late if m.startswith(("torch._dynamo", "torch._inductor"))], late


def test_point3_jax_initialisation_compiles_without_autotuning_and_survives_an_option_xla_refuses(monkeypatch):
    """JAX's device initialisation compiles its own programs with XLA's autotuning off (on the
    H200 a cold process spent 3.6-4.1 s compiling them); the record keeps the options. An XLA
    that does not know an option refuses it: the programs are then compiled as XLA would, and
    the record says why, rather than every JAX cell failing."""
    from stackwars.backends import jax_common

    steps = jax_common.init_jax_device("cpu")
    assert steps["compile_options"] == {"xla_gpu_autotune_level": 0} and "compile_options_refused" not in steps
    seen = []
    real = jax_common._init_run
    monkeypatch.setattr(jax_common, "_init_run", lambda fn, *a, options: seen.append(dict(options)) or
                        real(fn, *a, options=options))
    monkeypatch.setattr(jax_common, "INIT_COMPILE_OPTIONS", {"xla_no_such_option_stackwars": 1})
    steps = jax_common.init_jax_device("cpu")
    assert steps["compile_options"] == {} and "xla_no_such_option_stackwars" in steps["compile_options_refused"]
    assert seen == [{"xla_no_such_option_stackwars": 1}, {}]  # refused, then compiled without it

    def broken(fn, *a, options):
        raise RuntimeError("INTERNAL: something else went wrong")

    monkeypatch.setattr(jax_common, "_init_run", broken)
    with pytest.raises(RuntimeError, match="something else"):  # any other failure is not swallowed
        jax_common.init_jax_device("cpu")
