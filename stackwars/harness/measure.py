"""Measure one cell inside a worker process (the worker's ``target``).

Order of events, each phase kept apart and its wall time kept in ``timeline``:

1. load the workload (``workload_s``: a plugin's module or a user's model file is imported
   here, in the worker); import the backend's framework (``import_s``); configure it
   (threads, matmul precision, caches); initialise the device (``device_init_s``: CUDA
   context or JAX's client, and the libraries' handles through one tiny GEMM, plus a tiny
   convolution on CUDA), so that the first call is trace + compile + execute and nothing
   else (``init_s`` = the two);
2. draw the workload's parameters and batch from the seed, rounded to the cell's dtypes;
   prepare (build the model, move data to the device; nothing is compiled yet);
3. baseline RSS, reset the peak-RSS window;
4. first call (trace + compile + run), synchronised on its whole output;
5. compile timers read, outputs copied to the host for the parity check (untimed), except a
   large output whose digest the run has already compared against the same reference
   (``digest_s``, harness/digest.py): its comparison is that one, nothing is copied;
6. second call; a wait until the cell's own child processes are quiet (``settle_s``:
   Inductor's compile pool starting, harness/contention.py); warm-up calls; steady state
   (blocked autorange, every sample kept), with
   the CPU time other processes took on the worker's CPUs while the samples were taken
   (``contention``); on CUDA then the same calls on the device's clock (``device_time_s``,
   CUDA events), the host's time to issue a call with the GPU's clocks read meanwhile
   (``issue_s``, harness/issue.py), and the energy window (``energy_s``);
7. memory peaks, compile statistics (``stats_s``; recompiles during the steady state
   count), and what actually ran (``observe``: one extra untimed step where that needs a
   profiler); with ``profile_steps``, that many more steps under the framework's profiler,
   the trace written to ``profile_to`` and summarised (harness/profile.py);
8. FLOPs and bytes moved (``counts_s``: a user's model is counted by a framework's counter);
9. parity: against the float64 reference, computed once per run and shared by its cells
   (``reference.py``), or against another backend's outputs where no reference fits; a
   digested output's comparison is kept for the run's next output with its bits. A
   mismatch is status ``parity_fail``; timings are kept.

Before the framework is imported and after the parity check, the machine's canary
(stackwars/canary.py, ``canary``: a fixed program, about 60 ms both together on the 2-core
VM) says whether the host ran at its usual speed; a process whose canary is off its run's
decides nothing.

The harness's own cost of a cell (``overhead_s`` in the row) is the worker's wall time
minus the measured windows (first call, second call, warm-up, steady state, and on CUDA
the device-clock, issue and energy windows) and the reference computed for it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import psutil

from stackwars import canary, registry
from stackwars.backends.base import Prepared
from stackwars.errors import Unsupported
from stackwars.harness import energy, issue, progress
from stackwars.harness import reference as refmod
from stackwars.harness.contention import ForeignLoad, settle_descendants
from stackwars.harness.memory import PeakRSS, current_rss
from stackwars.harness.timer import Timer
from stackwars.records import CellSpec, Measurement, MeasureConfig, MemoryStats
from stackwars.workloads.base import itemsize, param_dtype, round_all


def _count_entries(path: str | None) -> int | None:
    if not path or not os.path.isdir(path):
        return None
    return sum(len(files) for _, _, files in os.walk(path))


AUTOTUNE_DIR = "xla_gpu_per_fusion_autotune_cache_dir"  # JAX puts XLA's autotuning cache here
DEVICE_TIME_SAMPLES = 30  # blocks timed on the device's clock after the steady state (CUDA cells)


def cache_contents(path: str | None) -> dict[str, int] | None:
    """Files per cache in a compile-cache directory: JAX's compiled executables, XLA's GPU
    autotuning results (``jax_persistent_cache_enable_xla_caches``), Inductor's and Triton's."""
    if not path or not os.path.isdir(path):
        return None
    jax_dir = os.path.join(path, "jax")
    autotune = _count_entries(os.path.join(jax_dir, AUTOTUNE_DIR)) or 0
    return {"jax_executables": (_count_entries(jax_dir) or 0) - autotune, "xla_autotune_results": autotune,
            "inductor": _count_entries(os.path.join(path, "inductor")) or 0,
            "triton": _count_entries(os.path.join(path, "triton")) or 0}


def stage(name: str) -> None:
    """Tell the parent where the cell is: a timeout or a crash is reported with its stage."""
    progress.report(event="stage", stage=name)


def since_process_start() -> float | None:
    """Seconds since this process was made (forked or spawned), to the clock tick (10 ms).

    On Linux from the kernel's own counts, both since boot: the process's start
    (``/proc/self/stat``, field 22, in clock ticks) against ``CLOCK_BOOTTIME``. Not psutil's
    ``create_time()``: it adds the start to the boot time that ``/proc/stat`` gives in whole
    seconds, so every process's age is off by the same fraction of a second (a child read
    0.67 s old as it was forked on one VM, 0.15 s on another)."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):  # no procfs (macOS): its create_time is exact
        try:
            return max(0.0, time.time() - psutil.Process().create_time())
        except psutil.Error:
            return None


@dataclass
class PreparedCell:
    """A cell ready for its first call: what measure_cell and the fidelity benchmark share."""

    cell: CellSpec
    config: MeasureConfig
    workload: Any
    cfg: Any
    framework: str
    backend: Any
    prepared: Prepared
    params: dict[str, Any]
    batch: dict[str, Any]
    settings: dict[str, Any]
    timeline: dict[str, float] = field(default_factory=dict)


def prepare_cell(spec: Mapping[str, Any], config: Mapping[str, Any],
                 cache: Mapping[str, Any] | None = None) -> PreparedCell:
    timeline: dict[str, float] = {}
    startup = since_process_start()
    if startup is not None:
        timeline["startup_s"] = startup  # interpreter, stackwars imports, reading the task
    cell = CellSpec.from_dict(spec)
    cfg_m = MeasureConfig.from_dict(config)
    cache = dict(cache or {})
    stage("workload")
    t0 = time.perf_counter()
    workload = registry.workload(cell.workload)  # a plugin's module or a user's model file: imported here
    workload.check_phase(cell.phase)
    cfg = workload.config(cell.preset, dict(cell.overrides))
    bspec = registry.backend(cell.backend)
    why = workload.unsupported(cfg, bspec.framework, bspec.name, cell.phase)
    if why:
        raise Unsupported(why)
    timeline["workload_s"] = time.perf_counter() - t0
    stage("import")
    t0 = time.perf_counter()
    backend = bspec.load(dict(cell.options))
    timeline["import_s"] = time.perf_counter() - t0

    cache["entries_before"] = _count_entries(cache.get("dir"))
    cache["contents_before"] = cache_contents(cache.get("dir"))
    # the mode is what the directory holds, not what was asked for: an empty one is cold
    cache["mode"] = "warm" if cache["entries_before"] else "cold"
    settings: dict[str, Any] = {
        "threads": cfg_m.threads, "matmul_precision": cfg_m.matmul_precision,
        "cache_dir": cache.get("dir"), "cache": cache, "seed": cfg_m.seed,
        # where the workload and the backend came from: built in, or a plugin module (STACKWARS_PLUGINS)
        "origin": {"workload": registry.origin("workload", cell.workload),
                   "backend": registry.origin("backend", cell.backend)},
    }
    settings["applied"] = backend.configure(settings)
    stage("device initialisation")
    t0 = time.perf_counter()
    settings["device_init"] = backend.init_device(cell.device)
    timeline["device_init_s"] = time.perf_counter() - t0

    stage("preparation")
    t0 = time.perf_counter()
    pdtype = param_dtype(cell.dtype, cell.phase)
    params, batch = workload.init(cfg, cfg_m.seed)
    params = round_all(params, pdtype)
    batch = round_all(batch, cell.dtype)
    prepared = backend.prepare(workload, cfg, cell.phase, params, batch, cell.device, cell.dtype)
    settings["backend"] = {"name": bspec.name, "options": backend.options, **prepared.notes}
    timeline["prepare_s"] = time.perf_counter() - t0
    return PreparedCell(cell, cfg_m, workload, cfg, bspec.framework, backend, prepared, params, batch, settings,
                        timeline)


def run_flops(workload: Any, cfg: Any, phase: str, cache: refmod.ReferenceCache) -> tuple[int, str]:
    """The workload's FLOPs a step, computed once per run and read by its other cells from the
    run's shared folder (``cache``; none: computed here): a user's model is counted by a
    framework (a step under PyTorch's flop counter, or a compile for XLA's cost analysis),
    seconds in every process where the built-ins' formulas take microseconds."""
    name = "flops-" + hashlib.sha256(json.dumps([workload.name, cfg.as_dict(), phase], sort_keys=True,
                                                default=str).encode()).hexdigest()[:24]
    with cache.locked(name):
        known = cache.load_meta(name).get("flops")
        if known is not None:
            return int(known), "this run's count, made by an earlier cell"
        flops = int(workload.flops(cfg, phase))
        cache.store_meta(name, {"flops": flops})
    return flops, "counted in this process"


def graph_replay(prepared: Prepared, cell: CellSpec) -> tuple[Any, dict[str, Any]]:
    """With ``cuda_graph_replay``: the warm-up and steady state replay one call captured (after
    the second call) into a CUDA graph, where the cell allows it; the record says what was timed."""
    if cell.backend.startswith("jax") or cell.backend == "torch-mlir-xla":
        return None, {"replayed": False, "why": "timed as calls: XLA replays its own command buffers (CUDA graphs) "
                                                "where it formed them, runs of at least xla_gpu_graph_min_graph_size "
                                                "kernels (jax-jit's compile stats count them from the thunk sequence: xla_command_buffers)"}
    if cell.backend == "torch-cudagraphs":
        return None, {"replayed": False, "why": "torch.compile(mode='reduce-overhead') already replays CUDA graphs"}
    if prepared.graph_replay is None:
        return None, {"replayed": False, "why": f"{cell.phase} cells are timed as calls (only forward calls on "
                                                f"CUDA are captured)"}
    t0 = time.perf_counter()
    replay = prepared.graph_replay()
    return replay, {"replayed": True, "capture_s": time.perf_counter() - t0,
                    "what": "warm-up and steady state: replays of one call captured into a torch.cuda.CUDAGraph "
                            "after the second call; first and second call are ordinary calls"}


def trace_name(cell: CellSpec) -> str:
    """A file name for the cell's trace: its key with anything but [A-Za-z0-9._=-] made '_'."""
    return re.sub(r"[^A-Za-z0-9._=-]", "_", cell.key) + ".trace.json.gz"


def profile_cell(backend: Any, prepared: Prepared, cell: CellSpec, steps: int, folder: str) -> dict[str, Any]:
    """``steps`` profiled steps after every timed one (the profiler never touches the timed
    numbers), the trace kept and summarised. A profiler that fails is recorded, not fatal."""
    from stackwars.harness import profile as profmod

    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, trace_name(cell))
    try:
        info = backend.profile(prepared, steps, path)
        summary = profmod.summarize_file(path, info["format"], cell.device)
    except Exception as exc:  # noqa: BLE001 - the timed cell stands; the profile says why it is missing
        return {"error": f"{type(exc).__name__}: {exc}", "trace": path if os.path.exists(path) else None}
    out = {**info, "trace": path, "trace_bytes": os.path.getsize(path), "steps": steps,
           "after": "the timed calls, the memory readings and the observation step", "summary": summary}
    if summary["steps"] != steps:  # the trace converter drops events past its limits (very long eager steps)
        out["warning"] = (f"the trace holds {summary['steps']} of the {steps} profiled steps; the summary covers "
                          "those (profile fewer steps, or a smaller preset, to see them all)")
    return out


def measure_cell(spec: Mapping[str, Any], config: Mapping[str, Any], peak: Mapping[str, Any] | None = None,
                 cache: Mapping[str, Any] | None = None, reference_dir: str | None = None,
                 profile_to: str | None = None) -> dict[str, Any]:
    stage("canary")
    before = canary.reading()  # the machine's speed, before the framework is imported
    pc = prepare_cell(spec, config, cache)
    if "startup_s" in pc.timeline:  # the interpreter's start, not the canary's
        pc.timeline["startup_s"] = max(0.0, pc.timeline["startup_s"] - before["cost_s"])
    cell, cfg_m, workload, cfg, backend, prepared = pc.cell, pc.config, pc.workload, pc.cfg, pc.backend, pc.prepared
    params, batch, settings, timeline = pc.params, pc.batch, pc.settings, pc.timeline
    pdtype = param_dtype(cell.dtype, cell.phase)

    between = None
    if cfg_m.flush_cache:
        between, settings["flush"] = backend.cache_flusher(cell.device)
    timer = Timer(prepared.call, prepared.sync, between=between)
    steal_before = getattr(psutil.cpu_times(), "steal", None)
    rss = PeakRSS()
    baseline = current_rss()
    stage("first call")
    settings["memory_window"] = backend.start_memory_window(cell.device)
    rss.reset()
    first_s, out = timer.once()
    peak_first = rss.peak()
    t0 = time.perf_counter()
    prepared.after_first_call()
    tolerance = workload.tolerance(cell.dtype, cfg_m.matmul_precision, cell.phase)
    ref_key = refmod.key(workload, cfg, cell.phase, cfg_m.seed, cell.dtype, pdtype)
    ref_cache = refmod.ReferenceCache(reference_dir)
    known = digest = None
    if reference_dir and cfg_m.parity_mode != "peer":
        # a large output the run already compared, bit for bit: neither copied nor compared again
        t1 = time.perf_counter()
        digest = prepared.digest(out)
        known = ref_cache.verified(ref_key, digest, tolerance) if digest else None
        timeline["digest_s"] = time.perf_counter() - t1
    outputs = None if known else prepared.parity_outputs(out)
    del out
    timeline["parity_copy_s"] = time.perf_counter() - t0 - timeline.get("digest_s", 0.0)
    peak_through_first = rss.peak()  # includes the host copies made for the parity check, where made
    rss.reset()  # the steady-state window: the running program's footprint, compile excluded
    stage("second call, warm-up and steady state")
    second_s, out = timer.once()
    del out
    replay = None
    if cfg_m.cuda_graph_replay:
        stage("CUDA graph capture")
        replay, settings["graph_replay"] = graph_replay(prepared, cell)
        if replay is not None:
            timer = Timer(replay, prepared.sync, between=between)
    # the cell's own child processes (Inductor's compile pool starting) quiet before the timed calls
    stage("own child processes settling")
    t0 = time.perf_counter()
    settings["settle"] = settle_descendants()
    timeline["settle_s"] = time.perf_counter() - t0
    others = ForeignLoad()  # what other processes did on our CPUs while the samples were taken
    warm, steady = timer.warm_then_steady(cfg_m.warmup, cfg_m.min_samples, cfg_m.min_time_s, cfg_m.max_samples,
                                          cfg_m.min_block_s, second_s, before_steady=others.start)
    settings["contention"] = others.stop()
    peak_steady = rss.peak()
    rss.stop()
    timeline.update(first_call_s=first_s, second_call_s=second_s, warmup_s=sum(warm), steady_s=steady.total_s)
    steal_after = getattr(psutil.cpu_times(), "steal", None)
    if steal_before is not None and steal_after is not None:
        # CPU time the hypervisor gave to other guests while this cell ran: VM noise, recorded
        settings["cpu_steal_s"] = steal_after - steal_before
    t0 = time.perf_counter()
    device_peak, device_counter = backend.device_peak_memory(cell.device)
    timeline["stats_s"] = time.perf_counter() - t0
    if cell.device == "cuda":
        stage("device clock")
        t0 = time.perf_counter()
        settings["device_time"] = backend.device_times(
            cell.device, replay or prepared.call, prepared.sync,
            min(len(steady.samples), DEVICE_TIME_SAMPLES), steady.number, between)
        timeline["device_time_s"] = time.perf_counter() - t0
        # what the host takes to issue a call and the GPU's clocks meanwhile: host-bound or a
        # slowed device, which the events above cannot tell apart (harness/issue.py)
        stage("host issue time and GPU clocks")
        t0 = time.perf_counter()
        settings["issue"] = issue.issue_times(replay or prepared.call, prepared.sync,
                                              issue.samples_for(statistics.median(steady.samples)),
                                              while_busy=issue.gpu_clocks)
        timeline["issue_s"] = time.perf_counter() - t0
    if cfg_m.energy:
        # a window of its own after the steady state, on the device's energy counter (harness/energy.py)
        stage("energy window")
        t0 = time.perf_counter()
        settings["energy"] = energy.cell_energy(cell.device, replay or prepared.call, prepared.sync, steady.number)
        # a window measured is measurement time; looking for a counter that is not there is the harness's
        timeline["energy_s" if "joules_per_call" in settings["energy"] else "energy_probe_s"] = time.perf_counter() - t0
    stage("compile statistics")
    t0 = time.perf_counter()
    compile_stats = prepared.compile_stats()  # on a GPU, jax-jit's includes a second compile (command buffers)
    not_as_named = prepared.not_as_named()
    memory_analysis = prepared.memory_analysis()
    timeline["stats_s"] += time.perf_counter() - t0
    stage("observation of what ran")
    t0 = time.perf_counter()
    settings["observed"] = prepared.observe()
    timeline["observe_s"] = time.perf_counter() - t0
    settings["cache"]["contents_after"] = cache_contents(settings["cache"].get("dir"))
    if cell.phase == "train-step":
        stage("memory anatomy")
        t0 = time.perf_counter()
        try:
            settings["memory_anatomy"] = prepared.anatomy(bool(cfg_m.profile_steps))
        except Exception as exc:  # noqa: BLE001 - the timed cell stands; the record says why this is missing
            settings["memory_anatomy"] = {"error": f"{type(exc).__name__}: {exc}"}
        timeline["anatomy_s"] = time.perf_counter() - t0
    if cfg_m.profile_steps and profile_to:
        stage("profile")
        t0 = time.perf_counter()
        settings["profile"] = profile_cell(backend, prepared, cell, cfg_m.profile_steps, profile_to)
        timeline["profile_s"] = time.perf_counter() - t0

    # the measured program is released before the reference may need the device
    del pc, prepared, timer
    stage("reference and parity")
    if known is not None:
        parity, ref_info = refmod.verified_parity(ref_cache, ref_key, digest, known, cfg_m.parity_mode)
    else:
        parity, ref_info = refmod.reference_parity(
            workload, cfg, cell.phase, params, batch, outputs, tolerance, ref_cache, ref_key, cell.device,
            cell.dtype, cfg_m.parity_mode, backend.spec.framework, backend.spec.name)
        if digest and parity.checked and ref_info.get("source") != "peer":
            ref_cache.keep_verified(ref_key, digest, tolerance, parity, f"{backend.spec.name} process #{cell.repeat}")
            ref_info["digest"] = digest
    settings["reference"] = ref_info
    timeline["reference_s"] = ref_info["computed_s"]
    timeline["parity_s"] = ref_info["seconds"] - ref_info["computed_s"]
    stage("canary")
    after = canary.reading()
    settings["canary"] = {"before": before, "after": after, "program": canary.DESCRIPTION}
    timeline["canary_s"] = before["cost_s"] + after["cost_s"]
    failed = parity.checked and not parity.ok
    error = (f"parity: {parity.failure}" if parity.failure else
             f"parity: max rel err {parity.max_rel_err:.3g} > tolerance {parity.tolerance:.3g}") if failed else None
    if not_as_named:
        settings["not_as_named"] = not_as_named
    stage("counts")
    t0 = time.perf_counter()
    flops, settings["flops_source"] = run_flops(workload, cfg, cell.phase, ref_cache)
    bytes_moved = workload.bytes_moved(cfg, cell.phase, itemsize(cell.dtype), itemsize(pdtype))
    timeline["counts_s"] = time.perf_counter() - t0

    return Measurement(
        spec=cell,
        status="unsupported" if not_as_named else "parity_fail" if failed else "ok",
        framework=backend.spec.framework,
        first_call_s=first_s,
        second_call_s=second_s,
        warmup_s=tuple(warm),
        samples=steady.samples,
        number=steady.number,
        compile=compile_stats,
        memory=MemoryStats(
            peak_device_bytes=device_peak, device_counter=device_counter,
            peak_rss_bytes=max(peak_through_first, peak_steady), peak_rss_first_call_bytes=peak_first,
            peak_rss_steady_bytes=peak_steady, baseline_rss_bytes=baseline,
            rss_counter=rss.counter, compiled=memory_analysis,
        ),
        parity=parity,
        flops=flops,
        bytes_moved=bytes_moved,
        params=cfg.as_dict(),
        settings=settings,
        peak=dict(peak or {}),
        error="; ".join(filter(None, (not_as_named, error))) or None,
        noise_threshold=cfg_m.noise_threshold,
        init_s=timeline["import_s"] + timeline["device_init_s"],
        timeline=timeline,
    ).to_dict()
