"""The seeds' tables: one per workload x preset x phase x device x dtype, a row per backend.

| backend | First Run | Second Run | Avg Steady State | ± (IQR) | vs best | achieved | roofline |
  peak mem | parity | status |

"Avg Steady State" keeps the seeds' column name; the value is the median per-call time of
the steady-state samples (robust to the stragglers that make means lie). "vs best" is
the ratio of medians to the fastest ok backend of the table, with a bootstrap 95% CI;
"~" marks a difference that is not significant.

A cell measured in several processes (``--repeat N``) is one row: the median of the
per-process medians, the IQR *between* processes, and significance bootstrapped over
processes, since on a shared machine the process-to-process spread can exceed the
spread within one process.
"""

from __future__ import annotations

import io
from collections import OrderedDict
from typing import Any, Iterable, Mapping

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from stackwars import stats
from stackwars.report import format as fmt

COLUMNS = ("backend", "First Run", "Second Run", "Avg Steady State", "± (IQR)", "vs best", "achieved",
           "roofline", "peak mem", "parity", "status")

CAPTION = ("Avg Steady State: median seconds per call over the steady-state samples (n), or the median of "
           "the per-process medians (procs); ± (IQR): interquartile range (between processes when repeated); vs best: ratio of medians to the fastest backend, 95% bootstrap CI, "
           "~ = not significant; roofline: time floor from measured device peaks / median; peak mem: "
           "{mem}; parity: max relative error against the float64 reference (peer: against another backend's "
           "outputs where no float64 reference fits); backend · X: the attention implementation that ran; "
           "(noisy): IQR above 10% of the "
           "median; (contended): other processes or the hypervisor took over 5% of the cell's CPUs while it "
           "was timed.")


def _group_key(row: Mapping[str, Any]) -> tuple:
    over = ",".join(f"{k}={v}" for k, v in sorted((row.get("overrides") or {}).items()))
    return (row["workload"], row["preset"], row["phase"], row["device"], row["dtype"], over)


def _label(row: Mapping[str, Any]) -> str:
    opts = row.get("options") or {}
    label = row["backend"]
    if opts:
        label += f" [{', '.join(f'{k}={v}' for k, v in sorted(opts.items()))}]"
    if row.get("attention"):  # the attention implementation that ran (observed where possible)
        label += f" · {row['attention']}"
    return label


def _status(row: Mapping[str, Any]) -> Text:
    status = row["status"]
    style = {"ok": "green", "parity_fail": "bold red", "unsupported": "dim"}.get(status, "red")
    text = Text(status, style=style)
    if status in ("ok", "parity_fail") and row.get("noisy"):
        text.append(" (noisy)", style="yellow")
    if status in ("ok", "parity_fail") and row.get("contended"):
        text.append(" (contended)", style="yellow")
    return text


def _parity(row: Mapping[str, Any]) -> str:
    err, tol = row.get("parity_max_rel_err"), row.get("parity_tolerance")
    peer = (row.get("parity_reference") or "").startswith("peer")
    if err is None:
        return "pending (peer)" if peer else fmt.DASH
    return f"{err:.1e} {'✓' if tol is not None and err <= tol else '✗'}" + (" peer" if peer else "")


def _compared(row: Mapping[str, Any]) -> list[float]:
    return row.get("process_medians") or row.get("steady_samples") or []


def _vs_best(row: Mapping[str, Any], best: Mapping[str, Any] | None) -> str:
    if best is None or not _compared(row) or row["status"] != "ok":
        return fmt.DASH
    if row is best:
        return "fastest"
    c = stats.compare(_compared(best), _compared(row))
    return f"{c.ratio:.2f}x" + ("" if c.significant else " ~")


def combine_repeats(rows: list[Mapping[str, Any]], noise_threshold: float = 0.10) -> list[Mapping[str, Any]]:
    """One display row per backend: a cell measured in several processes is summarised
    over its processes; a cell measured once passes through unchanged."""
    by: OrderedDict[str, list[Mapping[str, Any]]] = OrderedDict()
    for r in rows:
        by.setdefault(_label(r), []).append(r)
    out: list[Mapping[str, Any]] = []
    for group in by.values():
        if len(group) == 1:
            out.append(group[0])
            continue
        ok = [r for r in group if r["status"] == "ok" and r.get("steady_median_s")]
        medians = [r["steady_median_s"] for r in ok]
        row = dict(group[0])
        if not ok:
            out.append(row)
            continue
        summary = stats.summarize(medians, noise_threshold)

        def median_of(key):
            values = [r[key] for r in group if r.get(key) is not None]
            return stats.summarize(values).median if values else None

        scale = lambda key: (ok[0][key] * ok[0]["steady_median_s"] / summary.median) if ok[0].get(key) else None
        errs = [r["parity_max_rel_err"] for r in group if r.get("parity_max_rel_err") is not None]
        row.update(
            status="ok" if len(ok) == len(group) else next(r["status"] for r in group if r["status"] != "ok"),
            first_call_s=median_of("first_call_s"), second_call_s=median_of("second_call_s"),
            steady_median_s=summary.median, steady_iqr_s=summary.iqr, noisy=summary.noisy,
            contended=any(r.get("contended") for r in group),
            process_medians=medians, processes=len(group), processes_ok=len(ok),
            achieved_flops_per_s=scale("achieved_flops_per_s"), roofline_fraction=scale("roofline_fraction"),
            peak_memory_bytes=max((r["peak_memory_bytes"] for r in group if r.get("peak_memory_bytes")), default=None),
            parity_max_rel_err=max(errs) if errs else None)
        out.append(row)
    return out


def _memory_counter(rows: Iterable[Mapping[str, Any]]) -> str:
    counters = sorted({r["peak_memory_counter"] for r in rows if r.get("peak_memory_counter")})
    return "; ".join(counters) if counters else "not measured"


def group_rows(rows: Iterable[Mapping[str, Any]]) -> "OrderedDict[tuple, list[Mapping[str, Any]]]":
    groups: OrderedDict[tuple, list[Mapping[str, Any]]] = OrderedDict()
    for r in rows:
        groups.setdefault(_group_key(r), []).append(r)
    return groups


def cell_table(key: tuple, rows: list[Mapping[str, Any]]) -> Table:
    workload, preset, phase, device, dtype, over = key
    title = f"{workload} · {preset} · {phase} · {device} · {dtype}" + (f" · {over}" if over else "")
    table = Table(title=title, title_justify="left", show_lines=False)
    for c in COLUMNS:
        table.add_column(c, justify="left" if c in ("backend", "status", "parity") else "right", no_wrap=c == "backend")
    rows = combine_repeats(rows)
    ok = [r for r in rows if r["status"] == "ok" and r.get("steady_median_s")]
    best = min(ok, key=lambda r: r["steady_median_s"]) if ok else None
    for r in rows:
        median = r.get("steady_median_s")
        count = f"{r['processes_ok']}/{r['processes']} procs" if r.get("processes") else f"n={r.get('steady_n')}"
        table.add_row(
            _label(r),
            fmt.seconds(r.get("first_call_s")),
            fmt.seconds(r.get("second_call_s")),
            fmt.seconds(median) + (f" ({count})" if median is not None else ""),
            fmt.seconds(r.get("steady_iqr_s")),
            _vs_best(r, best),
            fmt.rate(r.get("achieved_flops_per_s"), "FLOP"),
            fmt.fraction(r.get("roofline_fraction")),
            fmt.nbytes(r.get("peak_memory_bytes")),
            _parity(r),
            _status(r),
        )
    return table


def failures(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    out = []
    for r in rows:
        if r["status"] != "ok" and r.get("error"):
            first = next((line for line in r["error"].splitlines() if line.strip()), "")
            out.append(f"{r['cell_key']}: {r['status']}: {first[:300]}")
    return out


def overhead_summary(rows: Iterable[Mapping[str, Any]]) -> str | None:
    """Where the run's worker time went: measured windows, float64 references, the harness."""
    rows = [r for r in rows if r.get("wall_s") is not None]
    if not rows:
        return None
    wall = sum(r["wall_s"] for r in rows)
    measured = sum(r.get("measured_s") or 0.0 for r in rows)
    refs = [r.get("reference_computed_s") or 0.0 for r in rows]
    over = [r["overhead_s"] for r in rows if r.get("overhead_s") is not None]
    computed = sum(1 for r in rows if r.get("reference_source") == "computed")
    reused = sum(1 for r in rows if (r.get("reference_source") or "").startswith("reused"))
    parts = [f"{len(rows)} cells, worker time {fmt.seconds(wall)}: measured windows {fmt.seconds(measured)}",
             f"float64 references {fmt.seconds(sum(refs))} (computed {computed}, reused {reused})"]
    if over:
        parts.append(f"harness overhead {fmt.seconds(sum(over))} (per cell: median "
                     f"{fmt.seconds(stats.summarize(over).median)}, max {fmt.seconds(max(over))})")
    return "Time: " + "; ".join(parts)


def render(rows: list[Mapping[str, Any]], env_summary: str | None = None) -> Group:
    """Everything `stackwars run` and `stackwars show` print after the progress bar."""
    parts: list[Any] = []
    for key, group in group_rows(rows).items():
        parts.append(cell_table(key, group))
    if rows:
        parts.append(Text(CAPTION.format(mem=_memory_counter(rows)), style="dim"))
    time_line = overhead_summary(rows)
    if time_line:
        parts.append(Text(time_line, style="dim"))
    fails = failures(rows)
    if fails:
        parts.append(Text("Cells that did not finish ok:", style="bold"))
        parts.extend(Text(f"  {f}") for f in fails)
    if env_summary:
        parts.append(Text(f"Environment: {env_summary}", style="dim"))
    return Group(*parts)


def to_text(rows: list[Mapping[str, Any]], env_summary: str | None = None, width: int = 200) -> str:
    console = Console(width=width, record=True, color_system=None, force_terminal=False, file=io.StringIO())
    console.print(render(rows, env_summary))
    return console.export_text()
