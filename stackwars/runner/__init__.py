"""Run cells: each measured in a fresh worker, stored as it finishes.

The runner is three rooms; this face holds execution and hands on the names of the other two,
so that the CLI, the orchestrator, the studies and the tests call ``runner.X`` alike:

* ``runner/planning.py``: ``plan_cells`` validates every name, size and option and expands the
  cross product into ``CellSpec``s (``SpecError`` before anything runs or is written);
  ``default_backends``, ``validate_config``, ``preflight``, ``more_rounds``, ``check_resumable``.
* ``runner/servers.py``: how each worker process is made (``process_request``) and the fork
  servers started ahead of a batch of cells, with the float64 references computed meanwhile.
* here, execution: ``probe_machine``; ``measure_one`` (one cell in a worker), ``execute`` (the
  planned cells through an executor, each appended to the store in its own transaction),
  ``measure_duet``, ``new_run``, ``measure_peaks`` (the device roofline), ``fidelity``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from stackwars import registry
from stackwars.errors import SpecError
from stackwars.executors import Executor, Placement, Serial
from stackwars.harness import env as envmod
from stackwars.harness.settings import RUN_CELL_CACHE
from stackwars.harness import reference as refmod
from stackwars.harness import tmp
from stackwars.harness.isolation import Outcome, run_inline, run_task
from stackwars.records import CellSpec, Env, Measurement, MeasureConfig
from stackwars.runner import planning, servers
from stackwars.runner.planning import (DEFAULT_PROCESSES, HEADROOM, backends_for, check_resumable,  # noqa: F401
                                       default_backends, default_memory_limit, machine_memory, more_rounds,
                                       plan_cells, preflight, probe_guess, validate_config)
from stackwars.runner.servers import (process_request, reference_first, reference_process,  # noqa: F401
                                      run_references, start_servers_ahead, start_servers_during_probe,
                                      study_process)
from stackwars.stats import CONTENTION_THRESHOLD
from stackwars.store.results import Store, StoreWriteError, keep_pending

PROBE_TIMEOUT_S = 300


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

    # device None: no platform forced on the probe (JAX_PLATFORMS removed), so it reports every
    # device each framework can see; the cells pin their own platform
    def task(part: str) -> dict[str, Any]:
        return {"target": f"stackwars.harness.probe:{part}", "kwargs": {}, "process": {"device": None}}

    from stackwars.harness import probe as probemod  # when a probe runs: a command's import stays light

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
            flags = next((ln.split("] ", 1)[-1].strip() for ln in (outcome.error or "").splitlines()
                          if "XLA_FLAGS" in ln), None)
            if flags:  # XLA aborts its process on a flag it does not know: bad input, not a missing framework
                raise SpecError(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}: {flags}; JAX cannot start with it. "
                                f"Allowed: the flags XLA documents (openxla's debug_options_flags.cc); fix or unset "
                                f"XLA_FLAGS; nothing was run or written")
            found.update({name: {"importable": False, "error": f"probe failed: {outcome.error}"} for name in names})
        else:
            found.update({k: v for k, v in outcome.result.items() if k != "status"})  # both: the same process_settings
    return found if key is None else probemod.keep(key, found, probed_at)


def _measurement(spec: CellSpec, framework: str, outcome: Outcome) -> Measurement:
    if outcome.result and "spec" in outcome.result:
        m = Measurement.from_dict(outcome.result)
        process = outcome.result.get("process_settings")
        settings = {**(m.settings or {}), "process": process} if process else m.settings
        return replace(m, wall_s=outcome.wall_s, settings=settings)
    return Measurement(spec=spec, status=outcome.status, framework=framework, error=outcome.error, wall_s=outcome.wall_s,
                       settings={"stage": outcome.stage} if outcome.stage else {})


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
    too_big = planning.preflight(spec, parity_mode=config.parity_mode)
    if too_big:
        return Measurement(spec=spec, status="oom", framework=bspec.framework, error=too_big.pop("message"),
                           settings={"memory_guard": {"kind": "pre-flight estimate", **too_big}})
    own_reference = servers.reference_first(spec, config, reference_dir, placement, inline) \
        if refmod.own_worker_wanted(wl, spec.device, config.parity_mode, reference_dir) else None
    cache_dir, source, remove = cell_cache(spec, config, cache_root)
    try:
        task = {
            "target": "stackwars.harness.measure:measure_cell",
            "kwargs": {"spec": spec.to_dict(), "config": config.to_dict(), "peak": dict(peak or {}),
                       "cache": {"source": source, "dir": cache_dir},
                       "reference_dir": reference_dir, "profile_to": profile_folder(config, run_id)},
            "process": servers.process_request(spec, config, placement, cache_dir),
        }
        outcome = run_inline(task) if inline else run_task(task, config.timeout_s, config.memory_limit_bytes)
    finally:
        if remove:
            shutil.rmtree(cache_dir, ignore_errors=True)
    m = _measurement(spec, bspec.framework, outcome)
    if own_reference is None:
        return m
    return replace(m, settings={**(m.settings or {}), "reference_worker": own_reference})


DUET_GENERATION = 10_000  # duets' fork servers numbered apart from the cells' process numbers


def measure_duet(a: CellSpec, b: CellSpec, repeat: int, config: MeasureConfig, cache_root: str | None,
                 inline: bool = False, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Cells ``a`` and ``b`` (two cells, or one cell twice) in one fresh worker, alternating
    (harness/duet.py): its record, or the failure with its status. The worker preloads both
    frameworks and reads each cell's compile caches as a later process of that cell would (warm:
    the duet reads a ratio, not a first call). ``env``: more environment for its fork server, set
    before the frameworks load (OMP_WAIT_POLICY is read when libgomp starts). A duet decides no
    verdict (two runtimes in one process run otherwise than alone): scripts/pairing-calibration.py
    measures duets beside rounds of separate processes."""
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
    ra, rb = (servers.process_request(s, config, None, folder) for s in (a, b))
    process = {**ra, "env": {**ra["env"], **rb["env"], **dict(env or {})},
               "preload": list(dict.fromkeys([*ra["preload"], *rb["preload"]])),
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


def cell_cache(spec: CellSpec, config: MeasureConfig, cache_root: str | None) -> tuple[str, str, bool]:
    """The compile-cache folder of one cell-process, what it is, and whether it is removed after:
    the user's ``--warm-cache`` folder; else, in a run, the cell's own folder under
    ``cache_root``, empty for its first process (cold: the first call measured from nothing)
    and holding what the earlier processes compiled for the later ones (Inductor's FX-graph,
    AOTAutograd and autotuning caches, JAX's executables and XLA's autotuning results); else
    (``cold_every_process``, or no run folder) a fresh folder, removed after. The worker
    records the mode the folder was in (``settings.cache.mode``), and only cold processes give
    first-call figures (report/tables.py)."""
    if config.cache_dir is not None:
        return config.cache_dir, "shared directory", False
    if cache_root and not config.cold_every_process:
        import hashlib

        folder = os.path.join(cache_root, hashlib.sha256(spec.key.split("#r")[0].encode()).hexdigest()[:16])
        os.makedirs(folder, exist_ok=True)
        return folder, RUN_CELL_CACHE, False
    return tmp.mkdtemp("cold-cache"), "fresh per process", True


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


def machine_of(env: Mapping[str, Any]) -> dict[str, Any]:
    """What of a run's fingerprint a cell's placement kind (harness/env.device_kind) is judged
    against: the CPU, its kind and count, the GPUs, and the versions of the two frameworks."""
    versions = env.get("versions") or {}
    return {"cpu_model": env.get("cpu_model"), "cpu_kind": env.get("cpu_kind"),
            "cpu_count_logical": env.get("cpu_count_logical"), "gpus": env.get("gpus"),
            "versions": {k: versions.get(k) for k in ("torch", "jax")}}


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
            servers.start_servers_ahead(specs, self.config, self.probe, placement, self.reference_dir)

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
                              # the run's machine as a placement's kind describes one (CPU, its kind, GPUs, the
                              # frameworks' versions): without the versions and the kind, the test whether a cell
                              # ran on the run's kind failed on the machine itself, and every roofline was dropped
                              machine_of(env), caches)
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


def new_run(store: Store, specs: Sequence[CellSpec], config: MeasureConfig, command: str | None = None,
            kind: str = "cells") -> str:
    """A new run of ``specs``, refused where ``store`` holds one of its workloads' names from
    another file (``results.check_one_model_per_name``)."""
    from stackwars.store.results import check_one_model_per_name

    check_one_model_per_name(store, {s.workload: registry.origin("workload", s.workload) for s in specs})
    models = model_files(specs)
    return store.create_run(specs, {"measure": config.to_dict(), **({"models": models} if models else {})},
                            kind=kind, command=command)


def _model_file(origin: str) -> tuple[Path, str] | None:
    """(the file, the Model's attribute or "") of a model that came from a file ("file PATH:NAME")."""
    if not origin.startswith("file "):
        return None
    rest = origin[len("file "):]
    path, sep, attr = rest.rpartition(":")
    return (Path(path), attr) if sep and path.endswith(".py") else (Path(rest), "")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def model_files(specs: Sequence[CellSpec]) -> dict[str, dict[str, str]]:
    """Each of ``specs``' workloads that a model file defines: where it came from and the sha256
    of the file's contents, kept with the run so that a resume loads the same file and refuses a
    changed one (``restore_models``)."""
    out = {}
    for name in dict.fromkeys(s.workload for s in specs):
        origin = registry.origin("workload", name)
        found = _model_file(origin)
        if found is not None and found[0].is_file():
            out[name] = {"origin": origin, "sha256": _digest(found[0])}
    return out


def restore_models(store: Store, info: Any, on_note: Callable[[str], None] | None = None) -> None:
    """A resumed run's model files loaded again, as its start loaded them: each file the run
    recorded (``model_files``; a run from before that kept only its cells' origins) must still be
    there and, where its contents were fingerprinted, unchanged (one run measures one model);
    each is then checked in a worker as at the start (``planning.verify_user_model``)."""
    models = {name: {"origin": origin} for name, origin in store.workload_origins(info.run_id).items()}
    models.update(info.config.get("models") or {})
    for name, m in models.items():
        found = _model_file(m["origin"])
        if found is None:
            continue
        path, attr = found
        if not path.is_file():
            raise SpecError(f"run {info.run_id} measured model {name!r} from {path}, which is not there now: put the "
                            f"file back to resume the run; nothing was measured")
        if m.get("sha256") and _digest(path) != m["sha256"]:
            raise SpecError(f"run {info.run_id} measured model {name!r} from {path}, which has changed since (sha256 "
                            f"{m['sha256'][:12]}... then, {_digest(path)[:12]}... now): one run measures one model. "
                            f"Restore the file as it was to resume, or start a new run of it; nothing was measured")
        resolved = registry.resolve_workload(f"{path}:{attr}" if attr else str(path))
        if resolved != name:
            raise SpecError(f"run {info.run_id} measured model {name!r} from {path}, which now defines {resolved!r}: "
                            f"restore the file as it was to resume; nothing was measured")
        planning.verify_user_model(name, on_note=on_note)


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
