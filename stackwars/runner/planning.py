"""Planning: a request's cells, checked before anything runs or is written.

``plan_cells`` validates every name, size and option and expands the cross product into
``CellSpec``s (a user's model checked once in a worker first: ``verify_user_model``);
``default_backends`` / ``backends_for`` choose what a machine runs; ``validate_config``
bounds a MeasureConfig; ``preflight`` refuses a cell whose memory estimate does not fit;
``more_rounds`` plans a look's extra processes; ``check_resumable`` refuses resuming a run on
another machine or library version. Raises ``SpecError``; no framework is imported.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

import psutil

from stackwars import registry, stats
from stackwars.errors import SpecError
from stackwars.harness.isolation import run_task
from stackwars.harness.reference import PARITY_MODES
from stackwars.harness.settings import available_cpus, jax_memory_fraction
from stackwars.parse import comma_list, unique
from stackwars.records import (DEVICES, DTYPES, MATMUL_PRECISIONS, TIMING_MODES, CellSpec, MeasureConfig,
                               same_cpu_kind)
from stackwars.stats import MAX_PROCESSES

DEFAULT_PROCESSES = stats.FIRST_LOOK  # `run` plans this many rounds of each row: its verdict's first look


MIN_MEMORY_LIMIT = 2**29  # 0.5 GiB: below it every worker would be killed before its first call


# versions that must match between a run and its resumption
RESUME_PINNED = ("python", "torch", "jax", "jaxlib", "numpy", "stackwars")



def default_memory_limit() -> int:
    """90% of physical memory: a runaway cell is killed before it takes the machine down."""
    return int(0.9 * psutil.virtual_memory().total)



def probe_guess(devices: str | Sequence[str]) -> dict[str, Any]:
    """What the machine probe will most likely say, known without importing a framework: a
    framework importable where its package is installed, CUDA visible where NVML sees a GPU.
    Only to start fork servers while the probe runs (``start_servers_during_probe``): a wrong
    guess costs a server that idles, never a record (the run plans from the probe itself)."""
    import importlib.util

    def installed(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            return False

    devices = [devices] if isinstance(devices, str) else list(devices)
    cuda = "cuda" in devices and machine_memory()[1] is not None
    return {"torch": {"importable": installed("torch"), "cuda": cuda},
            "jax": {"importable": installed("jax"), "cuda": cuda},
            "torch_mlir": {"importable": installed("torch_mlir")}}



def _choose(kind: str, values: Sequence[str], allowed: Sequence[str]) -> None:
    for v in values:
        if v not in allowed:
            raise SpecError(f"unknown {kind} {v!r}; allowed: {', '.join(allowed)}")



def default_backends(probe: Mapping[str, Any], devices: str | Sequence[str]) -> list[str]:
    """Backends marked default that can run one of ``devices`` here (torch-cudagraphs only
    where CUDA is asked for and visible)."""
    devices = [devices] if isinstance(devices, str) else list(devices)
    return [name for name, spec in registry.backends().items()
            if spec.default and any(spec.availability(probe, d)[0] for d in devices)]


# the models checked in this process, each by its name and where it came from: a model sent again from a
# notebook cell after an edit has the name and another origin (discovery.send_model), and is checked again
_verified: set[tuple[str, str]] = set()


CHECK_TIMEOUT_S = 600.0  # a user model's check, where the command has no --timeout of its own



def user_model_process(wl: Any) -> dict[str, Any]:
    """How the worker that checks or describes a user's model is made (isolation.run_task): on the
    CPU, forked from a server that preloaded the frameworks its file imports (``wl.preload``), as
    its cells' are (harness/forkserver.py): the check is the first thing a run of a model file
    does, and a spawned interpreter imported PyTorch, JAX and Flax again for it each time (about 4
    s on the 2-CPU VM, before the check's own 5-8 s); the server stays for the next check of the
    same frameworks (``stackwars describe`` then ``run``, a test suite)."""
    return {"device": "cpu", **({"preload": list(wl.preload)} if wl.preload else {})}


def verify_user_model(name: str, timeout_s: float = CHECK_TIMEOUT_S,
                      on_note: Callable[[str], None] | None = None,
                      sizes: Sequence[tuple[str, Mapping[str, Any]]] = ()) -> None:
    """A user's model, built on each side and checked at its first preset, in a worker (the
    parent imports no framework) killed after ``timeout_s`` (the cell's): a factory that raises,
    twins whose outputs differ in shape, whose normalisations' settings differ, or which compute
    other numbers in float64 in eval mode, training mode or one train step
    (UserWorkload.check_twins), parameters that cannot be matched, a float32 overflow, a check
    that does not finish, are bad input, named, before anything is stored."""
    wl = registry.workload(name)
    key = (name, registry.origin("workload", name))
    sizes = [(p, dict(o)) for p, o in sizes if wl.config(p, dict(o)) not in wl.facts]
    if key in _verified and not sizes:
        return
    if on_note is not None and key not in _verified:
        on_note(f"checking model {name}: both sides built at its first preset and compared in float64 (a forward "
                f"in eval mode, one in training mode, one train step), in a worker (up to {timeout_s:g} s)")
    o = run_task({"target": "stackwars.model:verify_task", "kwargs": {"workload": name, "sizes": sizes},
                  "process": user_model_process(wl)}, timeout_s, default_memory_limit())
    if o.status == "timeout":
        raise SpecError(f"model {name!r}: its check (each side built, run and compared) did not finish within "
                        f"{timeout_s:g} s, and its worker was killed; nothing was run. A cell of it would take "
                        f"longer still: give a longer --timeout, or look at what its forward waits for")
    if o.status != "ok":
        first = (o.error or o.status).strip().splitlines()[0]
        raise SpecError(f"model {name!r} could not be checked ({o.status}: {first})")
    if o.result.get("problem"):
        raise SpecError(o.result["problem"])
    wl.learn(o.result.get("facts") or ())
    if on_note is not None and key not in _verified and o.result.get("check_s") is not None:
        on_note(f"model {name}: the twins agree (checked in {o.result['check_s']:.1f} s)")
        for note in o.result.get("notes") or ():  # an operation below float64, allowed its rounding
            on_note(f"model {name}: {note}")
    _verified.add(key)


def describe_user_model(name: str, preset: str, overrides: Mapping[str, Any],
                        timeout_s: float = CHECK_TIMEOUT_S) -> dict[str, Any]:
    """``stackwars describe`` of a user's model, computed in a worker (its factories run there)."""
    o = run_task({"target": "stackwars.model:describe_task",
                  "kwargs": {"workload": name, "preset": preset, "overrides": dict(overrides)},
                  "process": user_model_process(registry.workload(name))}, timeout_s, default_memory_limit())
    if o.status == "timeout":
        raise SpecError(f"model {name!r}: describing it did not finish within {timeout_s:g} s; its worker was killed")
    if o.status != "ok":
        first = (o.error or o.status).strip().splitlines()[0]
        raise SpecError(f"model {name!r} could not be described ({o.status}: {first})")
    if o.result.get("problem"):
        raise SpecError(o.result["problem"])
    return o.result["describe"]



def backends_for(backends: Sequence[str], workloads: Sequence[str]) -> list[str]:
    """The default backends, less those of a framework none of the workloads is written in (a
    PyTorch-only model is not planned on JAX: nothing there to measure)."""
    frameworks = set()
    for w in workloads:
        wl = registry.workload(registry.resolve_workload(w))
        frameworks |= set(wl.twin_modules)
    return [b for b in backends if registry.backend(b).framework in frameworks] or list(backends)



def plan_cells(workloads: Sequence[str], presets: Sequence[str], phases: Sequence[str], backends: Sequence[str],
               devices: Sequence[str] = ("cpu",), dtypes: Sequence[str] = ("float32",),
               overrides: Mapping[str, Any] | None = None, options: Mapping[str, Any] | None = None,
               repeats: int = 1, check_timeout_s: float = CHECK_TIMEOUT_S,
               on_note: Callable[[str], None] | None = None) -> list[CellSpec]:
    """The cross product of the request, validated. ``overrides`` may sweep a parameter
    (``KEY: "V1,V2"``, see ``expand_overrides``). ``options`` go to the backends that
    accept them; an option no selected backend accepts is an error. With ``repeats`` > 1
    every cell is planned that many times, round after round, so that slow phases of the
    machine spread over all cells instead of landing on one."""
    if not 1 <= repeats <= MAX_PROCESSES:
        raise SpecError(f"--processes must be from 1 to {MAX_PROCESSES}, got {repeats}")
    # one rule for repeated choices, before anything runs: refused, naming the value
    workloads = [registry.resolve_workload(w) for w in workloads]  # a user's file.py:NAME loads here
    workloads, presets, phases = unique(workloads, "workload"), unique(presets, "--preset"), unique(phases, "--phase")
    backends = unique([registry.canonical_backend(b) for b in backends], "--backend")
    devices, dtypes = unique(devices, "--device"), unique(dtypes, "--dtype")
    if not workloads:
        raise SpecError(f"name at least one workload; available: {', '.join(registry.workloads())}")
    if not backends:
        raise SpecError("no backend selected (none of the default backends is available here); "
                        f"name one with --backend; known: {', '.join(registry.backends())}")
    _choose("device", devices, DEVICES)
    _choose("dtype", dtypes, DTYPES)
    sweep = expand_overrides(overrides or {})
    options = dict(options or {})
    bspecs = [registry.backend(b) for b in backends]
    for opt in options:
        if not any(opt in b.option_defaults for b in bspecs):
            takers = sorted(n for n, b in registry.backends().items() if opt in b.option_defaults)
            raise SpecError(f"option {opt!r} applies to {', '.join(takers) or 'no backend'}; "
                            f"none of the selected backends ({', '.join(backends)}) takes it")
    planned = len(sweep) * len(workloads) * len(presets) * len(phases) * len(bspecs) * len(devices) * len(dtypes)
    if planned * repeats > MAX_CELLS:
        raise SpecError(f"this plan has {planned} cells x {repeats} processes = {planned * repeats} cell-processes, "
                        f"more than the {MAX_CELLS} a run may plan; split it, or measure fewer processes")
    specs = []
    for w in workloads:
        wl = registry.workload(w)
        for over in sweep:
            for preset in presets:
                wl.config(preset, over)  # validates preset and overrides (heads | d_model, sizes > 0)
        for phase in phases:
            wl.check_phase(phase)
        if hasattr(wl, "verify"):  # a user's model: checked, its shapes at every size learnt, in one worker
            verify_user_model(w, check_timeout_s, on_note, [(p, over) for over in sweep for p in presets])
    for over in sweep:
        for w in workloads:
            wl = registry.workload(w)
            if over:
                for preset, phase, device, dtype in itertools.product(presets, phases, devices, dtypes):
                    check_fits_machine(wl, wl.config(preset, over), preset, phase, device, dtype)
        for w, preset, phase, b, device, dtype in itertools.product(workloads, presets, phases, bspecs, devices,
                                                                    dtypes):
            mine = {k: v for k, v in options.items() if k in b.option_defaults}
            b.resolve_options(mine)  # validates values
            specs.append(CellSpec(w, preset, phase, b.name, device, dtype, tuple(over.items()), tuple(mine.items())))
    return [replace(s, repeat=r) for r in range(repeats) for s in specs]



def expand_overrides(overrides: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``--set KEY=V1,V2`` sweeps: the cross product of every comma-separated value list
    (``{"impl": "framework,custom", "rows": "64"}`` -> two override sets). No override: one empty set."""
    keys = list(overrides)
    values = []
    for k in keys:
        v = overrides[k]
        values.append(comma_list(v, f"--set {k}") if isinstance(v, str) else [v])
    return [dict(zip(keys, combo)) for combo in itertools.product(*values)]



@functools.lru_cache(maxsize=1)
def machine_memory() -> tuple[int, int | None]:
    """Total host memory and, where NVML sees one, the first GPU's total memory."""
    device = None
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            if pynvml.nvmlDeviceGetCount():
                device = int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).total)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no NVML: no device figure
        pass
    return int(psutil.virtual_memory().total), device



def memory_need(est: Mapping[str, int], device: str) -> tuple[int, str]:
    """What a cell holds at its peak by a workload's memory estimate (bytes), and where: on the
    CPU the canonical float32 weights beside the running program; on a GPU the running program
    (the host's copy is held against the host's memory apart). The float64 reference is left
    out: where it does not fit, parity compares with another backend (harness/reference.py)."""
    running = est["parameters"] + est["optimizer"] + est["activations"]
    if device == "cuda":
        return running, "GPU memory"
    return est["host_weights"] + running, "memory"


def check_fits_machine(wl: Any, cfg: Any, preset: str, phase: str, device: str, dtype: str) -> None:
    """A size set with --set that no memory of this machine could hold is bad input, refused
    before anything starts (a preset that does not fit is a result: ``oom`` by pre-flight)."""
    est = wl.memory_estimate(cfg, phase, dtype)
    host, gpu = machine_memory()
    need, where = memory_need(est, device if gpu is not None else "cpu")
    have = gpu if where == "GPU memory" else host
    if need > have:
        parts = ", ".join(f"{k} {v / GiB:,.1f}" for k, v in est.items() if v)
        raise SpecError(f"{wl.name} {preset} {phase} {dtype} with these --set sizes needs about {need / GiB:,.1f} GiB "
                        f"(GiB: {parts}), more than this machine's {have / GiB:,.1f} GiB of {where}; nothing was "
                        f"run (a preset that does not fit is measured as oom; sizes you set must fit)")


# sizes bounded before anything is planned: beyond these a request is a typo (a pasted number,
# $(seq ...)) that would plan for hours or fill the memory with cells, not an experiment
MAX_CELLS = 20_000  # cell-processes in one plan


MAX_CALLS = 10_000_000  # warm-up calls, steady-state samples



def _steady_fits_the_timeout(config: MeasureConfig) -> None:
    """A steady state holds at least --min-samples samples, each a block of at least --min-block-time in
    throughput timing, whatever a call lasts: refused up front where that alone would outlast a cell's
    --timeout (the cell would end as a timeout after its compile, having measured nothing usable)."""
    if config.timing_mode != "throughput":
        return
    floor = config.min_samples * config.min_block_s  # inf for an absurd block time: refused, never overflows
    if floor >= config.timeout_s:
        raise SpecError(f"--min-block-time ({config.min_block_s:g} s a block) x --min-samples "
                        f"({config.min_samples}) = {floor:g} s of steady state, not shorter than the per-cell "
                        f"timeout ({config.timeout_s:g} s): every sample is one block, so the steady state alone "
                        "would outlast the cell; allowed: --min-block-time x --min-samples below --timeout (lower "
                        "either, or raise --timeout)")


def validate_config(config: MeasureConfig) -> None:
    if config.matmul_precision not in MATMUL_PRECISIONS:
        raise SpecError(f"unknown matmul precision {config.matmul_precision!r}; allowed: {', '.join(MATMUL_PRECISIONS)}")
    for name, value in (("min-time", config.min_time_s), ("min-block-time", config.min_block_s),
                        ("timeout", config.timeout_s)):
        if not math.isfinite(value):
            raise SpecError(f"{name} must be a finite number of seconds, got {value}")
    checks = [(config.warmup >= 0, "warmup must be >= 0"),
              (config.min_samples >= 1, "min-samples must be >= 1"),
              (config.max_samples >= config.min_samples, "max-samples must be >= min-samples"),
              (config.min_time_s >= 0, "min-time must be >= 0 seconds"),
              (config.min_block_s >= 0, "min-block-time must be >= 0 seconds"),
              (config.timeout_s > 0, "timeout must be > 0 seconds"),
              (config.min_time_s < config.timeout_s,
               f"min-time ({config.min_time_s:g} s per process"
               + (f", --min-time spread over {config.processes} processes" if config.processes > 1 else "")
               + f") must be shorter than the per-cell timeout ({config.timeout_s:g} s): the steady state alone "
               "would outlast it"),
              (1 <= config.processes <= MAX_PROCESSES,
               f"processes must be from 1 to {MAX_PROCESSES}, got {config.processes}"),
              (config.max_processes is None or config.max_processes <= MAX_PROCESSES,
               f"max-processes must be at most {MAX_PROCESSES}, got {config.max_processes}"),
              (config.warmup <= MAX_CALLS, f"warmup must be at most {MAX_CALLS} calls, got {config.warmup}"),
              (config.max_samples <= MAX_CALLS, f"max-samples must be at most {MAX_CALLS}, got {config.max_samples}"),
              (config.threads is None or config.threads >= 1, "threads must be >= 1"),
              (0 <= config.profile_steps <= 100, f"profile steps must be between 0 and 100, got {config.profile_steps}"),
              (not config.profile_steps or bool(config.profile_dir), "profiling needs a folder for the traces"),
              (0 <= config.seed < 2**63, f"seed must be a non-negative integer below 2**63, got {config.seed}"),
              # --aa's back-to-back pairs are the processes that follow the choice: without one there is no pair
              (not config.aa or config.screens,
               f"--aa measures each chosen cell in back-to-back pairs after the choice made on every cell's first "
               f"process: it needs that choice, --processes 2 or more (got {config.processes}) and the screening "
               f"(leave out --no-screen{', given' if not config.screen else ''}); with neither it would measure no "
               f"pair")]
    for ok, msg in checks:
        if not ok:
            raise SpecError(msg)
    _steady_fits_the_timeout(config)
    if config.budget_s is not None and not 0 < config.budget_s < math.inf:
        raise SpecError(f"budget must be a finite number of seconds > 0, got {config.budget_s}")
    if not (math.isfinite(config.margin) and 0 < config.margin < 1):
        raise SpecError(f"margin must be a fraction between 0 and 1 (0.10: the same speed within ±10%), got "
                        f"{config.margin}")
    if config.max_processes is not None and config.max_processes < config.processes:
        raise SpecError(f"max-processes ({config.max_processes}) must be at least --processes ({config.processes})")
    if config.threads is not None:
        n = len(available_cpus())
        if config.threads > n:
            raise SpecError(f"threads={config.threads} but only {n} CPUs are available to this process")
    if config.memory_limit_bytes is not None:
        total = psutil.virtual_memory().total
        if not MIN_MEMORY_LIMIT <= config.memory_limit_bytes <= total:
            raise SpecError(f"memory limit must be between {MIN_MEMORY_LIMIT / GiB:g} GiB (a worker's framework "
                            f"alone takes 0.25-0.6 GiB) and this machine's {total / GiB:.1f} GiB, got "
                            f"{config.memory_limit_bytes / GiB:.3g} GiB")
    if config.timing is not None and config.timing not in TIMING_MODES:
        raise SpecError(f"unknown timing mode {config.timing!r}; allowed: {', '.join(TIMING_MODES)}")
    if config.flush_cache and config.timing_mode != "latency":
        raise SpecError("--flush-l2 flushes the caches before every timed call, so every call is its own sample: "
                        "it needs --timing latency (the default with --flush-l2)")
    if config.parity_mode not in PARITY_MODES:
        raise SpecError(f"unknown parity mode {config.parity_mode!r}; allowed: {', '.join(PARITY_MODES)}")


GiB = 2**30


HEADROOM = 0.9  # leave a tenth of the memory to everything else on the machine



def _gpu_memory() -> tuple[int | None, int | None]:
    """(free, total) bytes of the first GPU as NVML sees them; (None, None) without NVML."""
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            info = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0))
            return int(info.free), int(info.total)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no NVML: no device-side check
        return None, None



def preflight(spec: CellSpec, host_available: int | None = None, device_free: int | None = None,
              parity_mode: str = "auto", device_total: int | None = None) -> dict | None:
    """Refuse a cell whose estimated peak memory exceeds what is available, before anything
    is allocated (every workload estimates its memory: the models in detail, the others from
    their shapes); the worker's RSS watchdog remains the backstop for everything. A refusal is a dict: the
    message, the estimate's parts (bytes) and the memory it was held against.

    The float64 reference counts only when it is forced (``parity_mode="reference"``):
    otherwise a reference that does not fit is replaced by a comparison with another
    backend's outputs (harness/reference.py), and the program alone decides."""
    workload = registry.workload(spec.workload)
    if not hasattr(workload, "memory_estimate"):
        return None
    cfg = workload.config(spec.preset, dict(spec.overrides))
    if hasattr(workload, "verify") and cfg not in workload.facts:
        # a user's model whose shapes at this size this process has not learnt (a resumed run): from a
        # worker, as the plan's were; its factories never run here
        verify_user_model(spec.workload, sizes=[(spec.preset, dict(spec.overrides))])
    est = workload.memory_estimate(cfg, spec.phase, spec.dtype)
    running = est["parameters"] + est["optimizer"] + est["activations"]
    host_available = psutil.virtual_memory().available if host_available is None else host_available
    parts = ", ".join(f"{k} {v / GiB:.1f}" for k, v in est.items() if v)

    def refuse(message: str, where: str, available: int) -> dict:
        return {"message": message + f" (GiB: {parts}); not allocated", "estimate_bytes": est,
                "checked_against": where, "available_bytes": available, "headroom": HEADROOM}

    reference = est["reference"] if parity_mode == "reference" else 0
    if spec.device == "cpu":
        need = est["host_weights"] + max(running, reference)
        if need > HEADROOM * host_available:
            return refuse(f"pre-flight estimate {need / GiB:.1f} GiB > {HEADROOM:.0%} of the "
                          f"{host_available / GiB:.1f} GiB of memory available", "host", host_available)
        return None
    if device_free is None:
        device_free, device_total = _gpu_memory()
    if device_free is not None and running > HEADROOM * device_free:
        return refuse(f"pre-flight estimate {running / GiB:.1f} GiB on the device > {HEADROOM:.0%} of its "
                      f"{device_free / GiB:.1f} GiB free", "device", device_free)
    if device_total is not None and registry.backend(spec.backend).framework == "jax":
        cap = int(jax_memory_fraction() * device_total)  # XLA's allocator grows no further
        if running > HEADROOM * cap:
            return refuse(f"pre-flight estimate {running / GiB:.1f} GiB on the device > {HEADROOM:.0%} of the "
                          f"{cap / GiB:.1f} GiB JAX's allocator may take (XLA_PYTHON_CLIENT_MEM_FRACTION="
                          f"{jax_memory_fraction():g} of {device_total / GiB:.1f} GiB)", "jax allocator", cap)
    host_need = est["host_weights"] + reference
    if host_need > HEADROOM * host_available:
        return refuse(f"pre-flight estimate {host_need / GiB:.1f} GiB of host memory (weights"
                      f"{' and the float64 reference' if reference else ''}) > {HEADROOM:.0%} of "
                      f"{host_available / GiB:.1f} GiB available", "host", host_available)
    return None



def more_rounds(plan: Sequence[CellSpec], wanted: Mapping[str, int], pairs: Sequence[tuple[str, str]] = (),
                seed: int = 0) -> list[CellSpec]:
    """More processes of planned cells: ``wanted`` maps a cell's key without its process number
    to how many to add. Numbered after the cell's last process and interleaved round by round
    (A B A B, not A A B B), like the plan itself. ``pairs``: (PyTorch cell, JAX cell) of a verdict,
    whose processes of one round stand next to each other in an order drawn for that round (RMIT,
    Abedi & Brecht: a slow stretch of the host falls on both, and on neither first more often);
    the draw is seeded by the run's ``seed``, the pair and the process number, so a resumed run
    plans the same order."""
    last: dict[str, CellSpec] = {}
    for s in plan:
        base = s.key.split("#r")[0]
        if base not in last or s.repeat > last[base].repeat:
            last[base] = s
    partner, start = {}, {base: s.repeat + 1 for base, s in last.items()}
    for a, b in pairs:
        if wanted.get(a) and wanted.get(a) == wanted.get(b) and a in last and b in last and a not in partner \
                and b not in partner:
            partner[a], partner[b] = b, a
            # a round's two processes take one number (the verdict pairs them by it), after both cells' last
            start[a] = start[b] = max(start[a], start[b])
    out = []
    for k in range(max(wanted.values(), default=0)):
        done: set[str] = set()
        for base, n in wanted.items():
            if k >= n or base not in last or base in done:
                continue
            group = [base]
            if base in partner:
                group = [base, partner[base]]
                if random.Random(f"{seed}:{min(group)}|{max(group)}:{start[base] + k}").random() < 0.5:
                    group.reverse()
            for cell in group:
                done.add(cell)
                out.append(replace(last[cell], repeat=start[cell] + k))
    return out


def check_resumable(run_env: Mapping[str, Any], env: Mapping[str, Any]) -> None:
    before, now = run_env.get("versions", {}), env.get("versions", {})
    diffs = [f"{k} {before.get(k)} -> {now.get(k)}" for k in RESUME_PINNED if before.get(k) != now.get(k)]
    if (run_env.get("cpu_model") != env.get("cpu_model") or not same_cpu_kind(run_env, env)
            or run_env.get("gpus") != env.get("gpus")):
        diffs.append("a different machine")
    if diffs:
        raise SpecError("cannot resume: this environment differs from the run's (" + "; ".join(diffs) +
                        "); resume where the run started, or start a new run")
