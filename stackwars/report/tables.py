"""The seeds' tables: one per workload x preset x phase x device x dtype, a row per backend.

| backend | First Run | Second Run | Avg Steady State | ± (IQR) | vs best | achieved | roofline |
  peak mem | parity | status |

"Avg Steady State" keeps the seeds' column name; the value is the median per-call time of
the steady-state samples (robust to the stragglers that make means lie). "vs best" is
the ratio of medians to the fastest ok backend of the table, with a bootstrap 95% CI;
"~" marks a difference that is not significant.

A cell measured in several processes (``--processes N``) is one row: the mean of the
per-process medians, the IQR *between* processes, and significance from a hierarchical
bootstrap over processes and their samples (stats.py), since on a shared machine the
process-to-process spread can exceed the spread within one process.
"""

from __future__ import annotations

import io
import math
import statistics
from collections import OrderedDict
from typing import Any, Iterable, Mapping

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from stackwars import stats
from stackwars.records import parity_ok
from stackwars.report import format as fmt
from stackwars.report import gate, spread

COLUMNS = ("backend", "First Run", "Second Run", "Avg Steady State", "± (IQR)", "vs best (95% CI)", "achieved",
           "roofline", "memory", "parity", "status")

CAPTION = ("Every figure comes from the cell's clean processes only: a process is busy when other processes or "
           "the hypervisor took over {contention:.0%} of its CPUs while it was timed, or when the machine's canary "
           "read off its run's by more than the canary's own noise (at least {canary:.0%}); a busy process "
           "decides nothing, and a cell with no clean process is shown as (busy), its busy figure for display. "
           "First Run / Second Run: median over the processes; Avg Steady State: median seconds per call over "
           "the steady-state samples (n), or the mean of the per-process medians (procs); ± (IQR): interquartile "
           "range (between processes when there are several); vs best: ratio to the fastest cleanly measured "
           "backend with its 95% hierarchical bootstrap CI (processes, then samples), ~ = not significant; "
           "roofline: time floor from measured device peaks / median; memory: what the cell added, median over "
           "processes: {mem} (in brackets the process's whole peak, framework included); parity: max relative "
           "error against the float64 reference (peer: against another backend's outputs where no float64 "
           "reference fits); backend · X: the attention implementation that ran; (noisy): IQR above "
           "{noise:.0%} of the median.")


def caption(rows: Iterable[Mapping[str, Any]]) -> str:
    """The tables' legend, its thresholds read from the code (stackwars/rules.py)."""
    from stackwars.rules import RULES

    return CAPTION.format(mem=_memory_counter(rows), contention=RULES["contention_threshold"].value,
                          canary=RULES["canary_floor"].value, noise=RULES["noise_threshold"].value)


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


def _group_key(row: Mapping[str, Any], machine: bool = False) -> tuple:
    """A table: workload, preset, phase, device, dtype, the overrides that are not an
    implementation variant, and (``machine``) the machine, where rows from several are shown."""
    keys, _ = variant(row)
    over = ",".join(f"{k}={v}" for k, v in sorted((row.get("overrides") or {}).items()) if k not in keys)
    return (row["workload"], row["preset"], row["phase"], row["device"], row["dtype"], over,
            (row.get("machine") or "unknown machine") if machine else None)


def _label(row: Mapping[str, Any]) -> str:
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


def _status(row: Mapping[str, Any]) -> Text:
    status = row["status"]
    style = {"ok": "green", "parity_fail": "bold red", "unsupported": "dim"}.get(status, "red")
    text = Text(status, style=style)
    if status in ("ok", "parity_fail") and row.get("noisy"):
        text.append(" (noisy)", style="yellow")
    if status in ("ok", "parity_fail") and row.get("busy"):
        text.append(f" (busy: {row.get('busy_reasons') or 'every process'})", style="yellow")
    if row.get("screened_out"):  # measured in one process: it could change no verdict (report/verdict.screen)
        text.append(" (screened out)", style="dim")
    if row.get("graph_breaks"):  # Dynamo split the program: each break a return to Python between graphs
        text.append(f" ({row['graph_breaks']} graph break{'s' if row['graph_breaks'] != 1 else ''})", style="yellow")
    return text


def _parity(row: Mapping[str, Any]) -> str:
    err, tol = row.get("parity_max_rel_err"), row.get("parity_tolerance")
    peer = (row.get("parity_reference") or "").startswith("peer")
    if err is None:
        return "pending (peer)" if peer else fmt.DASH
    return f"{err:.1e} {'✓' if parity_ok(err, tol) else '✗'}" + (" peer" if peer else "")


def compared(row: Mapping[str, Any]) -> list[list[float]]:
    """The row's steady-state samples, one list per process: what every comparison bootstraps."""
    if "process_samples" in row:  # combined: the clean processes alone (none for a busy cell)
        return row["process_samples"]
    return [list(row["steady_samples"])] if row.get("steady_samples") else []


def _vs_best(row: Mapping[str, Any], best: Mapping[str, Any] | None, shadowed: bool = False) -> str:
    """Ratio to the fastest cleanly measured row, with its 95% CI. ``?``: a noisy row is
    involved (this one or the reference), or, for the reference itself, a noisy row or a
    busy one whose busy figure is lower, which might really be faster."""
    if best is None or not compared(row) or row["status"] != "ok":
        return fmt.DASH
    doubtful = any(r.get("noisy") for r in (row, best))
    if row is best:
        return "fastest" + (" ?" if doubtful or shadowed else "")
    c = stats.compare(compared(best), compared(row))
    return (f"{c.ratio:.2f}x ({c.ci_low:.2f}-{c.ci_high:.2f})" + ("" if c.significant else " ~")
            + (" ?" if doubtful else ""))


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


def combine_repeats(rows: list[Mapping[str, Any]], noise_threshold: float = stats.NOISE_THRESHOLD) -> list[Mapping[str, Any]]:
    """One display row per backend, its figures from its clean processes only (report/gate.py):
    the steady state (mean of the per-process medians, hierarchical bootstrap CI), the first
    and second call (medians) and the memory the cell added (median). ``process_samples``,
    the samples per process every comparison resamples, holds the clean processes alone;
    ``processes_used`` / ``processes_busy`` count them and those left out. A cell with no
    clean process is ``busy``: its figures are None (nothing ranks or judges it) and what its
    busy processes read is kept apart in ``busy_figures``, for display."""
    by: OrderedDict[str, list[Mapping[str, Any]]] = OrderedDict()
    for r in rows:
        by.setdefault(_label(r), []).append(r)
    out: list[Mapping[str, Any]] = []
    for group in by.values():
        clean, busy = gate.split(group)
        row = dict(group[0])
        # the latest look its clean processes belong to, of those the run allows (stats.look_alpha)
        row.update(look=max((r.get("look") or 0 for r in clean), default=0),
                   looks=max((r.get("looks") or 1 for r in group), default=1))
        # how its clean processes were timed (records.timing_mode): one mode, or several where a cell's
        # processes were timed unlike (records made before the run chose one mode for every cell)
        row["timing_modes"] = sorted({r.get("timing_mode") or ("latency" if r.get("calls_per_sample") == 1
                                                               else "throughput") for r in clean})
        # processes the host's state would have left out, kept because it could not touch them (gate.device_bound)
        kept = [why for why in (gate.kept_reason(r) for r in clean) if why]
        row.update(processes_kept=len(kept), kept_why=kept[0] if kept else None)
        row.update(process_samples=[list(r["steady_samples"]) for r in clean], processes_used=len(clean),
                   process_repeats=[r.get("repeat") for r in clean],
                   busy_samples=[list(r["steady_samples"]) for r in busy],
                   processes_busy=len(busy), busy=bool(busy) and not clean,
                   busy_reasons=gate.reasons(busy) or None)
        # the cell's latest look (its last --processes processes: a look's worth, whatever chose or decided), and
        # how many came out clean: none means the machine stayed busy through it, and another look would
        # likely fare no better (verdict.more_processes)
        size = max(1, int(group[0].get("processes_planned") or len(group)))
        latest = sorted(group, key=lambda r: r.get("repeat") or 0)[-size:]
        row.update(latest_look=max((r.get("look") or 0 for r in group), default=0), latest_look_processes=len(latest),
                   latest_look_clean=sum(any(r is c for c in clean) for r in latest))
        if len(group) > 1:
            row.update(processes=len(group), processes_ok=sum(r["status"] == "ok" for r in group),
                       status="ok" if all(r["status"] == "ok" for r in group)
                       else next(r["status"] for r in group if r["status"] != "ok"))
        errs = [r["parity_max_rel_err"] for r in group if r.get("parity_max_rel_err") is not None]
        row.update(parity_max_rel_err=max(errs) if errs else None,
                   peak_memory_bytes=max((r["peak_memory_bytes"] for r in group if r.get("peak_memory_bytes")),
                                         default=None))
        # where its clean processes disagree by more than 10%: what their records say (report/spread.py)
        row["spread_why"] = spread.explain(clean)
        if clean:
            row.update(_figures(clean, noise_threshold))
        elif busy:  # every timed process busy: no figure decides anything; what they read, for display
            row.update(dict.fromkeys(FIGURES), busy_figures=_figures(busy, noise_threshold))
        else:  # nothing timed (failed, unsupported): what the processes recorded, a failed cell's first call
            row.update(_figures(list(group), noise_threshold))
        out.append(row)
    return out


def _figures(used: list[Mapping[str, Any]], noise_threshold: float) -> dict[str, Any]:
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


BUSY_PAYS = "cannot say (busy machine): {which} backend has no process measured on a quiet machine"


def pays_after(compiled: Mapping[str, Any], eager: Mapping[str, Any]) -> dict[str, Any]:
    """When a compiled backend's first call (trace + compile) has paid for itself against its
    eager counterpart: the extra first-call cost over the per-call saving, or never where
    its steady state is not (significantly) faster. Both rows combined over processes; a
    row with no clean process (``busy``) cannot say."""
    if compiled.get("busy") or eager.get("busy") or not compared(compiled) or not compared(eager):
        which = " and ".join(tables_label for tables_label, r in (("the compiled", compiled), ("the eager", eager))
                             if r.get("busy") or not compared(r))
        return {"calls": None, "verdict": BUSY_PAYS.format(which=which), "extra_first_s": None,
                "saving_per_call_s": None}
    cmp = stats.compare(compared(eager), compared(compiled))
    saving = eager["steady_median_s"] - compiled["steady_median_s"]
    extra = compiled["first_call_s"] - eager["first_call_s"]
    if saving <= 0 or not cmp.significant:
        calls, verdict = None, ("never pays: its steady state is not faster" if saving <= 0 else
                                "cannot say: the steady states differ by less than the noise")
    elif extra <= 0:
        calls, verdict = 1, "from the first call"
    else:
        calls = math.ceil(extra / saving) + 1
        verdict = f"after {calls:,} calls"
    return {"calls": calls, "verdict": verdict, "extra_first_s": extra, "saving_per_call_s": saving}


def _memory_counter(rows: Iterable[Mapping[str, Any]]) -> str:
    counters = sorted({r["peak_memory_counter"] for r in rows if r.get("peak_memory_counter")})
    return "; ".join(counters) if counters else "not measured"


def group_rows(rows: Iterable[Mapping[str, Any]], by_machine: bool | None = None
               ) -> "OrderedDict[tuple, list[Mapping[str, Any]]]":
    """Rows per table. Rows from several machines are never one table: ``by_machine`` None
    splits them by machine exactly when there is more than one."""
    rows = list(rows)
    if by_machine is None:
        by_machine = len({r.get("machine") for r in rows}) > 1
    groups: OrderedDict[tuple, list[Mapping[str, Any]]] = OrderedDict()
    for r in rows:
        groups.setdefault(_group_key(r, by_machine), []).append(r)
    return groups


def combined(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Every table's rows, one per backend (its processes combined): what a claim reads."""
    return [r for group in group_rows(rows).values() for r in combine_repeats(group)]


def title(key: tuple) -> str:
    workload, preset, phase, device, dtype, over, machine = key
    return (f"{workload} · {preset} · {phase} · {device} · {dtype}" + (f" · {over}" if over else "")
            + (f" · on {machine}" if machine else ""))


def _memory(row: Mapping[str, Any]) -> str:
    """What the cell added (``added_memory``, median over its clean processes: the figure the
    verdict and the report use), and in brackets the highest whole peak of a process (for
    host RSS the framework alone is 0.25-0.6 GiB of it)."""
    added, peak = row.get("memory_added_bytes"), row.get("peak_memory_bytes")
    if added is None:
        return fmt.DASH if peak is None or not row.get("busy") else f"busy (peak {fmt.nbytes(peak)})"
    return f"+{fmt.nbytes(added)}" + (f" (peak {fmt.nbytes(peak)})" if peak is not None and peak != added else "")


def _roofline(row: Mapping[str, Any]) -> str:
    f = row.get("roofline_fraction")
    return fmt.DASH if f is None else (f"⚠ {fmt.fraction(f)}" if f > 1.0 else fmt.fraction(f))


def formatted(rows: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every table cell of every row as text, whichever layout shows them."""
    rows = combine_repeats(rows)
    best, shadowed = fastest(rows)
    out = []
    for r in rows:
        median = r.get("steady_median_s")
        count = f"{r['processes_ok']}/{r['processes']} procs" if r.get("processes") else f"n={r.get('steady_n')}"
        if r.get("processes_busy") and not r.get("busy"):  # the figure is of the clean ones alone: said first
            count = (f"{r.get('processes_used', 0)} of {r['processes']} procs, {r['processes_busy']} busy left out "
                     f"({r['busy_reasons']})")
        shown = {k: fmt.seconds(r.get(k)) for k in ("first_call_s", "second_call_s")}
        if r.get("first_call_cache") == "warm" and r.get("first_call_s") is not None:
            shown["first_call_s"] += " (warm cache)"  # no cold process: compiled code read back, not compiled
        steady = fmt.seconds(median) + (f" ({count})" if median is not None else "")
        if r.get("busy"):  # nothing clean: the busy figures, marked, for display only
            b = r["busy_figures"]
            shown = {k: f"busy {fmt.seconds(b.get(k))}" for k in shown}
            steady = f"busy {fmt.seconds(b.get('steady_median_s'))} ({count}, none clean)"
        out.append({"row": r, "backend": _label(r), "First Run": shown["first_call_s"],
                    "Second Run": shown["second_call_s"], "Avg Steady State": steady,
                    "± (IQR)": fmt.seconds(r.get("steady_iqr_s")), "vs best (95% CI)": _vs_best(r, best, shadowed),
                    "achieved": fmt.rate(r.get("achieved_flops_per_s"), "FLOP"), "roofline": _roofline(r),
                    "memory": _memory(r), "parity": _parity(r), "status": _status(r)})
    return out


def fastest(rows: list[Mapping[str, Any]]) -> tuple[Mapping[str, Any] | None, bool]:
    """The fastest row of a table among those measured cleanly (combined rows), preferring
    rows that are not noisy; and whether a noisy row, or a busy one whose busy figure is
    lower, might really be faster (``shadowed``)."""
    ok = [r for r in rows if r["status"] == "ok" and r.get("steady_median_s")]
    quiet = [r for r in ok if not r.get("noisy")] or ok
    best = min(quiet, key=lambda r: r["steady_median_s"]) if quiet else None
    if best is None:
        return None, False
    busy = [r["busy_figures"]["steady_median_s"] for r in rows if r["status"] == "ok" and r.get("busy")
            and (r.get("busy_figures") or {}).get("steady_median_s")]
    shadowed = (any(r.get("noisy") and r["steady_median_s"] < best["steady_median_s"] for r in ok)
                or any(b < best["steady_median_s"] for b in busy))
    return best, shadowed


def cell_table(key: tuple, rows: list[Mapping[str, Any]]) -> Table:
    table = Table(title=title(key), title_justify="left", show_lines=False)
    for c in COLUMNS:
        table.add_column(c, justify="left" if c in ("backend", "status", "parity") else "right", no_wrap=c == "backend")
    for f in formatted(rows):
        # Text, not markup: a label like "torch-eager [mode=max-autotune]" is not a style tag
        table.add_row(*[Text(f[c]) if isinstance(f[c], str) else f[c] for c in COLUMNS])
    return table


def cell_stack(key: tuple, rows: list[Mapping[str, Any]]) -> Group:
    """The same content for a narrow terminal: a block of short lines per backend."""
    lines: list[Any] = [Text(title(key), style="bold")]
    for f in formatted(rows):
        head = Text(f"  {f['backend']}  ")
        head.append_text(f["status"])
        lines.append(head)
        lines.append(Text(f"      steady {f['Avg Steady State']} ± {f['± (IQR)']}   vs best {f['vs best (95% CI)']}"))
        lines.append(Text(f"      first {f['First Run']}   second {f['Second Run']}   {f['achieved']}   "
                          f"roofline {f['roofline']}"))
        lines.append(Text(f"      memory {f['memory']}   parity {f['parity']}"))
    return Group(*lines)


def markdown(rows: list[Mapping[str, Any]], env_summary: str | None = None) -> str:
    """The tables as GitHub-flavoured Markdown: every column, nothing cut."""
    parts = []
    for key, group in group_rows(rows).items():
        parts.append(f"**{title(key)}**\n")
        parts.append("| " + " | ".join(COLUMNS) + " |")
        parts.append("|" + "|".join("---" for _ in COLUMNS) + "|")
        for f in formatted(group):
            parts.append("| " + " | ".join(str(f[c]).replace("|", "\\|") for c in COLUMNS) + " |")
        parts.append("")
    for line in _notes(rows, env_summary):
        parts.append(line.plain if isinstance(line, Text) else str(line))
        parts.append("")
    return "\n".join(parts)


def failures(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    out = []
    for r in rows:
        if r["status"] != "ok" and r.get("error"):
            out.append(f"{r['cell_key']}: {r['status']}: {fmt.error_line(r['error'])}")
    return out


def overhead_summary(rows: Iterable[Mapping[str, Any]]) -> str | None:
    """Where the run's worker time went: measured windows, float64 references, the harness."""
    rows = [r for r in rows if r.get("wall_s") is not None]
    if not rows:
        return None
    wall = sum(r["wall_s"] for r in rows)
    measured = sum(r.get("measured_s") or 0.0 for r in rows)
    refs = [r.get("reference_computed_s") or 0.0 for r in rows]
    own = [r["reference_worker_s"] for r in rows if r.get("reference_worker_s") is not None]
    # of it, beyond the fork servers' start they ran beside (runner.start_servers_ahead); all of it where not
    extra = sum(r.get("reference_worker_extra_s", r["reference_worker_s"]) or 0.0 for r in rows
                if r.get("reference_worker_s") is not None)
    over = [r["overhead_s"] for r in rows if r.get("overhead_s") is not None]
    computed = sum(1 for r in rows if r.get("reference_source") == "computed")
    reused = sum(1 for r in rows if (r.get("reference_source") or "").startswith("reused")) - len(own)
    parts = [f"{len(rows)} cells, worker time {fmt.seconds(wall)}: measured windows {fmt.seconds(measured)}",
             f"float64 references {fmt.seconds(sum(refs))} (computed {computed}, reused {reused})"
             + (f"; {len(own)} computed in workers of their own, {fmt.seconds(sum(own))}"
                + (" more" if extra >= sum(own) - 1e-9 else
                   f", {fmt.seconds(extra)} more than the fork servers' start they ran beside") if own else "")]
    if over:
        parts.append(f"harness overhead {fmt.seconds(sum(over))} (per cell: median "
                     f"{fmt.seconds(stats.summarize(over).median)}, max {fmt.seconds(max(over))})")
    # fork servers started together before their cells: in no worker's wall time, so said here
    firsts = [(r[f"{who}server_ahead_batch"], r[f"{who}server_ahead_s"]) for who in ("", "reference_") for r in rows
              if r.get(f"{who}server_ahead_batch")]  # each server's first child carries its batch
    ahead = dict(firsts)
    during = {r[f"{who}server_ahead_batch"]: r[f"{who}server_ahead_during"] for who in ("", "reference_")
              for r in rows if r.get(f"{who}server_ahead_during")}
    if ahead:
        servers = len(firsts)
        overlapped = "".join(f"; {fmt.seconds(ahead[b])} of it while {what} ran" for b, what in during.items()
                             if b in ahead)
        parts.append(f"fork servers started ahead of their cells {fmt.seconds(sum(ahead.values()))} "
                     f"({servers} servers in {len(ahead)} batches{overlapped})")
    return "Time: " + "; ".join(parts)


WIDE_MIN = 200  # the wide table needs about this many columns; below it, the stacked layout


def _notes(rows: list[Mapping[str, Any]], env_summary: str | None) -> list[Text]:
    parts: list[Text] = []
    if rows:
        parts.append(Text(caption(rows), style="dim"))
    over = [r for r in rows if (r.get("roofline_fraction") or 0) > 1.0]
    if over:
        parts.append(Text(f"⚠ roofline above 100% in {len(over)} row(s): the stored device peak is lower than what "
                          "these cells achieved, so it was measured under load or too briefly; rerun `stackwars "
                          "peaks` on a quiet machine. Those fractions are a warning about the peak, not a result.",
                          style="yellow"))
    if any(r.get("noisy") or r.get("contended") or r.get("slowed") for r in rows if r["status"] == "ok"):
        parts.append(Text("? in vs best: this row or the fastest is noisy, or a busy row read faster; the ratio is shown, "
                          "but it is not a ranking.", style="yellow"))
    screened = {f"{title(k)} · {backend_variant(r)}": r["screened_out"] for k, group in group_rows(rows).items()
                for r in combine_repeats(list(group)) if r.get("screened_out")}
    if screened:
        parts.append(Text("Screened out after one process (measured no further: they could change no verdict):",
                          style="bold"))
        parts.extend(Text(f"  {k}: {why}", style="dim") for k, why in screened.items())
    disagree = spread_lines(rows)
    if disagree:
        parts.append(Text(f"Processes that disagree (medians more than {spread.SPREAD_THRESHOLD:.0%} apart; fastest "
                          "against slowest):", style="bold"))
        parts.extend(Text(f"  {x}") for x in disagree)
    time_line = overhead_summary(rows)
    if time_line:
        parts.append(Text(time_line, style="dim"))
    fails = failures(rows)
    if fails:
        parts.append(Text("Cells that did not finish ok:", style="bold"))
        parts.extend(Text(f"  {f}") for f in fails)
    if env_summary:
        parts.append(Text(f"Environment: {env_summary}", style="dim"))
    return parts


def spread_lines(rows: list[Mapping[str, Any]]) -> list[str]:
    """One line per cell whose clean processes' medians differ by more than the threshold."""
    out = []
    for key, group in group_rows(rows).items():
        by: OrderedDict[str, list[Mapping[str, Any]]] = OrderedDict()
        for r in group:
            by.setdefault(_label(r), []).append(r)
        for label, procs in by.items():
            e = spread.explain(gate.split(procs)[0])
            if e:
                out.append(spread.line(f"{title(key)} · {label}", e))
    return out


def render(rows: list[Mapping[str, Any]], env_summary: str | None = None, width: int | None = None) -> Group:
    """Everything `stackwars run` and `stackwars show` print after the progress bar: the
    wide tables where ``width`` allows them (or when it is None), else the stacked layout."""
    stacked = width is not None and width < WIDE_MIN
    parts: list[Any] = []
    for key, group in group_rows(rows).items():
        parts.append(cell_stack(key, group) if stacked else cell_table(key, group))
    if stacked and rows:
        parts.append(Text("Stacked layout for a narrow terminal; the full table: a wider terminal, or "
                          "`stackwars show --format markdown|csv|json`.", style="dim"))
    parts.extend(_notes(rows, env_summary))
    return Group(*parts)


def to_text(rows: list[Mapping[str, Any]], env_summary: str | None = None, width: int = 250) -> str:
    console = Console(width=width, record=True, color_system=None, force_terminal=False, file=io.StringIO())
    console.print(render(rows, env_summary, width=width))
    return console.export_text()
