"""The report's content, computed from a results database: which runs, the environment, the
decision guide, the cells in the published table format, the speed-up heatmap, compile
break-even, memory, every stored study and the MNIST training.

Every sentence of the decision guide is generated from the stored cells and names the table
it rests on; a difference the bootstrap cannot tell from noise is worded as such. Nothing
here measures: the report reads what the harness stored (it never imports the harness).

    stackwars report --out report/               # every run in the database, latest per cell
    stackwars report RUN_A RUN_B --out report/   # only these runs
"""

from __future__ import annotations

import io
import math
import tempfile
from collections import OrderedDict
from pathlib import Path
from typing import Any, Mapping, Sequence

from stackwars import canary, stats
from stackwars.records import Env
from stackwars.report import format as fmt
from stackwars import verdict as vd
from stackwars.report import tables, verdict
from stackwars.verdict import figures, beside
from stackwars.report.page import Bullets, Document, Figure, Para, Pre, Section, TableBlock, anchor
from stackwars.report.plots import plt_agg, to_png
from stackwars.report.profiles import ANATOMY_CAPTION, anatomy_matrix, anatomy_rows, profile_rows



def collect(store, run_ids: Sequence[str] | None = None) -> dict[str, Any]:
    """The runs to report (all, or the named ones), the latest row of every cell across the
    cell runs, and the latest run of every study and training kind."""
    from stackwars.store.results import cell_row, one_model_per_name, screened_out

    runs = store.runs()
    if run_ids:
        known = {r["run_id"] for r in runs}
        missing = [r for r in run_ids if r not in known]
        if missing:
            from stackwars.errors import SpecError
            raise SpecError(f"no run {', '.join(missing)} in {store.path}; `stackwars runs` lists them")
        runs = [r for r in runs if r["run_id"] in run_ids]
    cells: list[dict[str, Any]] = []
    why: OrderedDict[str, tuple[Any, Any]] = OrderedDict()  # cell key -> (profile row, anatomy row)
    studies: OrderedDict[str, tuple[Any, list[dict[str, Any]]]] = OrderedDict()
    envs: OrderedDict[str, dict[str, Any]] = OrderedDict()
    for r in runs:
        info = store.run(r["run_id"])
        envs[r["run_id"]] = info.env
        measured = store.cells(r["run_id"])  # read once: the rows, and the profiles of any run's cells
        for _, m in measured:
            prof, anat = profile_rows([m]), anatomy_rows([m])
            if prof or anat:
                why.pop(m.spec.key, None)
                why[m.spec.key] = (prof[0] if prof else None, anat[0] if anat else None)
        if r["kind"] == "cells":
            out = screened_out(store, r["run_id"])
            cells += [{**cell_row(rid, m, info), "screened_out": out.get(m.spec.key.split("#r")[0])}
                      for rid, m in measured]  # with its look: the verdict's level
        elif r["kind"] == "sensitivity-cells":
            continue  # a knob's cells: the sensitivity study's table holds what they decided
        else:  # the latest run of each study on each workload and size
            key = " ".join(str(info.config.get(k)) for k in ("workload", "preset", "op") if info.config.get(k))
            studies.pop(f"{r['kind']}|{key}", None)
            studies[f"{r['kind']}|{key}"] = (info, study_rows_of(info.kind, r["run_id"], store, measured))
    one_model_per_name(cells, f"the runs of {store.path} this report reads")  # one name from two files: refused
    # every process of each cell's latest run on each machine: a later run replaces an earlier one
    cells = vd.latest_processes(canary.judge(cells))
    return {"runs": runs, "cells": cells, "studies": studies, "envs": envs,
            "profiles": [p for p, _ in why.values() if p], "anatomy": [a for _, a in why.values() if a]}


def study_rows_of(kind: str, run_id: str, store, measured) -> list[dict[str, Any]]:
    """A study's rows: stored as rows, or (the control-flow study) as measured cells, one row each."""
    if kind == "study:control-flow":  # its results are cells (in CELL_KINDS), not study rows
        from stackwars.studies import control_flow
        return [control_flow.row(m) for _, m in measured]
    return store.study_rows(run_id)


# ---- figures ----------------------------------------------------------------------------------------


def speedups(groups: Mapping[tuple, list[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Per table and backend: time over the fastest cleanly measured backend, and whether the
    difference is significant (bootstrap of the two sets of samples)."""
    out = []
    for key, rows in groups.items():
        combined = figures.combine_repeats(list(rows))
        best, shadowed = tables.fastest(combined)
        if best is None:
            continue
        for r in combined:
            if r["status"] != "ok" or not r.get("steady_median_s"):
                continue  # failed, or measured only while the machine was busy (the guide names those)
            c = stats.compare(figures.compared(best), figures.compared(r)) if r is not best else None
            out.append({"table": tables.title(key), "backend": figures.backend_variant(r),
                        "ratio": c.ratio if c else 1.0,
                        "significant": bool(c.significant) if c else True, "fastest": r is best,
                        "doubtful": bool(r.get("noisy") or (r is best and shadowed))})
    return out


HEATMAP_CLIP = 8.0  # colour saturates at 8x: a 9,791x interpreted kernel must not make 1x and 2.6x look alike


def heatmap_colour(ratio: float) -> float:
    """The colour value of a ratio: log2, clipped to [-1, log2(HEATMAP_CLIP)] (below 0: a noisy
    or busy row measured faster than the table's fastest clean one). The cell's text keeps the
    exact ratio."""
    if not ratio > 0:
        return math.nan
    return min(max(math.log2(ratio), -1.0), math.log2(HEATMAP_CLIP))


def heatmap(points: Sequence[Mapping[str, Any]]) -> bytes | None:
    if not points:
        return None
    plt = plt_agg()
    import numpy as np
    from matplotlib.colors import TwoSlopeNorm
    rows = list(dict.fromkeys(p["table"] for p in points))
    cols = list(dict.fromkeys(p["backend"] for p in points))
    grid = np.full((len(rows), len(cols)), np.nan)
    marks = {}
    for p in points:
        i, j = rows.index(p["table"]), cols.index(p["backend"])
        grid[i, j] = heatmap_colour(p["ratio"])
        marks[i, j] = ("fastest" if p["fastest"] else f"{p['ratio']:,.2f}x") + ("" if p["significant"] else " ~") + \
            (" ?" if p["doubtful"] else "")
    fig, ax = plt.subplots(figsize=(2.0 + 1.6 * len(cols), 1.0 + 0.42 * len(rows)))
    norm = TwoSlopeNorm(vmin=-1.0, vcenter=0.0, vmax=math.log2(HEATMAP_CLIP))
    image = ax.imshow(grid, cmap="RdYlGn_r", norm=norm, aspect="auto")
    bar = fig.colorbar(image, ax=ax, fraction=0.03, pad=0.01)
    ticks = [-1.0, 0.0, 1.0, 2.0, math.log2(HEATMAP_CLIP)]
    bar.set_ticks(ticks, labels=["0.5x", "1x", "2x", "4x", f"≥{HEATMAP_CLIP:g}x"])
    bar.ax.tick_params(labelsize=7)
    for (i, j), text in marks.items():
        ax.text(j, i, text, ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    ax.set_title(f"steady-state time over the fastest cleanly measured backend of each table; colour clipped at "
                 f"{HEATMAP_CLIP:g}x (the text is exact); below 1x: a noisy or busy row measured faster "
                 "(~: not significant; ?: noisy, or a busy row read faster)", fontsize=8, wrap=True)
    fig.tight_layout()
    return to_png(fig)


def break_even(groups: Mapping[tuple, list[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """For every compiled backend with its framework's eager one in the same table: the calls
    after which the compiled first call has paid for itself (first-call extra cost over the
    per-call saving), or never where the steady state is not faster (significantly)."""
    out = []
    for key, rows in groups.items():
        # a compiled backend is set against its eager one running the same implementation variant
        # a row measured only while the machine was busy is kept: its break-even says it cannot say
        by = {(r["backend"], figures.variant(r)[1]): r for r in figures.combine_repeats(list(rows))
              if r["status"] == "ok" and (r.get("steady_median_s") or r.get("busy"))}
        for (compiled, what), c in list(by.items()):
            e = by.get((figures.EAGER_OF.get(compiled), what))
            busy = bool(e and (c.get("busy") or e.get("busy")))
            if not e or (not busy and (c.get("first_call_s") is None or e.get("first_call_s") is None)):
                continue
            out.append({"table": tables.title(key), "compiled": figures.backend_variant(c),
                        "eager": figures.backend_variant(e), **beside.pays_after(c, e),
                        "doubtful": bool(c.get("noisy") or e.get("noisy"))})
    return out


def first_vs_steady_figure(groups: Mapping[tuple, list[Mapping[str, Any]]]) -> bytes | None:
    """Per table, per backend (its processes combined, one bar pair a cell): the first call (trace +
    compile + run) beside the steady-state call, on one log axis: what compiling costs against
    what it saves per call. A cell measured only while the machine was busy is drawn hatched and
    labelled "(busy)": its figures decide nothing (first_call_points)."""
    bars = first_call_points(groups)
    if not bars:
        return None
    plt = plt_agg()
    fig, ax = plt.subplots(figsize=(10, 0.9 + 0.3 * len(bars)))
    ys = range(len(bars))
    hatch = ["//" if b[4] else None for b in bars]
    ax.barh([y - 0.2 for y in ys], [b[2] for b in bars], height=0.4, color="tab:red", label="first call",
            hatch=hatch)
    ax.barh([y + 0.2 for y in ys], [b[3] for b in bars], height=0.4, color="tab:green", label="steady state (median)",
            hatch=hatch)
    ax.set_yticks(list(ys), [f"{t} · {b}" + (" (busy)" if busy else "") for t, b, _, _, busy in bars], fontsize=6)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("seconds per call")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    return to_png(fig)


def first_call_points(groups: Mapping[tuple, list[Mapping[str, Any]]]) -> list[tuple[str, str, float, float, bool]]:
    """(table, backend, first call s, steady s, busy) per table and backend, its processes combined:
    the clean processes' figures, or a busy cell's own (``busy`` True: marked where drawn)."""
    out = []
    for k, rows in groups.items():
        for r in figures.combine_repeats(list(rows)):
            busy = bool(r.get("busy"))
            f = (r.get("busy_figures") or {}) if busy else r
            if r["status"] == "ok" and f.get("first_call_s") and f.get("steady_median_s"):
                out.append((tables.title(k), figures.backend_variant(r), f["first_call_s"], f["steady_median_s"], busy))
    return out


MEMORY_LABEL = ("memory the cell added, MiB: its steady-state peak over the worker's baseline before the first call "
                "(RSS on a CPU: framework, weights and inputs already resident), or the device allocator's peak on "
                "a GPU; median over processes")


def memory_points(groups: Mapping[tuple, list[Mapping[str, Any]]]) -> list[tuple[str, str, int]]:
    """(table, backend, bytes) per table and backend, its processes combined: what the chart plots."""
    return [(tables.title(k), figures.backend_variant(r), int(r["memory_added_bytes"]))
            for k, rows in groups.items() for r in figures.combine_repeats(list(rows))
            if r["status"] == "ok" and r.get("memory_added_bytes")]


def memory_figure(groups: Mapping[tuple, list[Mapping[str, Any]]]) -> bytes | None:
    bars = memory_points(groups)
    if not bars:
        return None
    plt = plt_agg()
    fig, ax = plt.subplots(figsize=(10, 0.9 + 0.22 * len(bars)))
    ax.barh(range(len(bars)), [m / 2**20 for _, _, m in bars], color="tab:blue")
    ax.set_yticks(range(len(bars)), [f"{t} · {b}" for t, b, _ in bars], fontsize=6)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel(MEMORY_LABEL, fontsize=7)
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    return to_png(fig)


# ---- the decision guide -------------------------------------------------------------------------------

def decision_guide(points: Sequence[Mapping[str, Any]], evens: Sequence[Mapping[str, Any]],
                   cells: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(claim, anchor of the table it rests on) pairs, generated from the data: each table's
    fastest backend against the next, and the failures. (When compiling pays is the break-even
    table's, not repeated here; ``evens`` is kept for callers.)"""
    out = []
    by_table: OrderedDict[str, list[Mapping[str, Any]]] = OrderedDict()
    for p in points:
        by_table.setdefault(p["table"], []).append(p)
    for table, ps in by_table.items():
        link = anchor(table)
        best = next(p for p in ps if p["fastest"])
        rest = sorted((p for p in ps if not p["fastest"]), key=lambda p: p["ratio"])
        if not rest:
            out.append((f"{table}: only {best['backend']} ran", link))
            continue
        faster = [p for p in rest if p["ratio"] < 1]  # measured faster, but noisy (the best is the quiet fastest)
        second = next((p for p in rest if p["ratio"] >= 1), None)
        if second is None:
            claim = f"{table}: {best['backend']} is the fastest of the backends measured cleanly"
        elif second["significant"]:
            claim = (f"{table}: use {best['backend']}; the next, {second['backend']}, takes "
                     f"{second['ratio']:.2f}x its time")
        else:
            claim = (f"{table}: {best['backend']} and {second['backend']} cannot be told apart "
                     f"({second['ratio']:.2f}x, not significant)")
        if faster:
            claim += (f"; {', '.join(p['backend'] for p in faster)} measured faster, but noisily (a spread "
                      f"between processes over {stats.NOISE_THRESHOLD:.0%}): measure again")
        elif best["doubtful"] or (second is not None and second["doubtful"]):
            claim += " (a noisy or busy-machine measurement is involved: treat as provisional)"
        out.append((claim, link))
    failed: OrderedDict[tuple, list[str]] = OrderedDict()
    for key, rows in figures.group_rows(cells).items():
        busy = [r for r in figures.combine_repeats(list(rows)) if r.get("busy") and r["status"] == "ok"]
        if busy:
            out.append((f"{tables.title(key)}: {', '.join(figures.backend_variant(r) for r in busy)} measured only "
                        f"while the machine was busy ({'; '.join(r['busy_reasons'] for r in busy)}): no figure of "
                        f"theirs decides anything here; measure again on a quiet machine", anchor(tables.title(key))))
        for r in rows:
            if r["status"] in ("oom", "error", "timeout", "parity_fail"):
                failed.setdefault((tables.title(key), r["status"]), []).append(figures.backend_variant(r))
    for (table, status), backends in failed.items():
        out.append((f"{table}: {status} for {', '.join(backends)}", anchor(table)))
    return out


# ---- the document ----------------------------------------------------------------------------------

def verdict_section(cells: Sequence[Mapping[str, Any]], profiles: Sequence[Mapping[str, Any]],
                    anatomy: Sequence[Mapping[str, Any]]) -> Section:
    """What opens the report: per machine, the verdict table (best PyTorch against best JAX)
    and its forest plot."""
    s = Section("Verdict: JAX or PyTorch")
    found = vd.verdicts(cells, profiles, anatomy)
    if not found:
        s.blocks.append(Para("These runs hold no measured cells to decide on; `stackwars run ...` measures them."))
        return s
    s.blocks.append(Para("For each workload, preset, phase, dtype and device on one machine: the best PyTorch "
                         "backend against the best JAX backend, each chosen on one process a backend and compared on "
                         "fresh ones, in rounds (one process of each, back to back); the ratio of their times with "
                         "Student's t over rounds, at the level the verdict spent (the rows of a machine and a run's "
                         "looks share 5%, and each row says its level), and a verdict that names a winner only with "
                         "three or more clean rounds and a CI clear of the tie band. The mode-by-mode detail "
                         "follows below."))
    mixed = verdict.mixed_machines(cells)
    if mixed:  # an executor placed some cells on nodes of another kind: their verdicts are apart, and said to be
        s.blocks.append(Para(mixed + "."))
    for i, (machine, rows) in enumerate(verdict.by_machine(found).items()):
        keep, absent = verdict.shown(rows)
        shared = verdict.shared_levels(rows)
        s.blocks.append(TableBlock((*(verdict.COLUMNS[i] for i in keep), "command"),
                                   tuple((*(verdict.cells(r)[i] for i in keep), verdict.command_cell(r, shared))
                                         for r in rows),
                                   f"{machine}: {verdict.summary(rows)}. {verdict.legend(rows)} command: measures the "
                                   f"row again on this machine (its backends, options and processes)"
                                   + (f"; each: {shared}" if shared else "")))
        if verdict.notes(rows) or absent:
            s.blocks.append(Bullets(tuple(absent) + tuple(verdict.notes(rows))))
        png = verdict.forest_png(rows)
        if png:
            s.blocks.append(Figure(f"verdict-forest-{i + 1}", png, f"JAX / PyTorch per workload on {machine}: point "
                                                                   "estimate and its CI at the level the verdict "
                                                                   "spent (in each label); the tie band shaded"))
    return s


def _text(renderable: Any, width: int = 170) -> str:
    console = fmt.text_console(width)
    console.print(renderable)
    return console.export_text()


def _study_figures(kind: str, rows: list[dict[str, Any]], config: Mapping[str, Any]) -> list[tuple[str, bytes]]:
    from stackwars.report import plots, training
    with tempfile.TemporaryDirectory(prefix="stackwars-report-") as tmp:
        d = Path(tmp)
        paths: list[Path] = []
        if kind == "study:control-flow":
            paths = plots.control_flow(rows, d)
        elif kind == "study:vmap":
            paths = plots.vmap(rows, d)
        elif kind == "study:stream":
            served = [r for r in rows if r.get("request") is not None]
            paths = [plots.stream(served, d, str(config.get("workload", "stream")))] if served else []
        elif kind == "study:scaling":
            paths = [plots.scaling(rows, d, f"{config.get('workload')}-{config.get('preset')}")]
        elif kind == "study:sensitivity":
            png = plots.sensitivity(rows)
            return [("sensitivity", png)] if png else []
        elif kind.startswith("train:"):
            path = d / "curves.png"
            paths = [path] if training.plot(rows, path, "MNIST training: loss and accuracy per epoch") else []
        return [(p.stem, p.read_bytes()) for p in paths]


IR_EXCERPT_LINES = 40
IR_FILES = ("jax.jaxpr.txt", "jax.stablehlo.mlir", "torch.stablehlo.mlir", "jax.hlo.txt", "torch.hlo.txt")


HLO_METADATA = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


def ir_excerpt(text: str) -> tuple[list[str], int]:
    """A program's lines from where the program starts: an HLO module's text opens with tables
    of source files, functions and stack frames (XLA's location metadata), which are not the
    program. Returns (lines, how many were skipped)."""
    lines = text.splitlines()
    if not any(line.strip() in HLO_METADATA for line in lines[:5]):
        return lines, 0
    start = next((i for i, line in enumerate(lines) if line.startswith(("%", "ENTRY", "fused_", "region_"))),
                 len(lines))
    return lines[:1] + lines[start:], start - 1


def ir_sections(dirs: Sequence[Path]) -> list[Section]:
    """From `stackwars ir ... --out DIR` dumps: the statistics of every stage both frameworks
    produced (summary.json), and the opening lines of the programs side by side."""
    import json

    out = []
    for d in dirs:
        summary = json.loads((d / "summary.json").read_text())
        s = Section(f"IR: {summary.get('cell', d.name)}")
        rows = []
        for fw in ("jax", "torch"):
            for stage, st in (summary.get(fw) or {}).items():
                if isinstance(st, Mapping):
                    ops = st.get("ops") or {}
                    top = ", ".join(f"{k} {v}" for k, v in list(ops.items())[:6]) if isinstance(ops, Mapping) else ""
                    rows.append((fw, stage, str(st.get("n_ops", "")), top))
        if rows:
            s.blocks.append(TableBlock(("framework", "stage", "ops", "most frequent"), tuple(rows),
                                       f"from summary.json of the dump {d.name}/ (stackwars ir ... --out)"))
        for name in IR_FILES:
            f = d / name
            if f.exists():
                lines, skipped = ir_excerpt(f.read_text(errors="replace"))
                s.blocks.append(Pre("\n".join(lines[:IR_EXCERPT_LINES]),
                                    f"{name}: the first {min(len(lines), IR_EXCERPT_LINES)} of {len(lines)} lines"
                                    + (f" (after {skipped} lines of source-location metadata)" if skipped else "")))
        out.append(s)
    return out


def document(data: Mapping[str, Any], generated: str, ir_dirs: Sequence[Path] = ()) -> Document:
    """The report, section by section: the verdict first, then the runs and their machines, the
    published studies' claims beside ours, the mode-by-mode guide, the measured tables and their
    figures, each study, why the processes disagree, and the IR."""
    runs, cells = data["runs"], data["cells"]
    doc = Document("stackwars report: JAX or PyTorch, which execution mode, for this workload",
                   f"generated {generated} from {len(runs)} run(s), {len(cells)} cell(s)")
    groups = figures.group_rows(cells)
    points, evens = speedups(groups), break_even(groups)
    doc.sections.append(verdict_section(cells, data.get("profiles") or [], data.get("anatomy") or []))
    doc.sections += [_runs_section(data), _environment_section(data)]
    if _answers_published(data):  # a report of a user's models alone has nothing of the published studies' to set by it
        doc.sections.append(_published_section(data))
    doc.sections.append(_guide_section(points, evens, cells))
    doc.sections += _measured_sections(groups, points, evens)
    doc.sections += _study_sections(data)
    why = why_section(data.get("profiles") or [], data.get("anatomy") or [])
    if why is not None:
        doc.sections.append(why)
    doc.sections.extend(ir_sections(ir_dirs))
    return doc


def _runs_section(data: Mapping[str, Any]) -> Section:
    overview = Section("Runs in this report")
    overview.blocks.append(TableBlock(("run", "kind", "date", "rows", "statuses", "machine", "command"), tuple(
        (r["run_id"], r["kind"], r["created_at"][:19].replace("T", " "), str(r["done"]),
         ", ".join(f"{k} {v}" for k, v in sorted(r["statuses"].items())),
         Env(data["envs"].get(r["run_id"]) or {}).machine(), r["command"] or "")
        for r in data["runs"])))
    return overview


def _environment_section(data: Mapping[str, Any]) -> Section:
    env_section = Section("Environment")
    seen = set()
    for run_id, env in data["envs"].items():
        summary = Env(env).summary() if env else "no environment recorded"
        if summary not in seen:
            seen.add(summary)
            env_section.blocks.append(Para(f"{summary} (first recorded by run {run_id})"))
    if len({Env(e or {}).machine() for e in data["envs"].values()}) > 1:
        env_section.blocks.append(Para("These runs come from more than one machine: every table and verdict below "
                                       "holds one machine's cells and names it ('on ...'); `stackwars compare RUN_A "
                                       "RUN_B --db-b OTHER` sets two machines' runs against each other."))
    return env_section


def _guide_section(points, evens, cells: Sequence[Mapping[str, Any]]) -> Section:
    guide = Section("Mode by mode")
    claims = decision_guide(points, evens, cells)
    guide.blocks.append(Para("The detail under the verdict, generated from the stored cells: within each table, the "
                             "fastest backend of any framework and whether the next one is significantly slower "
                             "(hierarchical bootstrap 95% CI over processes), and where a backend failed. When "
                             "compiling pays for its first call is in the compile break-even table. Each claim "
                             "names its table below."))
    if claims:
        guide.blocks.append(Bullets(tuple(c for c, _ in claims), tuple(a for _, a in claims)))
    else:
        guide.blocks.append(Para("These runs hold no measured cells to compare (`stackwars run ...` measures them); "
                                 "the studies below carry their own findings."))
    return guide


def _measured_sections(groups, points, evens) -> list[Section]:
    """The speed-up heatmap and first calls, the compile break-even, memory, then one table per group."""
    if not groups:
        return []
    out = []
    png = heatmap(points)
    heat = Section("Speed-up and first call")
    if png:
        heat.blocks.append(Figure("speedup-heatmap", png, "steady-state time over the fastest cleanly measured "
                                                          f"backend of each table, colour clipped at "
                                                          f"{HEATMAP_CLIP:g}x (the text is exact; below 1x: a "
                                                          "noisy or busy row measured faster); ~ marks a "
                                                          "difference that is not significant"))
    out.append(heat)
    first = first_vs_steady_figure(groups)
    if first:
        heat.blocks.append(Figure("first-vs-steady", first, "first call (trace + compile + run) beside the "
                                                            "steady-state call, per table and backend"))
    be = Section("Compile break-even")
    be.blocks.append(TableBlock(("table", "compiled", "against", "extra first call", "saving per call",
                                 "pays"), tuple(
        (e["table"], e["compiled"], e["eager"], fmt.seconds(e["extra_first_s"]),
         fmt.seconds(e["saving_per_call_s"]), e["verdict"] + (" ?" if e["doubtful"] else "")) for e in evens),
        "calls after which the compiled backend's first call (trace + compile) is paid back by its faster "
        "steady state, from processes measured on a quiet machine; ? = noisy (the spread between processes is "
        f"over {stats.NOISE_THRESHOLD:.0%} of the median)"))
    out.append(be)
    mem = memory_figure(groups)
    if mem:
        m = Section("Memory")
        m.blocks.append(Figure("memory", mem, MEMORY_LABEL + "; each table's peak mem column has the total"))
        out.append(m)
    for key, rows in groups.items():
        s = Section(tables.title(key))
        f = tables.formatted(list(rows))
        s.blocks.append(TableBlock(tables.COLUMNS, tuple(tuple(str(x[c].plain if hasattr(x[c], "plain")
                                                                   else x[c]) for c in tables.COLUMNS)
                                                         for x in f)))
        errors = [f"{figures.backend_variant(r)}: {fmt.error_line(r.get('error'))}"
                  for r in rows if r["status"] != "ok" and r.get("error")]
        if errors:
            s.blocks.append(Bullets(tuple(errors)))
        out.append(s)
    return out


def _answers_published(data: Mapping[str, Any]) -> bool:
    """Whether these runs hold anything the published studies asked about: a built-in workload's
    cells, or a study's or training's run (a user's own models alone do not)."""
    from stackwars import registry

    def built_in(name: str) -> bool:
        try:
            return registry.origin("workload", name).startswith("built-in")
        except Exception:  # noqa: BLE001 - a stored workload this process does not know: not a built-in here
            return False

    return bool(data.get("studies")) or any(built_in(r.get("workload", "")) for r in data["cells"])


def _published_section(data: Mapping[str, Any]) -> Section:
    """Each published study's claims that these runs can answer, beside our figures (report/published.py)."""
    from stackwars.report import published

    cells = data["cells"]
    pub = Section("The published studies beside ours")
    pub.blocks.append(Para("Five published comparisons of JAX and PyTorch motivate this tool; each claim of theirs "
                           "that these runs can answer is set beside our figures, with a verdict computed from them. "
                           "Machines differ: a verdict is about the claim's substance, not a comparison of raw times "
                           "across machines."))
    pub.blocks.append(TableBlock(("study", "what it is", "where it ran", "what it asked"), tuple(
        (sid, title, where, asked) for sid, (title, where, asked) in published.STUDIES.items())))
    profiles, anatomy = data.get("profiles") or [], data.get("anatomy") or []
    found = published.answers(cells, data["studies"], profiles, anatomy, vd.verdicts(cells, profiles, anatomy))
    pub.blocks.append(TableBlock(("study", "question or claim", "their figure", "our figure", "verdict", "why"),
                                 tuple((c["study_name"], c["claim"], c["figure"] or published.NO_FIGURE,
                                        c["ours"] or fmt.DASH, c["verdict"], c["why"]) for c in found),
                                 "each published question beside our figures: S3's speed question a row per workload "
                                 "(the verdict between each framework's best mode, with its interval, or why it cannot "
                                 "say), then each claim"))
    ours_on = sorted({r.get("machine") or "this machine" for r in cells}) or ["this machine"]
    pub.blocks.append(Para(f"⚠ Another device: S3's figures below come from {published.OTHER_DEVICE['S3']} and ours "
                           f"from {'; '.join(ours_on)}. They stand side by side for the shape of a row (how far the "
                           f"second call is from the steady state, which side runs out of memory), never for a "
                           f"comparison of their times."))
    pub.blocks.append(TableBlock(("workload", "S3 JAX (TPU v6e-1)", "S3 PyTorch/XLA (TPU v6e-1)", "ours jax-jit",
                                  "ours torch-mlir-xla", "ours at"), tuple(published.s3_table(cells)),
                                 "S3 (The same backend; TPU v6e-1, PyTorch through torch_xla): its table, ms: first / "
                                 "second / steady state, beside the same pair of backends here, forward; the sizes "
                                 "and devices differ"))
    return pub


def _study_sections(data: Mapping[str, Any]) -> list[Section]:
    """One section per stored study or training run: its notes, figures and table."""
    from stackwars.report import studies as study_report

    out = []
    for info, rows in data["studies"].values():
        kind = info.kind
        title = f"{kind} · " + ", ".join(f"{k}={v}" for k, v in info.config.items()
                                         if k not in ("checksums", "data", "measure", "lengths"))
        body, notes = study_report.study_view(kind, rows, info.config, info.env, title)
        what = " ".join(str(info.config[k]) for k in ("workload", "preset") if info.config.get(k))
        s = Section(("MNIST training" if kind.startswith("train:") else f"Study: {kind[6:]}")
                    + (f", {what}" if what else "") + f" (run {info.run_id})")
        if notes:
            s.blocks.append(Bullets(tuple(notes)))
        for name, png in _study_figures(kind, rows, info.config):
            s.blocks.append(Figure(f"{info.run_id}-{name}", png, f"{kind}: {name}"))
        s.blocks.append(Pre(_text(body), f"`stackwars show {info.run_id}` prints this table"))
        out.append(s)
    return out


def keep_traces(profiles: Sequence[dict[str, Any]], out_dir: Path) -> None:
    """Copy each profile's trace into OUT/traces/<run folder>/ and point the row at that
    relative path: the report's folder holds every file it names. A trace no longer on disk
    is named as missing."""
    import shutil

    for p in profiles:
        src = Path(p["trace"]) if p.get("trace") else None
        if src is None:
            continue
        if not src.is_file():
            p["trace"] = f"{src.name} (no longer on disk)"
            continue
        rel = Path("traces") / src.parent.name / src.name
        (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, out_dir / rel)
        p["trace"] = rel.as_posix()


def why_section(profiles: Sequence[Mapping[str, Any]], anatomy: Sequence[Mapping[str, Any]]) -> Section | None:
    """Profiles (`run --profile N`) and the train steps' memory anatomy: where the time and
    the memory went, with each trace's file (open it in Perfetto or chrome://tracing)."""
    if not profiles and not anatomy:
        return None
    s = Section("Why: profiles and memory anatomy")
    ok = [p for p in profiles if "wall_s" in p]
    if ok:
        s.blocks.append(TableBlock(
            ("cell", "profiled step", "× timed", "busy", "gap", "kernels / step", "top kernels", "named regions",
             "trace"),
            tuple((p["cell"], fmt.seconds(p["wall_s"]),
                   f"{p['profiled_vs_timed']:.2f}×" if p.get("profiled_vs_timed") else fmt.DASH,
                   f"{fmt.seconds(p['busy_s'])} ({fmt.fraction(p['busy_fraction'])})", fmt.seconds(p["gap_s"]),
                   f"{p['kernels']:g}",
                   "; ".join(f"{k['name']} {fmt.fraction(k['share'])}" for k in p["top_kernels"][:3]),
                   "; ".join(f"{g['name']} {fmt.seconds(g['time_per_step_s'])}" for g in (p.get("regions") or [])[:2])
                   or fmt.DASH, p.get("trace") or fmt.DASH) for p in ok),
            "profiled steps run after every timed call; busy = union of kernel intervals (kernels: CUDA kernels on a "
            "GPU; top-level operators / XLA ops on a CPU), gap = wall - busy: host, dispatch and launch time; the "
            "traces are Chrome trace JSON (Perfetto, chrome://tracing)"))
    failed = [p for p in profiles if "wall_s" not in p]
    if failed:
        s.blocks.append(Bullets(tuple(f"{p['cell']}: profile failed: {p.get('error')}" for p in failed)))
    if anatomy:
        header, body = anatomy_matrix(list(anatomy))
        s.blocks.append(TableBlock(header, tuple(body), ANATOMY_CAPTION))
    return s
