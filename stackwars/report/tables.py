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
from collections import OrderedDict
from typing import Any, Iterable, Mapping

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from stackwars import stats
from stackwars.records import parity_ok
from stackwars.report import format as fmt
from stackwars.verdict import gate, spread
from stackwars.verdict.figures import backend_variant, combine_repeats, compared, group_rows, label


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


def _status(row: Mapping[str, Any]) -> Text:
    status = row["status"]
    style = {"ok": "green", "parity_fail": "bold red", "unsupported": "dim"}.get(status, "red")
    text = Text(status, style=style)
    if status in ("ok", "parity_fail") and row.get("noisy"):
        text.append(" (noisy)", style="yellow")
    if status in ("ok", "parity_fail") and row.get("busy"):
        text.append(f" (busy: {row.get('busy_reasons') or 'every process'})", style="yellow")
    if row.get("screened_out"):  # measured in one process: it could change no verdict (verdict/choose.screen)
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


def _memory_counter(rows: Iterable[Mapping[str, Any]]) -> str:
    counters = sorted({r["peak_memory_counter"] for r in rows if r.get("peak_memory_counter")})
    return "; ".join(counters) if counters else "not measured"


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
        out.append({"row": r, "backend": label(r), "First Run": shown["first_call_s"],
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
            by.setdefault(label(r), []).append(r)
        for name, procs in by.items():
            e = spread.explain(gate.split(procs)[0])
            if e:
                out.append(spread.line(f"{title(key)} · {name}", e))
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
    console = fmt.text_console(width)
    console.print(render(rows, env_summary, width=width))
    return console.export_text()
