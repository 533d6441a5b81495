"""Tables for the recompile and cache studies."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Mapping, Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text

from stackwars.stats import CONTENTION_THRESHOLD as THRESHOLD
from stackwars.report import format as fmt


def _with_findings(parts: list[Any], notes: Sequence[str]) -> Group:
    if notes:
        parts.append(Text("Findings:", style="bold"))
        parts.extend(Text(f"- {n}") for n in notes)
    return Group(*parts)


def recompile_table(rows: Sequence[Mapping[str, Any]], title: str) -> Group:
    columns: OrderedDict[tuple[str, str], list[Mapping[str, Any]]] = OrderedDict()
    for r in rows:
        columns.setdefault((r["backend"], r["variant"]), []).append(r)
    table = Table(title=title, title_justify="left")
    table.add_column("call")
    table.add_column(rows[0]["key"] if rows else "value", justify="right")
    for backend, variant in columns:
        table.add_column(f"{backend}\n{variant}", justify="right")
    n = max(len(c) for c in columns.values()) if columns else 0
    for i in range(n):
        first = next(c[i] for c in columns.values() if i < len(c))
        cells = []
        for c in columns.values():
            if i >= len(c):
                cells.append("")
                continue
            r = c[i]
            text = fmt.seconds(r["call_s"])
            cells.append(Text(f"✓ {text}", style="bold yellow") if r["compiled"] else Text(text))
        table.add_row(str(i), str(first["value"]), *cells)
    table.add_row(Text("compiles", style="bold"), "",
                  *[Text(str(c[-1]["compile_count"]), style="bold") for c in columns.values()])
    parts: list[Any] = [table, Text("✓ = the call compiled (counted from the framework's own compile events); "
                                    "the time is the whole synchronised call.", style="dim")]
    for (backend, variant), c in columns.items():
        reasons = [(r["call_index"], r["reason"]) for r in c if r["compiled"] and r.get("reason")]
        if reasons:
            parts.append(Text(f"{backend} {variant}:", style="bold"))
            parts.extend(Text(f"  call {i}: {why}") for i, why in reasons)
        if not c[0].get("exact", True):
            parts.append(Text(f"  {backend} {variant}: padding changes this workload's results "
                              f"(shown for its compile behaviour only)", style="yellow"))
    return Group(*parts)


def cache_table(rows: Sequence[Mapping[str, Any]], title: str) -> Group:
    table = Table(title=title, title_justify="left")
    for c in ("backend", "first call, cold cache", "first call, warm cache", "saved", "second call (same process)",
              "cache evidence (warm run)"):
        table.add_column(c, justify="left" if c in ("backend", "cache evidence (warm run)") else "right")
    by: OrderedDict[str, dict[str, Mapping[str, Any]]] = OrderedDict()
    for r in rows:
        by.setdefault(r["backend"], {})[r["run"]] = r
    for backend, runs in by.items():
        cold, warm = runs.get("cold", {}), runs.get("warm", {})
        if cold.get("status") not in ("ok", "parity_fail") or warm.get("status") not in ("ok", "parity_fail"):
            table.add_row(backend, *[fmt.DASH] * 4, f"{cold.get('status')} / {warm.get('status')}")
            continue
        saved = cold["first_call_s"] - warm["first_call_s"]
        evidence = ", ".join(f"{k} {v}" for k, v in (warm.get("cache_hits") or {}).items()) or "none reported"
        held = {k: v for k, v in (warm.get("cache_contents_before") or {}).items() if v}
        if held:  # what the warm run found in the directory (XLA's autotuning results on a GPU)
            evidence += "; found " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in held.items())
        table.add_row(backend, fmt.seconds(cold["first_call_s"]), fmt.seconds(warm["first_call_s"]),
                      f"{fmt.seconds(saved)} ({100 * saved / cold['first_call_s']:.0f}%)",
                      fmt.seconds(cold["second_call_s"]), evidence)
    return Group(table, Text("cold: a fresh process and an empty cache directory; warm: a fresh process reusing "
                             "the directory the cold run filled; second call: the in-memory caches of the cold "
                             "process.", style="dim"))


def autotune_table(rows: Sequence[Mapping[str, Any]], title: str, notes: Sequence[str]) -> Group:
    table = Table(title=title, title_justify="left")
    for c in ("backend", "autotuning", "matmul precision", "compile", "first call", "steady median", "status"):
        table.add_column(c, justify="right" if c in ("compile", "first call", "steady median") else "left")
    for r in rows:
        table.add_row(r["backend"], r["autotune"], r["matmul_precision"], fmt.seconds(r.get("compile_s")),
                      fmt.seconds(r.get("first_call_s")), fmt.seconds(r.get("steady_median_s")), r["status"])
    parts: list[Any] = [table, Text("compile: XLA's compile stage (jax-jit) or Dynamo + AOTAutograd + Inductor "
                                    "(torch); each row a fresh worker with cold caches.", style="dim")]
    parts.extend(Text(f"- {n}") for n in notes)
    return Group(*parts)


def control_flow_tables(rows: Sequence[Mapping[str, Any]], title: str, notes: Sequence[str]) -> Group:
    """Per workload and phase: a row per backend x impl (x remat), each n's first call and
    steady state, the growth exponents over n, the program size and graph breaks at the
    largest n; then the cliffs found."""
    from stackwars.studies.control_flow import fits

    parts: list[Any] = [Text(title, style="bold")]
    fitted = {(f["workload"], f["phase"], f["backend"], f["impl"], f["remat"]): f for f in fits(rows)}
    groups: OrderedDict[tuple[str, str], list[Mapping[str, Any]]] = OrderedDict()
    for r in rows:
        groups.setdefault((r["workload"], r["phase"]), []).append(r)
    for (workload, phase), rs in groups.items():
        ns = sorted({r["n"] for r in rs})
        table = Table(title=f"{workload} · {phase}: first call / steady state per call, by loop length n",
                      title_justify="left")
        table.add_column("backend · impl")
        for n in ns:
            table.add_column(f"n={n}", justify="right")
        for c in ("compile ~n^", "steady ~n^", "memory ~n^", "program ops", "breaks"):
            table.add_column(c, justify="right")
        keys = OrderedDict((k, None) for k in ((r["backend"], r["impl"], r["remat"]) for r in rs))
        for backend, impl, remat in keys:
            by_n = {r["n"]: r for r in rs if (r["backend"], r["impl"], r["remat"]) == (backend, impl, remat)}
            cells = []
            for n in ns:
                r = by_n.get(n)
                if r is None:
                    cells.append("")
                elif r["status"] in ("ok", "parity_fail"):
                    text = f"{fmt.seconds(r['first_call_s'])} / {fmt.seconds(r['steady_median_s'])}"
                    text += " †" if r.get("contended") else ""
                    cells.append(Text(text + (" ✗" if r["status"] == "parity_fail" else ""),
                                      style="red" if r["status"] == "parity_fail" else ""))
                else:
                    cells.append(Text(r["status"], style="dim" if r["status"] == "unsupported" else "red"))
            f = fitted.get((workload, phase, backend, impl, remat)) or {}
            top = f.get("at_max") or {}

            def exp(v):
                return fmt.DASH if v is None else f"{v:.2f}"

            table.add_row(f"{backend} · {impl}" + (" · remat" if remat else ""), *cells,
                          exp(f.get("compile_slope")), exp(f.get("steady_slope")),
                          exp(f.get("memory_slope")),
                          str(top.get("ir_ops") or fmt.DASH), str(top.get("graph_breaks") or 0)
                          if backend == "torch-compile" else fmt.DASH)
        parts.append(table)
    parts.append(Text("~n^x: the slope of log y against log n over the n that ran (1: linear growth, 0: flat); "
                      "compile: the first call's compile (jax-jit: XLA's compile stage; torch-compile: Dynamo + "
                      "AOTAutograd + Inductor; eager backends: first call minus steady state); memory: peak RSS "
                      "over the worker's baseline during the steady state (device allocator on a GPU); program ops: "
                      "equations in the jaxpr, a loop body's counted once (jax-jit), or the calls Dynamo captured "
                      "(torch-compile: a control-flow operator or a checkpointed region is one call, its body not "
                      "counted), at the largest n; ✗: parity failed against the float64 reference; †: other "
                      f"processes took over {THRESHOLD:.0%} of the CPUs while the cell was timed.", style="dim"))
    if notes:
        parts.append(Text("Cliffs and failures found:", style="bold"))
        parts.extend(Text(f"- {n}") for n in notes)
    return Group(*parts)


def vmap_table(rows: Sequence[Mapping[str, Any]], title: str, notes: Sequence[str]) -> Group:
    """Per op: a row per way of batching, a column per batch size (the harness's steady
    state); then, per cell, what S5's method read beside it."""
    from stackwars.studies.vmap import S5_WORDS

    parts: list[Any] = [Text(title, style="bold")]
    for op in dict.fromkeys(r["op"] for r in rows):
        mine = [r for r in rows if r["op"] == op]
        batches = sorted({r["batch"] for r in mine})
        table = Table(title=f"{op}: per call, harness (synchronised steady state) | S5's method (no sync)",
                      title_justify="left")
        table.add_column("how")
        for b in batches:
            table.add_column(f"batch {b}", justify="right")
        for key in dict.fromkeys((r["backend"], r["impl"]) for r in mine):
            by_b = {r["batch"]: r for r in mine if (r["backend"], r["impl"]) == key}
            cells = []
            for b in batches:
                r = by_b.get(b)
                if r is None:
                    cells.append("")
                elif r["status"] != "ok":
                    cells.append(Text(r["status"], style="red"))
                else:
                    s5 = fmt.seconds(r["s5_per_call_s"]) if r.get("s5_per_call_s") else fmt.DASH
                    mark = " †" if r.get("contended") else ""
                    cells.append(f"{fmt.seconds(r['steady_median_s'])}{mark} | {s5}")
            table.add_row(next(iter(by_b.values()))["label"], *cells)
        parts.append(table)
        mem = Table(title=f"{op}: memory added while the steady state ran (harness counter) | S5 (psutil RSS "
                          f"after each call)", title_justify="left")
        mem.add_column("how")
        for b in batches:
            mem.add_column(f"batch {b}", justify="right")
        for key in dict.fromkeys((r["backend"], r["impl"]) for r in mine):
            by_b = {r["batch"]: r for r in mine if (r["backend"], r["impl"]) == key}
            mem.add_row(next(iter(by_b.values()))["label"],
                        *[f"{fmt.nbytes(by_b[b]['memory_bytes'])} | {fmt.nbytes(by_b[b]['s5_memory_bytes'])}"
                          if b in by_b and by_b[b]["status"] == "ok" else "" for b in batches])
        parts.append(mem)
    parts.append(Text("harness: median seconds per call over the steady state (blocked, synchronised once per "
                      "block, thousands of calls), memory: the high-water mark over the worker's baseline (device "
                      f"allocator on a GPU); S5's method: {S5_WORDS}; †: other "
                      f"processes took over {THRESHOLD:.0%} of the CPUs while the cell was timed (left out of the findings).",
                      style="dim"))
    return _with_findings(parts, notes)


def stream_table(summary: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]], title: str) -> Group:
    """A row per backend x policy: what serving the stream cost, and whether it was right."""
    table = Table(title=title, title_justify="left")
    for c in ("backend", "policy", "requests", "total", "in compiling requests", "compiles", "padding waste",
              "breaks even with eager at", "parity (worst)"):
        table.add_column(c, justify="left" if c in ("backend", "policy") else "right")
    for s in summary:
        waste = s["wasted_flops_fraction"]
        be = s["break_even_request"]
        eager = s["policy"] == "eager"
        table.add_row(s["backend"], s["policy"], str(s["requests"]), fmt.seconds(s["total_s"]),
                      fmt.DASH if eager else fmt.seconds(s["compile_requests_s"]), str(s["compiles"]),
                      fmt.DASH if waste is None else f"{100 * waste:.0f}%",
                      "baseline" if s["policy"] == "eager" else ("never" if be is None else f"request {be}"),
                      (f"{s['parity_worst']:.1e} " + ("✓" if s["parity_all_ok"] else "✗"))
                      if s["parity_worst"] is not None else fmt.DASH)
    lengths = [r["seq"] for r in rows if r["policy"] == rows[0]["policy"] and r["backend"] == rows[0]["backend"]]
    distinct = len(set(lengths))
    buckets = len({1 << max(0, (n - 1).bit_length()) for n in lengths})
    parts: list[Any] = [table, Text(
        f"{len(lengths)} requests, {distinct} distinct lengths ({min(lengths)}-{max(lengths)}, median "
        f"{sorted(lengths)[len(lengths) // 2]}), {buckets} power-of-two buckets. total: every request's "
        "synchronised wall time, compiles included; padding waste: FLOPs done on padding over FLOPs done; breaks "
        "even: the request after which the cumulative time stays below the eager baseline's; parity: each "
        "request's output against the float64 reference of the unpadded request.", style="dim")]
    for s in summary:
        if s.get("uncompiled_shapes"):
            limit = s.get("recompile_limit")
            why = (f": Dynamo stops recompiling a function after its recompile_limit ({limit}) and runs every later "
                   "new shape uncompiled, in eager" if limit and s["compiles"] == limit + 1 else "")
            parts.append(Text(f"{s['backend']} {s['policy']}: {s['compiles']} compiles for {s['shapes']} shapes, "
                              f"{s['uncompiled_shapes']} of them served uncompiled{why}.", style="yellow"))
    return Group(*parts)


def scaling_tables(rows: Sequence[Mapping[str, Any]], title: str, notes: Sequence[str]) -> Group:
    """Per scaling: a row per (framework, strategy, N) with the slowest rank's step time,
    throughput, efficiency, memory per device and parity; then the collectives a step issues."""
    parts: list[Any] = [Text(title, style="bold")]
    for scaling in dict.fromkeys(r["scaling"] for r in rows):
        mine = [r for r in rows if r["scaling"] == scaling]
        t = Table(title=f"{scaling} scaling ({'global batch fixed' if scaling == 'strong' else 'per-device batch fixed'})",
                  title_justify="left")
        for col, just in (("framework · strategy", "left"), ("N", "right"), ("batch/dev", "right"),
                          ("status", "left"), ("first step", "right"), ("step (IQR)", "right"),
                          ("examples/s", "right"), ("speed-up", "right"), ("eff.", "right"),
                          ("state/dev", "right"), ("analytic rep|shard", "right"), ("peak/dev", "right"),
                          ("comm/step", "right"), ("parity p|g", "right")):
            t.add_column(col, justify=just)  # type: ignore[arg-type]
        for r in mine:
            p = r.get("parity") or {}
            ok = r["status"] == "ok"
            t.add_row(f"{r['framework']} · {r['strategy']}", str(r["devices"]), str(r["per_device_batch"]),
                      Text(r["status"], style="" if ok else "red"), fmt.seconds(r.get("first_step_s")),
                      f"{fmt.seconds(r.get('step_median_s'))} ({fmt.seconds(r.get('step_iqr_s'))})"
                      if r.get("step_median_s") else fmt.DASH,
                      f"{r['samples_per_s']:.0f}" if r.get("samples_per_s") else fmt.DASH,
                      f"{r['speedup']:.2f}x" if r.get("speedup") else fmt.DASH, fmt.fraction(r.get("efficiency")),
                      fmt.nbytes(r.get("state_bytes_per_device")),
                      f"{fmt.nbytes(r.get('analytic_replicated_bytes'))} | {fmt.nbytes(r.get('analytic_sharded_bytes'))}",
                      fmt.nbytes(r.get("peak_bytes_per_device")), fmt.nbytes(r.get("comm_bytes")),
                      f"{fmt.sci(p.get('params_rel_err'))} | {fmt.sci(p.get('grads_rel_err'))}" if p else fmt.DASH)
        parts.append(t)
    comm = Table(title="collectives per step (per device: count x result bytes)", title_justify="left")
    kinds = sorted({k for r in rows for k in (r.get("collectives") or {})})
    comm.add_column("framework · strategy")
    comm.add_column("N", justify="right")
    comm.add_column("scaling")
    for k in kinds:
        comm.add_column(k, justify="right")
    comm.add_column("counted from")
    for r in rows:
        c = r.get("collectives") or {}
        if r["status"] not in ("ok", "parity_fail"):
            continue
        comm.add_row(f"{r['framework']} · {r['strategy']}", str(r["devices"]), r["scaling"],
                     *[f"{c[k]['count']} x {fmt.nbytes(c[k]['bytes'])}" if k in c else "" for k in kinds],
                     r.get("comm_source") or "")
    parts.append(comm)
    parts.append(Text("step: the slowest rank's time per steady step (ranks synchronised by a barrier before each "
                      "step, outside the clock; the step's whole output waited for), median and IQR; first step: "
                      "trace + compile + run (JAX) or wrapping's first step (PyTorch), slowest rank; speed-up: "
                      "examples/s over the same framework and strategy on one device; state/dev: the parameters "
                      "and optimizer state one device keeps between steps, measured from the live arrays; analytic: "
                      "12 bytes per parameter (float32 weights, two AdamW moments) replicated, or 1/N of it "
                      "sharded (gradients, 4 bytes per parameter, live only within a step); peak/dev: the device allocator on a GPU; on a CPU, the process's RSS "
                      "high-water mark over its size before wrapping (PyTorch: the framework's own buffers included) "
                      "and XLA's compiled memory plan (JAX: arguments + outputs - donated + temporaries), not "
                      "comparable with each other; parity: the updated "
                      "parameters (p) and Adam first moments, 0.1 x the averaged gradient (g), against the same "
                      "framework's single-device step on the global batch, max|a-b|/max|b| per tensor.",
                      style="dim"))
    return _with_findings(parts, notes)


SENSITIVITY_STYLE = {"JAX faster": "bold cyan", "PyTorch faster": "bold magenta", "same speed": "green",
                     "no difference found": "green", "cannot say": "yellow"}


def sensitivity_cell(k: Mapping[str, Any]) -> str:
    """One row x knob: 'flips: 1.20 PyTorch faster (+19%)', 'stands: 0.81 JAX faster (-3%)', 'not here';
    the change in brackets is the knob's move of the ratio (sensitivity.change)."""
    if k["outcome"] == "not here":
        return "not here"
    if k.get("ratio") is None:
        return k["outcome"]
    moves = f" ({k['moves']:+.0%})" if k.get("moves") is not None else ""
    one = f" [{'/'.join(k.get('changed_sides') or [])} only]" if len(k.get("changed_sides") or []) == 1 else ""
    return f"{k['outcome']}: {k['ratio']:.3f} {k['verdict']}{moves}{one}"


def sensitivity_table(rows: Sequence[Mapping[str, Any]], title: str) -> Group:
    """Rows x knobs: each changed row's ratio JAX/PyTorch and verdict, coloured by verdict, and
    whether it flips or stands against the stored one; the sentences under it."""
    knobs = list(dict.fromkeys(k for r in rows for k in r["knobs"]))
    table = Table(title=title, title_justify="left")
    table.add_column("row (stored verdict)")
    for k in knobs:
        table.add_column(k, overflow="fold")
    for r in rows:
        cells = [Text(f"{r['row']}: {r['ratio']:.3f} {r['verdict']}" if r.get("ratio") else
                      f"{r['row']}: {r['verdict']}", style=SENSITIVITY_STYLE.get(r["verdict"], ""))]
        for k in knobs:
            c = r["knobs"].get(k) or {"outcome": "not asked"}
            cells.append(Text(sensitivity_cell(c), style="dim" if c["outcome"] in ("not here", "not measured") else
                              SENSITIVITY_STYLE.get(c.get("verdict"), "")))
        table.add_row(*cells)
    notes = [r["sentence"] for r in rows]
    parts: list[Any] = [table]
    for outcome in ("not here", "not measured"):
        why = sorted({f"{k}: {c['why']}" for r in rows for k, c in r["knobs"].items() if c["outcome"] == outcome})
        if why:
            parts.append(Text(outcome.capitalize() + ": " + "; ".join(why), style="dim"))
    return _with_findings(parts, notes)


def sensitivity_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The same table and sentences as Markdown."""
    knobs = list(dict.fromkeys(k for r in rows for k in r["knobs"]))
    lines = ["| row | " + " | ".join(knobs) + " |", "|---|" + "---|" * len(knobs)]
    lines += ["| " + " | ".join([f"{r['row']}: {r['verdict']}",
                                 *(sensitivity_cell(r["knobs"].get(k) or {"outcome": "not asked"}) for k in knobs)])
              + " |" for r in rows]
    return "\n".join(lines) + "\n\n" + "\n".join(f"- {r['sentence']}" for r in rows) + "\n"


def study_view(kind: str, rows: list[dict[str, Any]], config: Mapping[str, Any], env: Mapping[str, Any],
               title: str) -> tuple[Any, list[str]]:
    """What `stackwars show` prints for a study or training run, and its findings (generated
    from the rows), for any run kind: one dispatch for the terminal and the report."""
    from stackwars.report import training
    notes: list[str] = []
    if kind.startswith("train:"):
        return training.summary(rows, title), notes
    if kind == "study:recompile":
        return recompile_table([r for r in rows if r.get("call_index") is not None], title), notes
    if kind == "study:cache":
        return cache_table(rows, title), notes
    if kind == "study:control-flow":
        from stackwars.studies import control_flow
        notes = control_flow.cliffs(rows)
        return control_flow_tables(rows, title, notes), notes
    if kind == "study:stream":
        from stackwars.studies import stream
        served = [r for r in rows if r.get("request") is not None]
        return (stream_table(stream.summary(served), served, title) if served else f"{len(rows)} rows"), notes
    if kind == "study:vmap":
        from stackwars.studies import vmap
        notes = vmap.findings(rows)
        return vmap_table(rows, title, notes), notes
    if kind == "study:autotune":
        from stackwars.studies import autotune
        notes = autotune.findings(rows, config.get("device", "cpu"))
        return autotune_table(rows, title, notes), notes
    if kind == "study:sensitivity":
        return sensitivity_table(rows, title), [r["sentence"] for r in rows]
    if kind == "study:scaling":
        from stackwars.studies import scaling
        notes = scaling.findings(rows, bool(config.get("simulated_devices")), env.get("cpus_available"))
        return scaling_tables(rows, title, notes), notes
    return f"{len(rows)} rows", notes
