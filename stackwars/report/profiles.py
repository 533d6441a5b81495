"""Profiles of a run's cells (``stackwars run --profile N``): where each step's time went.

One row per profiled cell: the profiled steps' median wall time beside the timed median
(the profiler's own cost shows as their ratio), device-busy time, the gap (host, dispatch
and launch time with no kernel running: before the first kernel, between kernels, after
the last), kernels per step, copies, and the trace file. Then per cell the top kernels
and the host's top operators. The summaries come from harness/profile.py, computed in
the worker from the kept trace.
"""

from __future__ import annotations

import statistics
from typing import Any, Iterable, Mapping

from rich.console import Group
from rich.table import Table
from rich.text import Text

from stackwars.records import Measurement
from stackwars.report import format as fmt

TOP_SHOWN = 5


def profile_rows(measurements: Iterable[Measurement]) -> list[dict[str, Any]]:
    rows = []
    for m in measurements:
        prof = (m.settings or {}).get("profile")
        if not prof:
            continue
        row: dict[str, Any] = {"cell": m.spec.key, "backend": m.spec.backend, "status": m.status,
                               "profiler": prof.get("profiler"), "trace": prof.get("trace"),
                               "error": prof.get("error"),
                               "note": " ".join(filter(None, (prof.get("note"), prof.get("warning")))) or None,
                               "timed_median_s": statistics.median(m.samples) if m.samples else None}
        summary = prof.get("summary")
        if summary:
            med = summary["median"]
            row.update(steps=summary["steps"], kernel_kind=summary["kernel_kind"], **{k: med[k] for k in med},
                       busy_fraction=med["busy_s"] / med["wall_s"] if med["wall_s"] else None,
                       top_kernels=summary["top_kernels"], top_host=summary["top_host"], copies=summary["copies"],
                       regions=summary.get("regions") or [],
                       distinct_kernels=summary["distinct_kernels"])
            if row["timed_median_s"]:
                row["profiled_vs_timed"] = med["wall_s"] / row["timed_median_s"]
        rows.append(row)
    return rows


def _copies(copies: Mapping[str, Any] | None) -> str:
    if not copies:
        return "none"
    return ", ".join(f"{d} {fmt.nbytes(c['bytes_per_step'])} ({c['count_per_step']:g}×)" for d, c in copies.items())


def profile_tables(rows: list[dict[str, Any]], title: str) -> Group:
    main = Table(title=title, title_justify="left", caption=(
        "profiled steps ran after every timed call; wall: median profiled step (× timed: its ratio to the timed "
        "median, the profiler's own cost); busy: union of kernel intervals; gap = wall - busy (host, dispatch, "
        "launch: before the first kernel / between / after the last); kernels: per step, of the kind named below"),
        caption_justify="left")
    for c in ("cell", "wall", "× timed", "busy", "gap", "before / between / after", "kernels", "copies", "trace"):
        main.add_column(c, overflow="fold")
    details = []
    for r in rows:
        if r.get("error") or "wall_s" not in r:
            main.add_row(Text(r["cell"]), fmt.DASH, fmt.DASH, fmt.DASH, fmt.DASH, fmt.DASH, fmt.DASH, fmt.DASH,
                         Text(f"profile failed: {r.get('error')}", style="red"))
            continue
        ratio = f"{r['profiled_vs_timed']:.2f}×" if r.get("profiled_vs_timed") else fmt.DASH
        main.add_row(Text(r["cell"]), fmt.seconds(r["wall_s"]), ratio,
                     f"{fmt.seconds(r['busy_s'])} ({fmt.fraction(r['busy_fraction'])})", fmt.seconds(r["gap_s"]),
                     " / ".join(fmt.seconds(r[k]) for k in ("gap_before_s", "gap_between_s", "gap_after_s")),
                     f"{r['kernels']:g}", _copies(r.get("copies")), Text(r.get("trace") or fmt.DASH))
        kt = Table(title=Text(f"{r['cell']} · top kernels ({r['kernel_kind']}; {r['distinct_kernels']} distinct)"),
                   title_justify="left")
        for c in ("kernel", "per step", "time / step", "share"):
            kt.add_column(c, overflow="fold")
        for k in r["top_kernels"][:TOP_SHOWN]:
            kt.add_row(Text(k["name"]), f"{k['count_per_step']:g}", fmt.seconds(k["time_per_step_s"]), fmt.fraction(k["share"]))
        ht = Table(title=Text(f"{r['cell']} · host: top operators by self time ({r['profiler']})"),
                   title_justify="left")
        for c in ("host event", "per step", "self time / step"):
            ht.add_column(c, overflow="fold")
        for h in r["top_host"][:TOP_SHOWN]:
            ht.add_row(Text(h["name"]), f"{h['count_per_step']:g}", fmt.seconds(h["self_per_step_s"]))
        details += [kt, ht]
        if r.get("regions"):
            rt = Table(title=Text(f"{r['cell']} · the framework's named regions"), title_justify="left")
            for c in ("region", "time / step", "share of the step"):
                rt.add_column(c, overflow="fold")
            for g in r["regions"][:TOP_SHOWN]:
                rt.add_row(Text(g["name"]), fmt.seconds(g["time_per_step_s"]), fmt.fraction(g["share"]))
            details.append(rt)
        if r.get("note"):
            details.append(Text(f"{r['cell']}: {r['note']}"))
    return Group(main, *details)


HOW_MARK = {"measured": "", "analytical": " (a)"}
ANATOMY_PARTS = ("parameters", "gradients", "optimizer_state", "state", "inputs", "activations", "temporaries",
                 "outputs", "unattributed")


def anatomy_rows(measurements: Iterable[Measurement]) -> list[dict[str, Any]]:
    """One row per train-step cell with a memory anatomy (harness/anatomy.py)."""
    rows = []
    for m in measurements:
        an = (m.settings or {}).get("memory_anatomy")
        if not an:
            continue
        rows.append({"cell": m.spec.key, "backend": m.spec.backend, "error": an.get("error"),
                     "source": an.get("source"), "parts": an.get("parts") or {}, "sum_bytes": an.get("sum_bytes"),
                     "peak": an.get("peak"), "not_measured": an.get("not_measured") or []})
    return rows


ANATOMY_CAPTION = ("bytes per part of the train step; (a) analytical, unmarked: measured; PyTorch's parts are the "
                   "profiler's categories at the step's peak (with --profile), JAX's come from the live arrays and "
                   "XLA's memory analysis of the compiled step (its temporaries hold activations, gradients and "
                   "workspace as XLA packs them); vs peak: the parts' sum beside an independent peak (allocator or "
                   "compiler) and the margin it is held to")


def anatomy_matrix(rows: list[dict[str, Any]]) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The anatomy as text: a header and one tuple of cells per row (the terminal table and
    the report page both show this)."""
    present = [p for p in ANATOMY_PARTS if any(p in r["parts"] for r in rows)]
    header = ("cell", *(p.replace("_", " ") for p in present), "sum", "vs peak", "not measured")
    out = []
    for r in rows:
        if r.get("error"):
            out.append((r["cell"], *[fmt.DASH] * (len(present) + 2), f"failed: {r['error']}"))
            continue
        cells = [fmt.DASH if p not in r["parts"] else
                 fmt.nbytes(r["parts"][p]["bytes"]) + HOW_MARK.get(r["parts"][p]["how"], "") for p in present]
        peak = r.get("peak")
        check = fmt.DASH
        if peak:
            verdict = "" if peak.get("within_margin") is None else (" ok" if peak["within_margin"] else " OUTSIDE")
            check = (f"{fmt.nbytes(peak['bytes'])} ({peak['relative_gap']:+.1%}, margin ±{peak['margin']:.0%}"
                     f"{verdict})")
        out.append((r["cell"], *cells, fmt.nbytes(r["sum_bytes"]), check, ", ".join(r["not_measured"])))
    return header, out


def anatomy_table(rows: list[dict[str, Any]], title: str) -> Table:
    header, body = anatomy_matrix(rows)
    table = Table(title=title, title_justify="left", caption=ANATOMY_CAPTION, caption_justify="left")
    for c in header:
        table.add_column(c, overflow="fold")
    for cells in body:
        table.add_row(*(Text(c) for c in cells))
    return table
