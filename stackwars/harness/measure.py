"""Measure one cell inside a worker process (the worker's ``target``).

Order of events, each phase kept apart:

1. configure the backend (threads, matmul precision, caches) and draw the workload's
   parameters and batch from the seed, rounded to the cell's dtypes;
2. prepare (build the model, move data to the device; nothing is compiled yet);
3. baseline RSS, reset the peak-RSS window;
4. first call (trace + compile + run), synchronised on its whole output;
5. compile timers read, outputs copied to the host for the parity check (untimed);
6. second call; warm-up calls; steady state (blocked autorange, every sample kept), with
   the CPU time other processes took on the worker's CPUs while the samples were taken
   (``contention``);
7. memory peaks, compile statistics (recompiles during the steady state count);
8. float64 reference, parity: a mismatch is status ``parity_fail``, timings are kept.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

import psutil

from stackwars import registry
from stackwars.backends.base import Prepared
from stackwars.harness.contention import ForeignLoad
from stackwars.harness.memory import PeakRSS, current_rss
from stackwars.harness.parity import compare
from stackwars.harness.timer import Timer
from stackwars.records import CellSpec, Measurement, MeasureConfig, MemoryStats
from stackwars.workloads.base import itemsize, param_dtype, round_to


def _count_entries(path: str | None) -> int | None:
    if not path or not os.path.isdir(path):
        return None
    return sum(len(files) for _, _, files in os.walk(path))


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


def prepare_cell(spec: Mapping[str, Any], config: Mapping[str, Any],
                 cache: Mapping[str, Any] | None = None) -> PreparedCell:
    cell = CellSpec.from_dict(spec)
    cfg_m = MeasureConfig.from_dict(config)
    cache = dict(cache or {})
    workload = registry.workload(cell.workload)
    workload.check_phase(cell.phase)
    cfg = workload.config(cell.preset, dict(cell.overrides))
    bspec = registry.backend(cell.backend)
    backend = bspec.load(dict(cell.options))

    cache["entries_before"] = _count_entries(cache.get("dir"))
    # the mode is what the directory holds, not what was asked for: an empty one is cold
    cache["mode"] = "warm" if cache["entries_before"] else "cold"
    settings: dict[str, Any] = {
        "threads": cfg_m.threads, "matmul_precision": cfg_m.matmul_precision,
        "cache_dir": cache.get("dir"), "cache": cache, "seed": cfg_m.seed,
    }
    settings["applied"] = backend.configure(settings)

    pdtype = param_dtype(cell.dtype, cell.phase)
    params, batch = workload.init(cfg, cfg_m.seed)
    params = {k: round_to(v, pdtype) for k, v in params.items()}
    batch = {k: round_to(v, cell.dtype) for k, v in batch.items()}
    prepared = backend.prepare(workload, cfg, cell.phase, params, batch, cell.device, cell.dtype)
    settings["backend"] = {"name": bspec.name, "options": backend.options, **prepared.notes}
    return PreparedCell(cell, cfg_m, workload, cfg, bspec.framework, backend, prepared, params, batch, settings)


def measure_cell(spec: Mapping[str, Any], config: Mapping[str, Any], peak: Mapping[str, Any] | None = None,
                 cache: Mapping[str, Any] | None = None) -> dict[str, Any]:
    pc = prepare_cell(spec, config, cache)
    cell, cfg_m, workload, cfg, backend, prepared = pc.cell, pc.config, pc.workload, pc.cfg, pc.backend, pc.prepared
    params, batch, settings = pc.params, pc.batch, pc.settings
    pdtype = param_dtype(cell.dtype, cell.phase)

    timer = Timer(prepared.call, prepared.sync)
    steal_before = getattr(psutil.cpu_times(), "steal", None)
    rss = PeakRSS()
    baseline = current_rss()
    rss.reset()
    first_s, out = timer.once()
    peak_first = rss.peak()
    prepared.after_first_call()
    outputs = prepared.parity_outputs(out)
    del out
    peak_through_first = rss.peak()  # includes the host copies made for the parity check
    rss.reset()  # the steady-state window: the running program's footprint, compile excluded
    second_s, out = timer.once()
    del out
    others = ForeignLoad()  # what other processes did on our CPUs while the samples were taken
    warm, steady = timer.warm_then_steady(cfg_m.warmup, cfg_m.min_samples, cfg_m.min_time_s, cfg_m.max_samples,
                                          cfg_m.min_block_s, second_s, before_steady=others.start)
    settings["contention"] = others.stop()
    peak_steady = rss.peak()
    rss.stop()
    steal_after = getattr(psutil.cpu_times(), "steal", None)
    if steal_before is not None and steal_after is not None:
        # CPU time the hypervisor gave to other guests while this cell ran: VM noise, recorded
        settings["cpu_steal_s"] = steal_after - steal_before
    device_peak, device_counter = backend.device_peak_memory(cell.device)
    compile_stats = prepared.compile_stats()

    reference = workload.reference(cfg, cell.phase, params, batch)
    parity = compare(outputs, reference, workload.tolerance(cell.dtype, cfg_m.matmul_precision, cell.phase),
                     reference_name=workload.reference_name(cfg))

    return Measurement(
        spec=cell,
        status="ok" if parity.ok else "parity_fail",
        framework=pc.framework,
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
            rss_counter=rss.counter, compiled=prepared.memory_analysis(),
        ),
        parity=parity,
        flops=workload.flops(cfg, cell.phase),
        bytes_moved=workload.bytes_moved(cfg, cell.phase, itemsize(cell.dtype), itemsize(pdtype)),
        params=cfg.as_dict(),
        settings=settings,
        peak=dict(peak or {}),
        error=None if parity.ok else f"parity: max rel err {parity.max_rel_err:.3g} > tolerance {parity.tolerance:.3g}",
        noise_threshold=cfg_m.noise_threshold,
    ).to_dict()
