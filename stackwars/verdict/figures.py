"""A cell from its processes: the figures every claim reads, from the clean processes alone.

A cell measured in several processes (``--processes N``) is one row: the geometric mean of the
per-process medians, the IQR *between* processes, and significance from a hierarchical
bootstrap over processes and their samples (stats.py), since on a shared machine the
process-to-process spread can exceed the spread within one process. Which processes count is
the gate's (``verdict/gate.py``); why a cell's processes disagree, ``verdict/spread.py``'s.
"""

from __future__ import annotations

import statistics
from collections import OrderedDict

import numpy as np
from typing import Any, Iterable, Mapping, Sequence

from stackwars import stats
from stackwars.verdict import gate, spread


def variant(row: Mapping[str, Any]) -> tuple[tuple[str, ...], str | None]:
    """The row's implementation variant: overrides that choose *how* the same function is
    computed (a custom kernel or the framework's operator) are a row of the table, labelled,
    not a table of their own (``Workload.variant_params``)."""
    from stackwars import registry
    from stackwars.errors import SpecError

    try:
        wl = registry.workload(row["workload"])
    except SpecError:  # a plugin workload not importable here
        return (), None
    return tuple(wl.variant_params), wl.variant_label(row.get("overrides") or {}, row.get("framework"),
                                                      row.get("device") or "cpu")


def backend_variant(row: Mapping[str, Any]) -> str:
    """The backend, and the implementation variant when there is one ("torch-eager · triton
    kernel"): what tells two rows of one table apart when they are compared or ranked."""
    what = variant(row)[1]
    return f"{row['backend']} · {what}" if what else row["backend"]


def group_key(row: Mapping[str, Any], machine: bool = False) -> tuple:
    """A table: workload, preset, phase, device, dtype, the overrides that are not an
    implementation variant, and (``machine``) the machine, where rows from several are shown."""
    keys, _ = variant(row)
    over = ",".join(f"{k}={v}" for k, v in sorted((row.get("overrides") or {}).items()) if k not in keys)
    return (row["workload"], row["preset"], row["phase"], row["device"], row["dtype"], over,
            (row.get("machine") or "unknown machine") if machine else None)


def label(row: Mapping[str, Any]) -> str:
    opts = row.get("options") or {}
    label = row["backend"]
    if opts:
        label += f" [{', '.join(f'{k}={v}' for k, v in sorted(opts.items()))}]"
    _, what = variant(row)
    if what:  # a custom kernel in place of the framework's operator
        label += f" · {what}"
    if row.get("attention"):  # the attention implementation that ran (observed where possible)
        label += f" · {row['attention']}"
    if row.get("graph_replayed"):  # steady state timed as CUDA graph replays
        label += " · graph replay"
    if row.get("flushed"):  # caches flushed before every timed call
        label += " · flushed"
    return label


def compared(row: Mapping[str, Any]) -> list[list[float]]:
    """The row's steady-state samples, one list per process: what every comparison bootstraps."""
    if "process_samples" in row:  # combined: the clean processes alone (none for a busy cell)
        return row["process_samples"]
    return [list(row["steady_samples"])] if row.get("steady_samples") else []


def added_memory(row: Mapping[str, Any]) -> int | None:
    """The memory the computation itself needs, in the same window for every backend (the
    memory phase's call, harness/measure.py): the device allocator's peak on a GPU (it counts
    the cell's own tensors), else the host's RSS peak over the worker's baseline just before
    the first call (framework, weights and inputs resident); compiling is the first call's
    cost, not the step's. What the harness holds meanwhile (the parity copies, a flush buffer)
    is taken out. None where the device peak is not the program's (``device_memory_why``; in
    older records, ``device_peak_before_first_call``)."""
    if row.get("device_peak_before_first_call") or row.get("device_memory_why"):
        return None  # a GPU cell's device figure could not be read: never the host's RSS in its place
    if row.get("peak_device_bytes") is not None:
        return max(0, row["peak_device_bytes"] - (row.get("harness_device_bytes") or 0))
    peak, base = row.get("peak_rss_steady_bytes") or row.get("peak_rss_bytes"), row.get("baseline_rss_bytes")
    if peak is None or base is None:
        return None
    # the host copies the harness keeps for the parity check, a flush buffer: the harness's, not the program's
    return max(0, peak - base - (row.get("harness_host_bytes") or 0))


# each compiled backend's eager counterpart: what its first call must pay back against
EAGER_OF = {"jax-jit": "jax-eager", "jax-jit-no-graphs": "jax-eager", "torch-compile": "torch-eager",
            "torch-compile-max-autotune": "torch-eager",
            "torch-cudagraphs": "torch-eager", "torch-mlir-xla": "torch-eager"}

# every figure a combined row derives from its processes: none of them for a cell measured only while busy
FIGURES = ("steady_median_s", "first_call_s", "second_call_s", "first_call_cache", "first_call_processes",
           "device_time_s", "memory_added_bytes", "process_memory_bytes", "memory_cache", "steady_ci_low_s",
           "steady_ci_high_s",
           "steady_iqr_s", "noisy", "issue_share",
           "process_medians", "achieved_flops_per_s", "roofline_fraction", "energy_j", "energy_power_w",
           "process_energy_j")


def rounds_allowed(cells: Sequence[Mapping[str, Any]]) -> int:
    """The clean rounds the cells' run may measure for a row: its --processes and its cap (a run of one
    process a cell asks no verdict, and one without a cap adds no look)."""
    return max([int(c.get("processes_planned") or 0) for c in cells]
               + [int(c["max_processes"]) for c in cells if c.get("max_processes")])


STAYED_BUSY_LOOKS = 2  # a cell stayed busy when its latest processes, this many x --processes of them, were all busy


def combine_repeats(rows: list[Mapping[str, Any]], noise_threshold: float = stats.NOISE_THRESHOLD,
                    lean: bool = False) -> list[Mapping[str, Any]]:
    """One display row per backend, its figures from its clean processes only (verdict/gate.py):
    the steady state (mean of the per-process medians, hierarchical bootstrap CI), the first
    and second call (medians) and the memory the cell added (median). ``process_samples``,
    the samples per process every comparison resamples, holds the clean processes alone;
    ``processes_used`` / ``processes_busy`` count them and those left out. A cell with no
    clean process is ``busy``: its figures are None (nothing ranks or judges it) and what its
    busy processes read is kept apart in ``busy_figures``, for display. ``lean``: the steady state's
    estimate alone, without the bootstrap of its interval and spread (what a run's next look reads:
    verdict.verdicts(lean=True) decides as the full rows do)."""
    by: OrderedDict[str, list[Mapping[str, Any]]] = OrderedDict()
    for r in rows:
        by.setdefault(label(r), []).append(r)
    out: list[Mapping[str, Any]] = []
    for group in by.values():
        clean, busy = gate.split(group)
        row = dict(group[0])
        # how its clean processes were timed (records.timing_mode): one mode, or several where a cell's
        # processes were timed unlike (records made before the run chose one mode for every cell)
        row["timing_modes"] = sorted({r.get("timing_mode") or ("latency" if r.get("calls_per_sample") == 1
                                                               else "throughput") for r in clean})
        # processes the host's state would have left out, kept because it could not touch them (gate.device_bound)
        kept = [why for why in (gate.kept_reason(r) for r in clean) if why]
        row.update(processes_kept=len(kept), kept_why=kept[0] if kept else None)
        row.update(process_samples=[list(r["steady_samples"]) for r in clean], processes_used=len(clean),
                   process_repeats=[r.get("repeat") for r in clean],
                   # the session each was measured in: a round across two sessions had an interruption inside
                   process_sessions=[r.get("session") for r in clean],
                   # what a process of the cell costs, start to result: what a round of a verdict costs (plan.py)
                   process_walls=[float(r["wall_s"]) for r in group if r.get("wall_s")],
                   busy_samples=[list(r["steady_samples"]) for r in busy],
                   processes_busy=len(busy), busy=bool(busy) and not clean,
                   busy_reasons=gate.reasons(busy) or None)
        # the cell's latest processes (its last STAYED_BUSY_LOOKS x --processes of them, whatever chose or decided),
        # and how many came out clean: none means the machine stayed busy through them, and more would likely fare
        # no better (plan.no_top_up). Fewer than that many is no such sign: this 2-CPU VM's host slowed every
        # program by 1.3x in spells of tens of seconds (2026-12-03: 40% of a run's processes), and one look's
        # processes of a cell all fell in one spell often enough to stop rows that the next minute could decide
        size = max(1, int(group[0].get("processes_planned") or len(group))) * STAYED_BUSY_LOOKS
        latest = sorted(group, key=lambda r: r.get("repeat") or 0)[-size:]
        row.update(latest_look_processes=len(latest) if len(latest) >= size else 0,
                   latest_look_clean=sum(any(r is c for c in clean) for r in latest))
        if len(group) > 1:
            row.update(processes=len(group), processes_ok=sum(r["status"] == "ok" for r in group),
                       status="ok" if all(r["status"] == "ok" for r in group)
                       else next(r["status"] for r in group if r["status"] != "ok"))
        errs = [r["parity_max_rel_err"] for r in group if r.get("parity_max_rel_err") is not None]
        row.update(parity_max_rel_err=max(errs) if errs else None,
                   peak_memory_bytes=max((r["peak_memory_bytes"] for r in group if r.get("peak_memory_bytes")),
                                         default=None))
        # where its clean processes disagree by more than 10%: what their records say (verdict/spread.py)
        row["spread_why"] = spread.explain(clean)
        if clean:
            row.update(_figures(clean, noise_threshold, lean))
        elif busy:  # every timed process busy: no figure decides anything; what they read, for display
            row.update(dict.fromkeys(FIGURES), busy_figures=_figures(busy, noise_threshold, lean))
        else:  # nothing timed (failed, unsupported): what the processes recorded, a failed cell's first call
            row.update(_figures(list(group), noise_threshold, lean))
        out.append(row)
    return out


def _figures(used: list[Mapping[str, Any]], noise_threshold: float, lean: bool = False) -> dict[str, Any]:
    """The figures of a cell from these processes: one definition for the table, the
    verdict, the JSON and the report."""
    # the first call (trace and compile) from processes whose caches started empty; where none
    # did (a --warm-cache run), from the warm ones, and the row says so
    cold = [r for r in used if r.get("cache") != "warm"]
    first = cold or used
    # memory: compile left out. A process that compiled from an empty cache still holds what compiling
    # left behind (the compilers' in-memory caches): 25-57 MiB more than the warm processes of every
    # compiled cell on the 2-CPU Xeon VM (jax-jit CNN train step 155 MiB against 98 and 97). Where the
    # cell has warm processes (its compiled code read back), the figure is theirs; an eager cell's
    # processes, which compile nothing, are all "cold" and all count; ``memory_cache`` says which.
    warm = [r for r in used if r.get("cache") == "warm"]
    mem = warm or used
    out: dict[str, Any] = {
        "first_call_s": _median_of(r.get("first_call_s") for r in first),
        "second_call_s": _median_of(r.get("second_call_s") for r in first),
        "first_call_cache": "cold" if cold else "warm",
        "first_call_processes": len(first),
        # on CUDA: a call's time on the device's own clock (CUDA events), median over the processes
        "device_time_s": _median_of(r.get("device_time_median_s") for r in used),
        "memory_added_bytes": _median_of([added_memory(r) for r in mem]),
        # one figure a process: whether a memory difference clears their spread (stats.memory_difference)
        "process_memory_bytes": [m for m in (added_memory(r) for r in mem) if m is not None],
        "memory_cache": "warm" if warm else "cold",
        # on CUDA: the host's time to issue a call over the call's, from the same timed calls (harness/window.py)
        "issue_share": _median_of(r["issue_median_s"] / r["steady_median_s"] for r in used
                                  if r.get("issue_median_s") and r.get("steady_median_s")
                                  and (r.get("readout_windows") or {}).get("issue") == "steady"),
        # joules per call from each process's energy window (harness/energy.py): the verdict's energy CI
        "process_energy_j": [r["energy_j_per_call"] for r in used if r.get("energy_j_per_call")],
        "energy_j": _median_of(r.get("energy_j_per_call") for r in used),
        "energy_power_w": _median_of(r.get("energy_power_w") for r in used),
    }
    if not gate.timed(used):
        return out
    if len(used) == 1:  # one process: its own summary (the bootstrap CI of its median)
        r = used[0]
        out.update({k: r.get(k) for k in ("steady_median_s", "steady_ci_low_s", "steady_ci_high_s", "steady_iqr_s",
                                         "noisy", "achieved_flops_per_s", "roofline_fraction")},
                   process_medians=[r.get("steady_median_s")])
        return out
    if lean:  # the estimate the full figure has (the geometric mean of the process medians), nothing resampled
        medians = [float(np.median(r["steady_samples"])) for r in used]
        estimate = stats.geometric_mean(medians)
        out.update(steady_median_s=estimate, steady_ci_low_s=None, steady_ci_high_s=None, steady_iqr_s=None,
                   noisy=None, process_medians=medians)
        return out
    h = stats.hierarchical([list(r["steady_samples"]) for r in used])
    medians = list(h.process_medians)
    scale = lambda key: (used[0][key] * used[0]["steady_median_s"] / h.estimate) if used[0].get(key) else None
    out.update(steady_median_s=h.estimate, steady_ci_low_s=h.ci_low, steady_ci_high_s=h.ci_high,
               steady_iqr_s=stats.summarize(medians).iqr, noisy=stats.summarize(medians, noise_threshold).noisy,
               process_medians=medians, achieved_flops_per_s=scale("achieved_flops_per_s"),
               roofline_fraction=scale("roofline_fraction"))
    return out


def _median_of(values: Iterable[float | None]) -> float | None:
    vs = [float(v) for v in values if v is not None]
    return float(statistics.median(vs)) if vs else None


def group_rows(rows: Iterable[Mapping[str, Any]], by_machine: bool | None = None
               ) -> "OrderedDict[tuple, list[Mapping[str, Any]]]":
    """Rows per table. Rows from several machines are never one table: ``by_machine`` None
    splits them by machine exactly when there is more than one."""
    rows = list(rows)
    if by_machine is None:
        by_machine = len({r.get("machine") for r in rows}) > 1
    groups: OrderedDict[tuple, list[Mapping[str, Any]]] = OrderedDict()
    for r in rows:
        groups.setdefault(group_key(r, by_machine), []).append(r)
    return groups


def combined(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Every table's rows, one per backend (its processes combined): what a claim reads."""
    return [r for group in group_rows(rows).values() for r in combine_repeats(group)]
