"""Plan cells, measure each in a worker, store each as it finishes.

Plain functions the CLI wraps (and tests call directly):

* ``plan_cells``: validate every name, size and option, and expand the cross product
  into ``CellSpec``s. Raises ``SpecError`` before anything is run or written.
* ``execute``: run the planned cells, one fresh worker each, and append every result
  to the store in its own transaction; callbacks report progress.
* ``new_run`` / ``resume_run``: the two ways of starting; resume refuses an environment
  whose library versions differ from the run's.
* ``measure_peaks``: the device roofline, stored for later runs.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import shutil
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

import psutil

from stackwars.stats import CONTENTION_THRESHOLD, MAX_PROCESSES
from stackwars import registry, stats
from stackwars.errors import SpecError
from stackwars.executors import Executor, Placement, Serial
from stackwars.parse import comma_list, unique
from stackwars.harness import env as envmod
from stackwars.harness import reference as refmod
from stackwars.harness.isolation import Outcome, run_inline, run_task
from stackwars.records import (DEVICES, DTYPES, MATMUL_PRECISIONS, TIMING_MODES, CellSpec, Env, Measurement, MeasureConfig,
                               same_cpu_kind)
from stackwars.store.results import Store, StoreWriteError, keep_pending
from stackwars.harness import tmp

PROBE_TIMEOUT_S = 300
DEFAULT_PROCESSES = stats.MIN_PROCESSES  # `run` measures each cell in this many processes: enough for a verdict
MIN_MEMORY_LIMIT = 2**29  # 0.5 GiB: below it every worker would be killed before its first call
# versions that must match between a run and its resumption
RESUME_PINNED = ("python", "torch", "jax", "jaxlib", "numpy", "stackwars")


def default_memory_limit() -> int:
    """90% of physical memory: a runaway cell is killed before it takes the machine down."""
    return int(0.9 * psutil.virtual_memory().total)


def probe_machine(inline: bool = False, meanwhile: Callable[[], Any] | None = None) -> dict[str, Any]:
    """What this machine can run (harness/probe.py): PyTorch's side and JAX's each in a worker
    of its own, both at once; one after the other in one worker they took 3.9 s on the 2-core
    VM (2.4 s PyTorch, 1.0 s JAX), before any cell of a run could start. ``meanwhile``: work
    done here while the probe's workers run (``start_servers_during_probe``).

    The answer is kept between commands (harness/probe.py: the same host, boot, GPUs, install
    and environment, under a day old): a command that finds it runs no worker and leaves
    ``meanwhile`` to the run (it plans from the answer at once). ``inline`` probes in this
    process, every time (its frameworks are imported here anyway)."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from stackwars.harness import probe as probemod

    # device None: no platform forced on the probe (JAX_PLATFORMS removed), so it reports every
    # device each framework can see; the cells pin their own platform
    def task(part: str) -> dict[str, Any]:
        return {"target": f"stackwars.harness.probe:{part}", "kwargs": {}, "process": {"device": None}}

    key = None if inline else probemod.cache_key()
    if key is not None and (kept := probemod.read_cached(key, time.time())) is not None:
        return kept
    probed_at = time.time()
    if inline:
        outcomes = {"probe": run_inline(task("probe"))}
    else:
        parts = ("probe_torch", "probe_jax")
        with ThreadPoolExecutor(max_workers=len(parts), thread_name_prefix="stackwars-probe") as pool:
            futures = [pool.submit(run_task, task(part), timeout_s=PROBE_TIMEOUT_S) for part in parts]
            if meanwhile is not None:
                meanwhile()
            outcomes = dict(zip(parts, (f.result() for f in futures)))
    found: dict[str, Any] = {"status": "ok"}
    for part, outcome in outcomes.items():
        if outcome.result is None:
            names = {"probe": ("torch", "jax"), "probe_torch": ("torch",), "probe_jax": ("jax",)}[part]
            found.update({name: {"importable": False, "error": f"probe failed: {outcome.error}"} for name in names})
        else:
            found.update({k: v for k, v in outcome.result.items() if k != "status"})  # both: the same process_settings
    return found if key is None else probemod.keep(key, found, probed_at)


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


PROBE_DURING = "the machine probe"  # what a batch of servers started while the probe ran says it overlapped


def start_servers_during_probe(plan_for: Callable[[Mapping[str, Any]], Sequence[CellSpec]],
                               devices: str | Sequence[str], config: MeasureConfig,
                               references: str | None = None) -> dict[str, Any] | None:
    """The first batch of fork servers a new run here will want (its first process number's,
    and the next ones' where they fit), started while the machine probe's workers run instead of
    after them: both are imports (PyTorch's CUDA build took 3-5 s on an H100), and the run cannot
    start before either. ``plan_for``: the run's cells given a probe, here given ``probe_guess``
    (a plan the guess makes it refuse starts nothing). The requests are the serial executor's
    first ones exactly, so ``execute`` finds these servers running and starts none of them
    again; the run itself plans from the probe. ``references``: the run's reference folder
    (``run_references``), into which the float64 references its CUDA cells compute in workers
    of their own are computed meanwhile (``start_servers_ahead``); without it a folder of its
    own stands for it, and the references wait for their cells."""
    from stackwars import executors

    guess = probe_guess(devices)
    try:
        specs = list(plan_for(guess))
    except SpecError:
        return None
    if not specs:
        return None
    first = specs[0].repeat
    folder = references or tmp.mkdtemp("probe-references")  # the run's reference folder: empty at its start
    try:
        return start_servers_ahead(sorted(specs, key=lambda s: s.repeat != first), config, guess, executors.here,
                                   folder, during=PROBE_DURING, references_meanwhile=references is not None)
    finally:
        if references is None:
            shutil.rmtree(folder, ignore_errors=True)


def run_references() -> str:
    """A new run's float64 reference folder, made before the machine probe so that the references
    can be computed while it runs (``start_servers_during_probe``); the run removes it when it
    ends, and this process at its exit where no run took it."""
    import atexit

    folder = tmp.mkdtemp("reference")
    atexit.register(shutil.rmtree, folder, True)
    return folder


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


_verified: set[str] = set()


CHECK_TIMEOUT_S = 600.0  # a user model's check, where the command has no --timeout of its own


def verify_user_model(name: str, timeout_s: float = CHECK_TIMEOUT_S,
                      on_note: Callable[[str], None] | None = None) -> None:
    """A user's model, built on each side and run forward once at its first preset, in a
    worker (the parent imports no framework) killed after ``timeout_s`` (the cell's): a
    factory that raises, twins whose outputs differ in shape or in their numbers
    (UserWorkload.check_numbers) or parameters that cannot be matched, a check that does not
    finish, are bad input, named, before anything is stored."""
    if name in _verified:
        return
    from stackwars.harness.isolation import run_task

    if on_note is not None:
        on_note(f"checking model {name}: both sides built, run once at its first preset and their outputs "
                f"compared, in a worker (up to {timeout_s:g} s)")
    o = run_task({"target": "stackwars.model:verify_task", "kwargs": {"workload": name},
                  "process": {"device": "cpu"}}, timeout_s, default_memory_limit())
    if o.status == "timeout":
        raise SpecError(f"model {name!r}: its check (each side built and run forward once) did not finish within "
                        f"{timeout_s:g} s, and its worker was killed; nothing was run. A cell of it would take "
                        f"longer still: give a longer --timeout, or look at what its forward waits for")
    if o.status != "ok":
        first = (o.error or o.status).strip().splitlines()[0]
        raise SpecError(f"model {name!r} could not be checked ({o.status}: {first})")
    if o.result.get("problem"):
        raise SpecError(o.result["problem"])
    _verified.add(name)


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
    for over in sweep:
        for w in workloads:
            wl = registry.workload(w)
            for preset in presets:
                wl.config(preset, over)  # validates preset and overrides (heads | d_model, sizes > 0)
            for phase in phases:
                wl.check_phase(phase)
            if hasattr(wl, "verify"):  # a user's model: both sides built and run once, before anything is stored
                verify_user_model(w, check_timeout_s, on_note)
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


def check_fits_machine(wl: Any, cfg: Any, preset: str, phase: str, device: str, dtype: str) -> None:
    """A size set with --set that no memory of this machine could hold is bad input, refused
    before anything starts (a preset that does not fit is a result: ``oom`` by pre-flight)."""
    est = wl.memory_estimate(cfg, phase, dtype)
    running = est["parameters"] + est["optimizer"] + est["activations"]
    host, gpu = machine_memory()
    need, where, have = est["host_weights"] + running, "memory", host
    if device == "cuda" and gpu is not None:
        need, where, have = running, "GPU memory", gpu
    if need > have:
        parts = ", ".join(f"{k} {v / GiB:,.1f}" for k, v in est.items() if v)
        raise SpecError(f"{wl.name} {preset} {phase} {dtype} with these --set sizes needs about {need / GiB:,.1f} GiB "
                        f"(GiB: {parts}), more than this machine's {have / GiB:,.1f} GiB of {where}; nothing was "
                        f"run (a preset that does not fit is measured as oom; sizes you set must fit)")


# sizes bounded before anything is planned: beyond these a request is a typo (a pasted number,
# $(seq ...)) that would plan for hours or fill the memory with cells, not an experiment
MAX_CELLS = 20_000  # cell-processes in one plan
MAX_CALLS = 10_000_000  # warm-up calls, steady-state samples


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
              (0 <= config.seed < 2**63, f"seed must be a non-negative integer below 2**63, got {config.seed}")]
    for ok, msg in checks:
        if not ok:
            raise SpecError(msg)
    if config.budget_s is not None and not 0 < config.budget_s < math.inf:
        raise SpecError(f"budget must be a finite number of seconds > 0, got {config.budget_s}")
    if config.max_processes is not None and config.max_processes < config.processes:
        raise SpecError(f"max-processes ({config.max_processes}) must be at least --processes ({config.processes})")
    if config.threads is not None:
        from stackwars.harness.settings import available_cpus
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
    from stackwars.harness.reference import PARITY_MODES
    if config.parity_mode not in PARITY_MODES:
        raise SpecError(f"unknown parity mode {config.parity_mode!r}; allowed: {', '.join(PARITY_MODES)}")


def _measurement(spec: CellSpec, framework: str, outcome: Outcome) -> Measurement:
    if outcome.result and "spec" in outcome.result:
        m = Measurement.from_dict(outcome.result)
        process = outcome.result.get("process_settings")
        settings = {**(m.settings or {}), "process": process} if process else m.settings
        return replace(m, wall_s=outcome.wall_s, settings=settings)
    return Measurement(spec=spec, status=outcome.status, framework=framework, error=outcome.error, wall_s=outcome.wall_s,
                       settings={"stage": outcome.stage} if outcome.stage else {})


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
        from stackwars.harness.settings import jax_memory_fraction
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


def measure_one(spec: CellSpec, config: MeasureConfig, probe: Mapping[str, Any], peak: Mapping[str, Any] | None,
                inline: bool = False, reference_dir: str | None = None, run_id: str | None = None,
                placement: Placement | None = None, cache_root: str | None = None) -> Measurement:
    """One cell in a fresh worker. ``reference_dir``: the run's shared reference cache (see
    harness/reference.py); without one the cell computes its own reference. With
    ``config.profile_steps``, the trace goes to ``config.profile_dir``/``run_id``.
    ``placement``: where an executor puts it (its GPU, its cores); recorded on the cell.
    ``cache_root``: the run's compile caches, a folder per cell (``cell_cache``)."""
    m = _measure_one(spec, config, probe, peak, inline, reference_dir, run_id, placement, cache_root)
    if placement is None:
        return m
    return replace(m, settings={**(m.settings or {}), "placement": placement.to_dict()})


def _measure_one(spec, config, probe, peak, inline, reference_dir, run_id, placement, cache_root) -> Measurement:
    bspec = registry.backend(spec.backend)
    ok, reason = bspec.availability(probe, spec.device, dict(spec.options))
    if ok:
        wl = registry.workload(spec.workload)
        reason = wl.unsupported(wl.config(spec.preset, dict(spec.overrides)), bspec.framework, bspec.name, spec.phase)
        ok = reason is None
    if not ok:
        return Measurement(spec=spec, status="unsupported", framework=bspec.framework, error=reason)
    too_big = preflight(spec, parity_mode=config.parity_mode)
    if too_big:
        return Measurement(spec=spec, status="oom", framework=bspec.framework, error=too_big.pop("message"),
                           settings={"memory_guard": {"kind": "pre-flight estimate", **too_big}})
    own_reference = reference_first(spec, config, reference_dir, placement, inline) \
        if refmod.own_worker_wanted(wl, spec.device, config.parity_mode, reference_dir) else None
    cache_dir, source, remove = cell_cache(spec, config, cache_root)
    try:
        task = {
            "target": "stackwars.harness.measure:measure_cell",
            "kwargs": {"spec": spec.to_dict(), "config": config.to_dict(), "peak": dict(peak or {}),
                       "cache": {"source": source, "dir": cache_dir},
                       "reference_dir": reference_dir, "profile_to": profile_folder(config, run_id)},
            "process": process_request(spec, config, placement, cache_dir),
        }
        outcome = run_inline(task) if inline else run_task(task, config.timeout_s, config.memory_limit_bytes)
    finally:
        if remove:
            shutil.rmtree(cache_dir, ignore_errors=True)
    m = _measurement(spec, bspec.framework, outcome)
    if own_reference is None:
        return m
    return replace(m, settings={**(m.settings or {}), "reference_worker": own_reference})


def process_request(spec: CellSpec, config: MeasureConfig, placement: Placement | None,
                    cache_dir: str | None) -> dict[str, Any]:
    """How a cell's worker process is made (isolation.run_task): its threads, device, caches,
    environment and cores, and the fork server it comes from: one that preloaded the
    framework (and what the workload's cells import: a user's model file's frameworks whatever
    the backend, a built-in model's twin on that framework), a server of its own for each
    process number of a cell (harness/forkserver.py)."""
    bspec, wl = registry.backend(spec.backend), registry.workload(spec.workload)
    return {"threads": config.threads, "device": spec.device, "cache_dir": cache_dir,
            "env": {**bspec.process_env(dict(spec.options), spec.device),
                    **wl.process_env(wl.config(spec.preset, dict(spec.overrides)), spec.device),
                    **(dict(placement.env) if placement else {})},
            "cpus": list(placement.cpus) if placement and placement.cpus else None,
            "preload": list(dict.fromkeys((*bspec.preload, *wl.preload_for(bspec.framework)))),
            "generation": spec.repeat}


DUET_GENERATION = 10_000  # duets' fork servers numbered apart from the cells' process numbers


def measure_duet(a: CellSpec, b: CellSpec, repeat: int, config: MeasureConfig, cache_root: str | None,
                 inline: bool = False) -> dict[str, Any]:
    """Cells ``a`` and ``b`` (a verdict's two bests, or one cell twice for an A/A check) in one
    fresh worker, alternating (harness/duet.py): its record, or the failure with its status.
    The worker preloads both frameworks and reads each cell's compile caches as a later process
    of that cell would (warm: the duet reads a ratio, not a first call)."""
    caches, remove = {}, []
    folder = tmp.mkdtemp("duet-cache")
    remove.append(folder)
    for side, spec in (("a", a), ("b", b)):
        cache_dir, source, gone = cell_cache(spec, config, cache_root)
        if gone:
            remove.append(cache_dir)
        caches[side] = {"source": source, "dir": cache_dir}
        # one folder for the process, each framework's part of it its cell's (torch: inductor, triton; jax)
        for part in (("inductor", "triton") if registry.backend(spec.backend).framework == "torch" else ("jax",)):
            target = os.path.join(cache_dir, part)
            os.makedirs(target, exist_ok=True)
            if not os.path.exists(os.path.join(folder, part)):
                os.symlink(target, os.path.join(folder, part))
    ra, rb = (process_request(s, config, None, folder) for s in (a, b))
    process = {**ra, "env": {**ra["env"], **rb["env"]}, "preload": list(dict.fromkeys([*ra["preload"],
                                                                                        *rb["preload"]])),
               "generation": DUET_GENERATION + repeat}
    task = {"target": "stackwars.harness.duet:measure_duet",
            "kwargs": {"a": a.to_dict(), "b": b.to_dict(), "config": config.to_dict(), "caches": caches,
                       "seed": config.seed * 1_000_003 + repeat},
            "process": process}
    try:
        outcome = run_inline(task) if inline else run_task(task, config.timeout_s, config.memory_limit_bytes)
    finally:
        for f in remove:
            shutil.rmtree(f, ignore_errors=True)
    result = dict(outcome.result or {})
    if outcome.status != "ok" or result.get("status") != "ok":
        result = {"status": outcome.status if outcome.status != "ok" else result.get("status", "error"),
                  "error": outcome.error or result.get("error"), "stage": outcome.stage,
                  "a": a.to_dict(), "b": b.to_dict()}
    return {**result, "repeat": repeat, "wall_s": outcome.wall_s}


def study_process(backend: str, device: str, cache_dir: str | None, threads: int | None = None) -> dict[str, Any]:
    """How a study's worker for one backend is made (isolation.run_task): a fresh process on
    ``device`` with its own compile caches, forked, as a cell's, from a server that preloaded
    the backend's framework (the study's own module is read in the child); a spawned
    interpreter imported PyTorch and Inductor again for every variant of a study."""
    return {"threads": threads, "device": device, "cache_dir": cache_dir,
            "preload": list(registry.backend(backend).preload)}


def reference_process(spec: CellSpec, config: MeasureConfig, placement: Placement | None) -> dict[str, Any]:
    """How a cell's reference worker is made (``reference_first``): forked, like every cell's,
    from a server that preloaded PyTorch (the references a GPU computes are the PyTorch twins
    in float64), one server for every reference of the run. torch._dynamo too: a twin is
    built on the meta device, whose initialisers dispatch through torch._refs, which imports
    it (2.5 s of a fresh worker's float64 run on the 2-core VM)."""
    return {"threads": config.threads, "device": spec.device, "cache_dir": None,
            "env": dict(placement.env) if placement else {},
            "cpus": list(placement.cpus) if placement and placement.cpus else None,
            "preload": ["stackwars.harness.reference", "torch", "torch._dynamo"]}


EARLY_REFERENCES_AT_ONCE = 4  # reference workers computing meanwhile, at most (each holds a model in float64)
# references computed while servers started, by (folder, key): the first cell of each key records it
_EARLY: dict[tuple[str, str], dict[str, Any]] = {}


def start_servers_ahead(specs: Sequence[CellSpec], config: MeasureConfig, probe: Mapping[str, Any],
                        placement: Callable[[CellSpec], Placement], reference_dir: str | None = None,
                        during: str | None = None, references_meanwhile: bool = True) -> dict[str, Any] | None:
    """Start together the fork servers ``specs`` will be forked from (forkserver.start_ahead),
    leaving out cells that will not start a worker (unsupported here). With ``reference_dir``,
    where a cell will compute its float64 reference in a worker of its own first (a CUDA cell of
    a model) and the folder lacks it: with ``references_meanwhile``, those references are
    computed while the servers start, in workers spawned for them (at most
    ``EARLY_REFERENCES_AT_ONCE`` at once), and waited for before this returns. On the H200
    gpt2's took 11.6 s and resnet50's 1.6 s, each before its first cell, after the 14.7 s the
    servers took to start; nothing is timed while servers start. Else the reference workers'
    server starts in the batch: started as that worker came, it evicted the oldest server of
    the batch, a cell's, and on the H200 the first cells waited for their servers again (7.9 s
    in one cold process) and a later batch restarted the evicted (11.2 s). Between cells only."""
    from concurrent.futures import ThreadPoolExecutor

    from stackwars.harness import forkserver, settings

    if not forkserver.enabled():
        return None
    requests = []
    early: dict[str, CellSpec] = {}  # the references to compute meanwhile, one cell each

    def request(proc: Mapping[str, Any]) -> None:
        env, _ = settings.environment(proc["threads"], proc["device"], None, proc["env"], proc["cpus"])
        requests.append((proc["preload"], env, proc.get("generation") or 0))

    for spec in specs:
        try:
            bspec = registry.backend(spec.backend)
            if not bspec.preload or not bspec.availability(probe, spec.device, dict(spec.options))[0]:
                continue
            wl = registry.workload(spec.workload)
            if wl.unsupported(wl.config(spec.preset, dict(spec.overrides)), bspec.framework, bspec.name, spec.phase):
                continue
            proc = process_request(spec, config, placement(spec), None)
            key = refmod.cell_key(spec, config.seed)
            if refmod.own_worker_wanted(wl, spec.device, config.parity_mode, reference_dir) and \
                    not refmod.ReferenceCache(reference_dir).has(key):
                if references_meanwhile:
                    early.setdefault(key, spec)
                else:
                    request(reference_process(spec, config, placement(spec)))  # needed first: before the cell's
        except Exception:  # noqa: BLE001 - the cell itself records what is wrong with it; its server waits
            continue
        request(proc)
    if not early:
        return forkserver.start_ahead(requests, during)
    pool = ThreadPoolExecutor(max_workers=min(len(early), EARLY_REFERENCES_AT_ONCE),
                              thread_name_prefix="stackwars-reference")
    futures = {key: pool.submit(reference_first, spec, config, reference_dir, placement(spec), False, True)
               for key, spec in early.items()}
    try:
        batch = forkserver.start_ahead(requests, during)
    finally:
        t0 = time.perf_counter()
        outcomes = {}
        for key, future in futures.items():  # the run starts once its references are in the folder
            try:
                outcomes[key] = future.result()
            except Exception as exc:  # noqa: BLE001 - the cell computes it as before, and records this
                outcomes[key] = {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:2000]}
        pool.shutdown()
        # what the references took beyond the servers' start (the rest of their time overlapped it),
        # carried by the first of them
        waited = time.perf_counter() - t0
        for i, (key, outcome) in enumerate(outcomes.items()):
            _EARLY[(reference_dir, key)] = {**outcome, "after_servers_s": waited if i == 0 else 0.0,
                                            "computed": "while the fork servers started"
                                            + (f", during {during}" if during else "") + ", before the cells"}
    return batch


def cell_cache(spec: CellSpec, config: MeasureConfig, cache_root: str | None) -> tuple[str, str, bool]:
    """The compile-cache folder of one cell-process, what it is, and whether it is removed after:
    the user's ``--warm-cache`` folder; else, in a run, the cell's own folder under
    ``cache_root``, empty for its first process (cold: the first call measured from nothing)
    and holding what the earlier processes compiled for the later ones (Inductor's FX-graph,
    AOTAutograd and autotuning caches, JAX's executables and XLA's autotuning results); else
    (``cold_every_process``, or no run folder) a fresh folder, removed after. The worker
    records the mode the folder was in (``settings.cache.mode``), and only cold processes give
    first-call figures (report/tables.py)."""
    from stackwars.harness.settings import RUN_CELL_CACHE

    if config.cache_dir is not None:
        return config.cache_dir, "shared directory", False
    if cache_root and not config.cold_every_process:
        import hashlib

        folder = os.path.join(cache_root, hashlib.sha256(spec.key.split("#r")[0].encode()).hexdigest()[:16])
        os.makedirs(folder, exist_ok=True)
        return folder, RUN_CELL_CACHE, False
    return tmp.mkdtemp("cold-cache"), "fresh per process", True


def reference_first(spec: CellSpec, config: MeasureConfig, reference_dir: str, placement: Placement | None = None,
                    inline: bool = False, spawn: bool = False) -> dict[str, Any]:
    """The cell's float64 reference computed in a fresh worker of its own, into the run's
    reference cache, before the cell's worker starts (harness/reference.py says why). What
    happened is returned for the record; where it failed, the cell's worker computes the
    reference itself, as before. ``spawn``: a fresh interpreter, not a fork of the reference
    workers' server (while the servers start: ``start_servers_ahead``). A reference computed
    that way is recorded by the first cell of its key, as if that cell had computed it."""
    key = refmod.cell_key(spec, config.seed)
    earlier = _EARLY.pop((reference_dir, key), None)
    if refmod.ReferenceCache(reference_dir).has(key):
        if earlier is not None and earlier.get("status") == "ok":
            return earlier
        return {"status": "ok", "source": "already in the run's cache"}  # no worker to start
    process = reference_process(spec, config, placement)
    if spawn:
        process.pop("preload")
    task = {"target": "stackwars.harness.reference:compute_in_worker",
            "kwargs": {"spec": spec.to_dict(), "config": config.to_dict(), "reference_dir": reference_dir},
            "process": process}
    outcome = run_inline(task) if inline else run_task(task, config.timeout_s, config.memory_limit_bytes)
    out = {"status": outcome.status, "wall_s": outcome.wall_s}
    if earlier is not None:  # computed while the servers started, and failed: this is the second try
        out["first_try"] = {k: earlier.get(k) for k in ("status", "error", "computed")}
    if outcome.result:
        out.update({k: v for k, v in outcome.result.items()
                    if k in ("source", "where", "computed_s", "placement", "stages", "init_s")})
        origin = (outcome.result.get("process_settings") or {}).get("origin")
        if origin:  # how its process was made: the server it was forked from, started ahead or by it
            out["origin"] = origin
    if outcome.status != "ok":
        out["error"] = (outcome.error or "")[:2000]
    return out


def run_cold(task_for: Callable[[str], dict[str, Any]], timeout_s: float, memory_limit_bytes: int | None,
             inline: bool = False) -> Outcome:
    """One task in a fresh worker whose compile caches start empty: ``task_for(cache_dir)``
    builds the task around a new cache folder, removed when the worker is done."""
    cache_dir = tmp.mkdtemp("cold-cache")
    try:
        task = task_for(cache_dir)
        return run_inline(task) if inline else run_task(task, timeout_s, memory_limit_bytes)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)


def profile_folder(config: MeasureConfig, run_id: str | None) -> str | None:
    if not config.profile_steps or not config.profile_dir:
        return None
    return os.path.join(config.profile_dir, run_id or "no-run")


@dataclass(frozen=True)
class CellMeasure:
    """What an executor calls for each cell: ``measure_one`` with the run's settings bound.
    Picklable, so Ray and submitit carry it to another process or host; the plugins (a user's
    model file) go with it, for a worker there to find the cell's workload."""

    config: MeasureConfig
    probe: Mapping[str, Any]
    peaks: Mapping[tuple[str, str], Any]
    reference_dir: str | None
    run_id: str
    inline: bool = False
    plugins: str | None = None
    machine: Mapping[str, Any] | None = None  # the run's machine (its fingerprint's CPU and GPUs)
    caches: str | None = None  # the run's compile caches, a folder per cell (runner.cell_cache)

    def start_servers(self, specs: Sequence[CellSpec], placement: Callable[[CellSpec], Placement]) -> None:
        """For an executor that runs cells one at a time here: start the fork servers of
        ``specs`` together, before the first of them (``start_servers_ahead``)."""
        if not self.inline:
            start_servers_ahead(specs, self.config, self.probe, placement, self.reference_dir)

    def __call__(self, spec: CellSpec, placement: Placement) -> Measurement:
        if self.plugins and not os.environ.get("STACKWARS_PLUGINS"):
            os.environ["STACKWARS_PLUGINS"] = self.plugins
        peak = self.peaks.get((spec.device, spec.dtype))
        home = Env(self.machine or {})
        if placement.kind and home.data.get("cpu_model") and not home.same_kind(placement.kind):
            peak = None  # the stored roofline is this machine's, not that of the node the cell was placed on
        return measure_one(spec, self.config, self.probe, peak, self.inline,
                           reference_dir=self.reference_dir, run_id=self.run_id, placement=placement,
                           cache_root=self.caches)


def execute(store: Store, run_id: str, specs: Iterable[CellSpec], config: MeasureConfig, env: Mapping[str, Any],
            on_start: Callable[[CellSpec], None] | None = None,
            on_done: Callable[[Measurement], None] | None = None, inline: bool = False,
            on_unsaved: Callable[[Measurement, Any, StoreWriteError], None] | None = None,
            executor: Executor | None = None, caches: str | None = None,
            on_duplicate: Callable[[Measurement], None] | None = None,
            references: str | None = None) -> list[Measurement]:
    """Measure ``specs`` through ``executor`` (default: one at a time here), storing each cell
    as it finishes, in this thread. A cell the database refuses (locked too long, read-only,
    full) is kept in the run's pending file (``keep_pending``; ``--resume`` stores it) and
    reported to ``on_unsaved``; the run goes on. A cell whose key the run already holds
    (another process stored it first) is not stored, not returned, and told to ``on_duplicate``."""
    executor = executor or Serial()
    if inline and not isinstance(executor, Serial):
        raise SpecError(f"--inline runs cells in this process; --executor {executor.name} runs them in workers")
    session = store.start_session(run_id, env)
    done = []
    # the float64 references of this run, each computed by the first cell that needs it, in a
    # folder every cell sees (none where the executor's hosts share no folder: each cell its own);
    # ``references`` given: the caller's (a run's later looks reuse the folder of its first), kept
    own_references = references is None
    if own_references:
        references = executor.scratch("reference")
    # the compile caches of this run's cells: each cell's first process cold, its later ones warm;
    # ``caches`` given: the caller's (a run's later looks reuse the folder of its first), kept
    own_caches = caches is None
    if own_caches:
        caches = executor.scratch("caches")
    try:
        specs = list(specs)
        peaks = {(s.device, s.dtype): store.latest_peak(envmod.device_key(env, s.device), s.dtype,
                                                        config.matmul_precision) for s in specs}
        measure = CellMeasure(config, dict(env.get("probe", {})), peaks, references, run_id, inline,
                              os.environ.get("STACKWARS_PLUGINS"),
                              {k: env.get(k) for k in ("cpu_model", "cpu_count_logical", "gpus")}, caches)
        for m in executor.run(specs, measure, on_start):
            stored = True
            try:
                stored = store.add_cell(run_id, session, m)
            except StoreWriteError as exc:
                where = keep_pending(store.path, run_id, m)
                if on_unsaved is None:
                    raise
                on_unsaved(m, where, exc)
            if stored:
                done.append(m)
            elif on_duplicate:
                on_duplicate(m)
            if on_done:
                on_done(m)
    finally:
        for folder in (references if own_references else None, caches if own_caches else None):
            if folder:
                shutil.rmtree(folder, ignore_errors=True)
    return done


def more_rounds(plan: Sequence[CellSpec], wanted: Mapping[str, int]) -> list[CellSpec]:
    """More processes of planned cells: ``wanted`` maps a cell's key without its process number
    to how many to add. Numbered after the cell's last process and interleaved round by round
    (A B A B, not A A B B), like the plan itself."""
    last: dict[str, CellSpec] = {}
    for s in plan:
        base = s.key.split("#r")[0]
        if base not in last or s.repeat > last[base].repeat:
            last[base] = s
    out = []
    for k in range(max(wanted.values(), default=0)):
        for base, n in wanted.items():
            if k < n and base in last:
                out.append(replace(last[base], repeat=last[base].repeat + 1 + k))
    return out


def new_run(store: Store, specs: Sequence[CellSpec], config: MeasureConfig, command: str | None = None,
            kind: str = "cells") -> str:
    return store.create_run(specs, {"measure": config.to_dict()}, kind=kind, command=command)


def check_resumable(run_env: Mapping[str, Any], env: Mapping[str, Any]) -> None:
    before, now = run_env.get("versions", {}), env.get("versions", {})
    diffs = [f"{k} {before.get(k)} -> {now.get(k)}" for k in RESUME_PINNED if before.get(k) != now.get(k)]
    if (run_env.get("cpu_model") != env.get("cpu_model") or not same_cpu_kind(run_env, env)
            or run_env.get("gpus") != env.get("gpus")):
        diffs.append("a different machine")
    if diffs:
        raise SpecError("cannot resume: this environment differs from the run's (" + "; ".join(diffs) +
                        "); resume where the run started, or start a new run")


PEAK_BACKEND = {"torch": "torch-eager", "jax": "jax-jit"}  # whose server a framework's peak task is forked from


def measure_peaks(store: Store, device: str, dtypes: Sequence[str], config: MeasureConfig, env: Mapping[str, Any],
                  inline: bool = False, min_time_s: float = 1.0) -> list[dict[str, Any]]:
    probe = env.get("probe", {})
    frameworks = [fw for fw in ("torch", "jax") if (probe.get(fw) or {}).get("importable")
                  and (device == "cpu" or (probe.get(fw) or {}).get("cuda"))]
    if not frameworks:
        raise SpecError(f"neither torch nor jax can use device {device!r} here")
    stored = []
    for dtype in dtypes:
        per_fw: dict[str, Any] = {}
        for fw in frameworks:
            task = {"target": "stackwars.harness.peaks:measure_peak",
                    "kwargs": {"framework": fw, "device": device, "dtype": dtype,
                               "matmul_precision": config.matmul_precision, "threads": config.threads,
                               "min_time_s": min_time_s},
                    # forked from a server with the framework imported, one per framework for every dtype
                    "process": {"threads": config.threads, "device": device, "cache_dir": None,
                                "preload": ["stackwars.harness.peaks",
                                            *registry.backend(PEAK_BACKEND[fw]).preload]}}
            outcome = run_inline(task) if inline else run_task(task, config.timeout_s, config.memory_limit_bytes)
            per_fw[fw] = outcome.result if outcome.status == "ok" else {"status": outcome.status, "error": outcome.error}
        good = [r for r in per_fw.values() if r.get("status") == "ok"]
        flops = max((r["gemm"]["median_per_s"] for r in good), default=None)
        bw = max((r["stream"]["median_per_s"] for r in good), default=None)
        key = envmod.device_key(env, device)
        entry = {"id": None, "device_key": key, "dtype": dtype, "matmul_precision": config.matmul_precision,
                 "flops_per_s": flops, "bytes_per_s": bw, "per_framework": per_fw}
        busy = [f"{fw} {part}" for fw, r in per_fw.items() if r.get("status") == "ok"
                for part in ("gemm", "stream") if r[part].get("contended")]
        if device == "cpu" and busy:
            # a peak measured under load would make honest cells read over 100% of the roofline
            entry["refused"] = (f"other processes took over {CONTENTION_THRESHOLD:.0%} of the CPUs in every round of {', '.join(busy)}: "
                                "a peak measured under load is too low; not stored (rerun on a quiet machine)")
        else:
            entry["id"] = store.add_peak(key, dtype, config.matmul_precision, flops, bw, per_fw, env)
        stored.append(entry)
    return stored


FIDELITY_CELLS = (  # (workload, preset, phase, backend): calls of 1 ms or more on the CPU, and tiny ones
    *((w, "small", ph, b) for w in ("gemm", "ffn", "mha") for ph in ("forward", "train-step")
      for b in ("torch-eager", "jax-jit")),
    *((w, "small", "forward", "torch-compile") for w in ("gemm", "ffn", "mha")),
    *((w, "tiny", "forward", b) for w in ("gemm", "mha") for b in ("torch-eager", "jax-jit")),
)


def fidelity(device: str, config: MeasureConfig, probe: Mapping[str, Any], inline: bool = False,
             on_done: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Time the same callables with stackwars and an independent reference (see
    harness/fidelity.py), each cell in its own worker; plus the harness's no-op overhead."""
    results: dict[str, Any] = {"cells": [], "overhead": {}}
    for fw in ("torch", "jax"):
        if (probe.get(fw) or {}).get("importable"):
            task = {"target": "stackwars.harness.fidelity:overhead",
                    "kwargs": {"framework": fw, "device": device},
                    "process": {"threads": config.threads, "device": device, "cache_dir": None}}
            o = run_inline(task) if inline else run_task(task, config.timeout_s, config.memory_limit_bytes)
            results["overhead"][fw] = o.result if o.result else {"status": o.status, "error": o.error}
    for w, preset, phase, b in FIDELITY_CELLS:
        spec = CellSpec(w, preset, phase, b, device)
        if not registry.backend(b).availability(probe, device)[0]:
            continue
        o = run_cold(lambda cache_dir: {"target": "stackwars.harness.fidelity:fidelity_cell",
                                        "kwargs": {"spec": spec.to_dict(), "config": config.to_dict(),
                                                   "cache": {"mode": "cold", "dir": cache_dir}},
                                        "process": {"threads": config.threads, "device": device,
                                                    "cache_dir": cache_dir}},
                     config.timeout_s, config.memory_limit_bytes, inline)
        r = o.result if o.result and o.status == "ok" else {"cell": spec.key, "status": o.status, "error": o.error}
        results["cells"].append(r)
        if on_done:
            on_done(r)
    return results
