"""Measure one cell inside a worker process (the worker's ``target``), phase by phase.

``measure_cell`` is a list of named phases, each a small function; every figure of the record
comes from one of them, and the record says which (``timeline``, and each readout's ``window``):

1. **preparation** (``prepare_cell``): the workload loaded (``workload_s``: a plugin's module
   or a user's model file is imported here, in the worker), the backend's framework imported
   (``import_s``) and configured (threads, matmul precision, caches), the device initialised
   (``device_init_s``: CUDA context or JAX's client, and the libraries' handles through one
   tiny GEMM, plus a tiny convolution on CUDA), so that the first call is trace + compile +
   execute and nothing else (``init_s`` = the two); the parameters and batch drawn from the
   seed, rounded to the cell's dtypes, and prepared (nothing is compiled yet);
2. **first call** (``first_call_phase``): trace + compile + run, synchronised on its whole
   output; the host's peak during it (the compile's memory);
3. **parity copy** (``parity_copy_phase``): compile timers read; the output folded into a
   digest where the run already compared one with the same bits (``digest_s``,
   harness/digest.py: nothing copied), else copied to the host (``parity_copy_s``); the
   device's output released. No figure is read across this phase;
4. **steady window** (``steady_phase``): the second call; a CUDA graph captured where asked;
   the cell's own child processes settled (``settle_s``: Inductor's compile pool starting,
   harness/contention.py); the warm-up; then the steady window, timed in the run's mode
   (latency or throughput, the same for every cell: harness/timer.py), with every readout
   taken from its own calls (harness/window.py): the wall time, on CUDA the device's clock
   (events), the host's issue time and the GPU's clocks, the energy counter, others' CPU time;
5. **memory** (``memory_phase``): one more call with the peaks reset right before it, the
   steady-state peak of the running program: compile, autotuning, the digest and the parity
   copy behind it, what the harness still holds recorded apart;
6. **after** (``after_phase``): compile statistics (recompiles during the steady state
   count), what actually ran (one observed step where that needs a profiler), a train step's
   memory anatomy and, with ``profile_steps``, the profiled steps (harness/profile.py);
7. **parity** (``parity_phase``): against the float64 reference, computed once per run and
   shared by its cells (``reference.py``), or another backend's outputs where no reference
   fits. A mismatch is status ``parity_fail``; timings are kept;
8. the FLOPs and bytes moved (``counts_s``: a user's model is counted by a framework's counter),
   and the record.

Before the framework is imported and after the parity check, the machine's canary
(stackwars/canary.py, ``canary``: a fixed program, about 60 ms both together on the 2-core
VM) says whether the host ran at its usual speed; a process whose canary is off its run's
decides nothing.

The harness's own cost of a cell (``overhead_s`` in the row) is the worker's wall time
minus the measured windows (first call, second call, warm-up, the steady window, the memory
phase's call) and the reference computed for it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import psutil

from stackwars import canary, registry
from stackwars.backends.base import Prepared
from stackwars.errors import Unsupported
from stackwars.harness import energy, issue, progress, window
from stackwars.harness import reference as refmod
from stackwars.harness.contention import ForeignLoad, settle_descendants
from stackwars.harness.memory import PeakRSS, current_rss
from stackwars.harness.timer import Timer
from stackwars.records import CellSpec, Measurement, MeasureConfig, MemoryStats
from stackwars.stats import CONTENTION_MIN_WINDOW_S
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


@dataclass
class FirstCall:
    """The first call's phase: its time, its output (until the parity copy is made) and the
    host's memory before and during it."""

    seconds: float
    out: Any
    baseline_rss: int
    peak_rss: int


@dataclass
class Held:
    """What the parity copy phase keeps until the comparison at the end: the host copies of the
    outputs (None where a digest the run already compared stands for them) and the digest.
    ``nbytes``: the host memory the copies hold through every later window, which no memory
    figure may count (``memory_phase`` subtracts it)."""

    outputs: dict[str, Any] | None
    digest: str | None
    known: dict[str, Any] | None
    nbytes: int


def first_call_phase(pc: PreparedCell, timer: Timer, rss: PeakRSS) -> FirstCall:
    """Trace, compile and run, synchronised on the whole output; the host's peak during it (the
    compile's memory: ``peak_rss_first_call_bytes``)."""
    stage("first call")
    baseline = current_rss()
    rss.reset()
    seconds, out = timer.once()
    return FirstCall(seconds, out, baseline, rss.peak())


def parity_copy_phase(pc: PreparedCell, first: FirstCall, ref_cache: refmod.ReferenceCache, ref_key: str,
                      tolerance: float, reference_dir: str | None) -> Held:
    """Compile timers read, then the output made comparable: folded into a digest where the run
    already compared one with it (nothing copied), else copied to the host; the device's output
    is released. Between every window: no figure counts what happens here."""
    cfg_m, timeline = pc.config, pc.timeline
    t0 = time.perf_counter()
    pc.prepared.after_first_call()
    known = digest = None
    if reference_dir and cfg_m.parity_mode != "peer":
        # a large output the run already compared, bit for bit: neither copied nor compared again
        t1 = time.perf_counter()
        digest = pc.prepared.digest(first.out)
        known = ref_cache.verified(ref_key, digest, tolerance) if digest else None
        timeline["digest_s"] = time.perf_counter() - t1
    outputs = None if known else pc.prepared.parity_outputs(first.out)
    first.out = None
    timeline["parity_copy_s"] = time.perf_counter() - t0 - timeline.get("digest_s", 0.0)
    # a copy holds its bytes; a view of the output holds the output's: either way resident until parity
    held = sum(int(getattr(a, "nbytes", 0)) for a in (outputs or {}).values())
    return Held(outputs, digest, known, held)


def readouts_for(pc: PreparedCell) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The steady window's readouts on the cell's device (harness/window.py), and the records
    of those that cannot be had here (why)."""
    cell, backend = pc.cell, pc.backend
    live: dict[str, Any] = {}
    absent: dict[str, dict[str, Any]] = {}
    if cell.device == "cuda":
        make, why = backend.device_events(cell.device)
        if make is not None:
            live["device_time"] = window.DeviceClock(make)
        else:
            absent["device_time"] = {"available": False, "why": why}
        live["clocks"] = issue.WindowClocks()
    if pc.config.energy:
        meter, why_not = energy.open_window(cell.device)
        if meter is not None:
            live["energy"] = meter
        else:
            absent["energy"] = why_not
    return live, absent


def steady_phase(pc: PreparedCell, timer: Timer, between: Any) -> tuple[window.Window, Timer]:
    """The second call; where asked, a CUDA graph captured; the cell's own child processes
    settled; the warm-up; then the steady window in the run's timing mode with every readout
    taken from its calls (harness/window.py). Returns the window and the timer its calls ran on
    (a graph's replay where one was captured)."""
    cell, cfg_m, settings, timeline = pc.cell, pc.config, pc.settings, pc.timeline
    stage("second call, warm-up and steady state")
    second_s, out = timer.once()
    del out
    timeline["second_call_s"] = second_s
    if cfg_m.cuda_graph_replay:
        stage("CUDA graph capture")
        replay, settings["graph_replay"] = graph_replay(pc.prepared, cell)
        if replay is not None:
            timer = Timer(replay, pc.prepared.sync, between=between)
    # the cell's own child processes (Inductor's compile pool starting) quiet before the timed calls
    stage("own child processes settling")
    t0 = time.perf_counter()
    settings["settle"] = settle_descendants()
    timeline["settle_s"] = time.perf_counter() - t0
    others = ForeignLoad()  # what other processes did on our CPUs while the samples were taken
    live: dict[str, Any] = {}
    absent: dict[str, dict[str, Any]] = {}

    def open_window() -> list[Any]:  # right before the first sample: the readouts start with the window
        found, missing = readouts_for(pc)
        live.update(found)
        absent.update(missing)
        others.start()
        return list(found.values())

    # never shorter than others' share of its CPUs can be read in (the kernel's 10 ms ticks): a window that
    # could not be judged would count as clean (verdict/gate.py)
    min_time_s = max(cfg_m.min_time_s, CONTENTION_MIN_WINDOW_S)
    warm, steady = timer.warm_then_steady(cfg_m.warmup, cfg_m.min_samples, min_time_s, cfg_m.max_samples,
                                          cfg_m.min_block_s, second_s, before_steady=open_window,
                                          mode=cfg_m.timing_mode, issue=cell.device == "cuda")
    settings["contention"] = others.stop()
    w = window.Window(warm, steady)
    records: dict[str, dict[str, Any]] = dict(absent)
    if "device_time" in live:
        records["device_time"] = live["device_time"].record(steady.number)
    clocks = live["clocks"].record() if "clocks" in live else None
    if cell.device == "cuda":
        records["issue"] = issue.issue_record(steady.issue, clocks)
    if "energy" in live:
        records["energy"] = energy.close_window(cell.device, live["energy"])
    w.readouts = records
    settings.update(records)
    settings["window"] = w.record()
    timeline.update(warmup_s=sum(warm), steady_s=steady.total_s)
    return w, timer


def memory_phase(pc: PreparedCell, timer: Timer, rss: PeakRSS, first: FirstCall, held: Held) -> MemoryStats:
    """The steady-state peak of the running program: one more call after the steady window, its
    peaks reset right before it (the host's high-water mark; PyTorch's allocator; XLA's, which
    cannot be reset, from its memory analysis: backends/jax_common.steady_peak). Compile and
    autotuning are behind it, the digest and the parity copy too; what the harness still holds
    (the parity copies, a flush buffer) is recorded apart, and no figure counts it
    (figures.added_memory). The same in a cold process as in a warm one."""
    cell, backend, settings, timeline = pc.cell, pc.backend, pc.settings, pc.timeline
    stage("memory")
    compiled = pc.prepared.memory_analysis()
    flush = settings.get("flush") or {}
    t0 = time.perf_counter()
    rss.reset()
    settings["memory_window"] = backend.start_memory_window(cell.device)
    seconds, out = timer.once(between=False)  # the window's program; no flush before it
    del out
    peak_memory = rss.peak()
    rss.stop()
    device_peak, device_counter = backend.device_peak_memory(cell.device, settings["memory_window"], compiled)
    timeline["memory_s"] = seconds
    timeline["memory_phase_s"] = time.perf_counter() - t0
    on_device = cell.device == "cuda"  # a GPU's flush buffer is on the device; a CPU's in the host's memory
    return MemoryStats(
        peak_device_bytes=device_peak, device_counter=device_counter,
        peak_rss_bytes=max(first.peak_rss, peak_memory), peak_rss_first_call_bytes=first.peak_rss,
        peak_rss_steady_bytes=peak_memory, baseline_rss_bytes=first.baseline_rss,
        rss_counter=rss.counter, compiled=compiled,
        harness_host_bytes=held.nbytes + (0 if on_device else int(flush.get("bytes") or 0)),
        harness_device_bytes=int(flush["bytes"]) if on_device else 0)


def after_phase(pc: PreparedCell, profile_to: str | None) -> tuple[Any, str | None]:
    """Untimed, after everything timed: compile statistics (recompiles during the steady state
    count), what actually ran (one observed step where that needs a profiler), a train step's
    memory anatomy and, with ``profile_steps``, the profiled steps."""
    cell, cfg_m, settings, timeline, prepared = pc.cell, pc.config, pc.settings, pc.timeline, pc.prepared
    stage("compile statistics")
    t0 = time.perf_counter()
    compile_stats = prepared.compile_stats()  # on a GPU, jax-jit's includes a second compile (command buffers)
    not_as_named = prepared.not_as_named()
    timeline["stats_s"] = time.perf_counter() - t0
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
        settings["profile"] = profile_cell(pc.backend, prepared, cell, cfg_m.profile_steps, profile_to)
        timeline["profile_s"] = time.perf_counter() - t0
    if not_as_named:
        settings["not_as_named"] = not_as_named
    return compile_stats, not_as_named


def parity_phase(pc: PreparedCell, held: Held, ref_cache: refmod.ReferenceCache, ref_key: str,
                 tolerance: float) -> Any:
    """The outputs against the float64 reference (computed once per run and shared by its cells),
    or against another backend's where no reference fits; a digested output's comparison is kept
    for the run's next output with its bits. The measured program is released first (the
    reference may need the device)."""
    cell, cfg_m, settings, timeline = pc.cell, pc.config, pc.settings, pc.timeline
    workload, cfg, backend = pc.workload, pc.cfg, pc.backend
    stage("reference and parity")
    if held.known is not None:
        parity, ref_info = refmod.verified_parity(ref_cache, ref_key, held.digest, held.known, cfg_m.parity_mode)
    else:
        parity, ref_info = refmod.reference_parity(
            workload, cfg, cell.phase, pc.params, pc.batch, held.outputs, tolerance, ref_cache, ref_key, cell.device,
            cell.dtype, cfg_m.parity_mode, backend.spec.framework, backend.spec.name, cfg_m.matmul_precision)
        if held.digest and parity.checked and ref_info.get("source") != "peer":
            ref_cache.keep_verified(ref_key, held.digest, tolerance, parity,
                                    f"{backend.spec.name} process #{cell.repeat}")
            ref_info["digest"] = held.digest
    held.outputs = None
    settings["reference"] = ref_info
    timeline["reference_s"] = ref_info["computed_s"]
    timeline["parity_s"] = ref_info["seconds"] - ref_info["computed_s"]
    return parity


def measure_cell(spec: Mapping[str, Any], config: Mapping[str, Any], peak: Mapping[str, Any] | None = None,
                 cache: Mapping[str, Any] | None = None, reference_dir: str | None = None,
                 profile_to: str | None = None) -> dict[str, Any]:
    """One cell-process, phase by phase (the module docstring): the canary, the preparation,
    the first call, the parity copy, the steady window with its readouts, memory, what ran,
    parity, the canary again, the counts, and the record."""
    stage("canary")
    before = canary.reading()  # the machine's speed, before the framework is imported
    pc = prepare_cell(spec, config, cache)
    if "startup_s" in pc.timeline:  # the interpreter's start, not the canary's
        pc.timeline["startup_s"] = max(0.0, pc.timeline["startup_s"] - before["cost_s"])
    cell, cfg_m, workload, cfg, backend = pc.cell, pc.config, pc.workload, pc.cfg, pc.backend
    settings, timeline = pc.settings, pc.timeline
    pdtype = param_dtype(cell.dtype, cell.phase)

    between = None
    if cfg_m.flush_cache:
        between, settings["flush"] = backend.cache_flusher(cell.device)
    timer = Timer(pc.prepared.call, pc.prepared.sync, between=between)
    steal_before = getattr(psutil.cpu_times(), "steal", None)
    rss = PeakRSS()
    first = first_call_phase(pc, timer, rss)
    tolerance = workload.tolerance(cell.dtype, cfg_m.matmul_precision, cell.phase)
    ref_key = refmod.key(workload, cfg, cell.phase, cfg_m.seed, cell.dtype, pdtype)
    ref_cache = refmod.ReferenceCache(reference_dir)
    held = parity_copy_phase(pc, first, ref_cache, ref_key, tolerance, reference_dir)
    win, timer = steady_phase(pc, timer, between)
    steal_after = getattr(psutil.cpu_times(), "steal", None)
    if steal_before is not None and steal_after is not None:
        # CPU time the hypervisor gave to other guests while this cell ran: VM noise, recorded
        settings["cpu_steal_s"] = steal_after - steal_before
    memory = memory_phase(pc, timer, rss, first, held)
    compile_stats, not_as_named = after_phase(pc, profile_to)

    # the measured program is released before the reference may need the device
    params, batch = pc.params, pc.batch
    pc.prepared = None
    del timer
    parity = parity_phase(pc, held, ref_cache, ref_key, tolerance)
    stage("canary")
    after = canary.reading()
    settings["canary"] = {"before": before, "after": after, "program": canary.DESCRIPTION}
    timeline["canary_s"] = before["cost_s"] + after["cost_s"]
    failed = parity.checked and not parity.ok
    error = (f"parity: {parity.failure}" if parity.failure else
             f"parity: max rel err {parity.max_rel_err:.3g} > tolerance {parity.tolerance:.3g}") if failed else None
    stage("counts")
    t0 = time.perf_counter()
    flops, settings["flops_source"] = run_flops(workload, cfg, cell.phase, ref_cache)
    bytes_moved = workload.bytes_moved(cfg, cell.phase, itemsize(cell.dtype), itemsize(pdtype))
    timeline["counts_s"] = time.perf_counter() - t0
    timeline["first_call_s"] = first.seconds
    del params, batch

    return Measurement(
        spec=cell,
        status="unsupported" if not_as_named else "parity_fail" if failed else "ok",
        framework=backend.spec.framework,
        first_call_s=first.seconds,
        second_call_s=timeline["second_call_s"],
        warmup_s=tuple(win.warm),
        samples=win.steady.samples,
        number=win.steady.number,
        compile=compile_stats,
        memory=memory,
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
