"""Control-flow study: where loops, data-dependent loops and branches make a compiler fall
off a cliff.

    stackwars study control-flow rnn ode newton branch --vary n=10,30,100,300,1000 \\
        --phase forward --phase train-step [--remat]

Every (workload, impl, n, remat) x phase x backend is a cell, measured by the harness like
any other (first call, steady state, memory, parity against the float64 reference) and
stored with its record; the study adds, per cell, the size of the program the compiler saw
(equations in the jaxpr and operations in the StableHLO for jax-jit, operations Dynamo
captured for torch-compile), graphs and graph breaks. Over n it fits the growth of compile
time, run time and memory (the slope of log y against log n: 1 = linear, 0 = flat) and
names the cliffs: compile time that grows with n (an unrolled loop), graph breaks that
multiply, backward-pass memory that grows with n and what rematerialisation buys back, and
what does not run or does not agree.

``torch-compile`` compiles PyTorch's control-flow operators (scan, while_loop, cond) with
``fullgraph=True``: they work only when captured whole ("This higher order operator
doesn't work unless it is captured completely with torch.compile"), which is how their
documentation uses them; Python loops and branches are compiled as written, graph
breaks allowed, since those are what the study counts.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any, Iterable, Mapping, Sequence

from stackwars.harness.contention import THRESHOLD
from stackwars import registry
from stackwars.errors import SpecError
from stackwars.records import CellSpec, Measurement
from stackwars.workloads.loops import IMPLS

WORKLOADS = tuple(IMPLS)
BACKENDS = ("torch-eager", "torch-compile", "jax-eager", "jax-jit")
HOPS = ("scan", "while", "cond")  # PyTorch's control-flow operators: compiled with fullgraph=True


def parse_ns(text: str) -> list[int]:
    key, sep, values = text.partition("=")
    if key.strip() != "n" or not sep:
        raise SpecError(f"--vary expects n=V1,V2,... (the loop length), got {text!r}")
    from stackwars.parse import positive_ints

    return positive_ints(values, "--vary n", "loop lengths")


def plan(workloads: Sequence[str], impls: Sequence[str] | None, ns: Sequence[int], phases: Sequence[str],
         backends: Sequence[str], preset: str, remat: bool, device: str, dtype: str) -> list[CellSpec]:
    from stackwars import runner

    for w in workloads:
        if w not in WORKLOADS:
            raise SpecError(f"the control-flow study covers {', '.join(WORKLOADS)}; got {w!r}")
    for b in backends:
        if b not in BACKENDS:
            raise SpecError(f"the control-flow study compares {', '.join(BACKENDS)}; got {b!r}")
    known = {i for w in workloads for i in IMPLS[w]}
    bad = [i for i in impls or () if i not in known]
    if bad:
        raise SpecError(f"impl {', '.join(bad)} applies to none of {', '.join(workloads)}; "
                        + "; ".join(f"{w}: {', '.join(IMPLS[w])}" for w in workloads))
    specs: list[CellSpec] = []
    for w in workloads:
        for impl in [i for i in IMPLS[w] if not impls or i in impls]:
            for n in ns:
                for phase in phases:
                    # rematerialisation changes only a backward pass: train steps get both variants
                    for r in ((False, True) if remat and phase == "train-step" else (False,)):
                        over = {"impl": impl, "n": n, "remat": r}
                        for b in backends:
                            options = {"fullgraph": True} if b == "torch-compile" and impl in HOPS else {}
                            specs += runner.plan_cells([w], [preset], [phase], [b], [device], [dtype], over,
                                                       options)
    return specs


def row(m: Measurement) -> dict[str, Any]:
    r = m.to_row()
    over = dict(m.spec.overrides)
    extra = (m.compile.extra if m.compile else {}) or {}
    ir = extra.get("ir_size") or {}
    mem = m.memory
    added = None
    if mem is not None and mem.peak_rss_steady_bytes is not None and mem.baseline_rss_bytes is not None:
        added = max(0, mem.peak_rss_steady_bytes - mem.baseline_rss_bytes)
    if mem is not None and mem.peak_device_bytes is not None:
        added = mem.peak_device_bytes
    # what the first call cost beyond running: the compile where one is reported, else first - steady
    compile_s = r["compile_s"]
    if compile_s is None and r["first_call_s"] is not None and r["steady_median_s"] is not None:
        compile_s = max(0.0, r["first_call_s"] - r["steady_median_s"])
    return {"workload": m.spec.workload, "phase": m.spec.phase, "backend": m.spec.backend,
            "impl": over.get("impl"), "n": int(over.get("n", 0)), "remat": bool(over.get("remat", False)),
            "status": m.status, "first_call_s": r["first_call_s"], "compile_s": compile_s,
            "steady_median_s": r["steady_median_s"], "memory_added_bytes": added,
            "ir_ops": ir.get("jaxpr_eqns", ir.get("fx_ops_captured")), "stablehlo_ops": ir.get("stablehlo_ops"),
            "graphs": r["graphs"], "graph_breaks": r["graph_breaks"],
            "break_reason": (m.compile.break_reasons[0][:160] if m.compile and m.compile.break_reasons else None),
            "parity": r["parity_max_rel_err"],
            "contended": bool(r["contended"]), "noisy": bool(r["noisy"]),
            "error": _gist(m.error), "cell_key": m.spec.key}


def _gist(error: str | None) -> str | None:
    """The informative head of an error: its first lines up to 300 characters (a compiler's
    first line is often only 'backend=inductor raised:')."""
    if not error:
        return None
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    text = ""
    for line in lines:
        if line.startswith(("Traceback", "File ", "---")):
            break
        text = f"{text} {line}".strip()
        if len(text) > 120:
            break
    return text[:300]


def slope(ns: Sequence[float], ys: Sequence[float]) -> float | None:
    """Least-squares slope of log y against log n (1: linear growth, 0: flat); None with
    fewer than two positive points."""
    pts = [(math.log(n), math.log(y)) for n, y in zip(ns, ys) if n and y and n > 0 and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx else None


def series(rows: Iterable[Mapping[str, Any]]) -> "OrderedDict[tuple, list[Mapping[str, Any]]]":
    """Rows grouped by (workload, phase, backend, impl, remat), each sorted by n."""
    out: OrderedDict[tuple, list[Mapping[str, Any]]] = OrderedDict()
    for r in rows:
        out.setdefault((r["workload"], r["phase"], r["backend"], r["impl"], r["remat"]), []).append(r)
    return OrderedDict((k, sorted(v, key=lambda r: r["n"])) for k, v in out.items())


def fits(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per series: the log-log slopes of compile time, steady state, memory and program size."""
    out = []
    for key, rs in series(rows).items():
        ok = [r for r in rs if r["status"] in ("ok", "parity_fail")]
        ns = [r["n"] for r in ok]
        out.append({"workload": key[0], "phase": key[1], "backend": key[2], "impl": key[3], "remat": key[4],
                    "n": [r["n"] for r in rs], "statuses": [r["status"] for r in rs],
                    "compile_slope": slope(ns, [r["compile_s"] for r in ok]),
                    # a time from a busy machine decides nothing (verdict/gate.py): not in the slope
                    "steady_slope": slope([r["n"] for r in ok if not r.get("contended")],
                                          [r["steady_median_s"] for r in ok if not r.get("contended")]),
                    "memory_slope": slope(ns, [r["memory_added_bytes"] for r in ok]),
                    "ir_slope": slope(ns, [r["ir_ops"] for r in ok]),
                    "max_n": max(ns) if ns else None,
                    "at_max": ok[-1] if ok else None, "at_min": ok[0] if ok else None})
    return out


GROWS, FLAT = 0.7, 0.25  # slopes: "grows with n" (about linear), "flat"
COMPILED = ("jax-jit", "torch-compile")  # where "compile" is the compiler's own figure
SIGNIFICANT_COMPILE_S = 0.5  # a compile claim needs this much at the largest n
SIGNIFICANT_MEMORY = 32 * 2**20  # memory claims below this are allocator noise


def cliffs(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The findings, in words, each with the figures it rests on."""
    from stackwars.report import format as fmt

    notes: list[str] = []
    fitted = fits(rows)
    for f in fitted:
        top, low = f["at_max"], f["at_min"]
        if top is None or f["max_n"] == (low or {}).get("n"):
            continue
        where = f"{f['workload']} {f['phase']} · {f['backend']} · impl={f['impl']}" + (" · remat" if f["remat"] else "")
        cs = f["compile_slope"]
        if f["backend"] in COMPILED and cs is not None and cs >= GROWS and (top["compile_s"] or 0) > SIGNIFICANT_COMPILE_S:
            size = f", {top['ir_ops']} ops in its program" if top.get("ir_ops") else ""
            notes.append(f"{where}: the first call's compile grows as n^{cs:.2f} ({fmt.seconds(low['compile_s'])} at "
                         f"n={low['n']} -> {fmt.seconds(top['compile_s'])} at n={top['n']}{size}): the loop is "
                         f"unrolled into the program")
        if (top.get("graph_breaks") or 0) > (low.get("graph_breaks") or 0):
            notes.append(f"{where}: graph breaks multiply with n ({low['graph_breaks']} at n={low['n']} -> "
                         f"{top['graph_breaks']} at n={top['n']}; {top.get('graphs')} graphs)")
        ms = f["memory_slope"]
        if f["phase"] == "train-step" and ms is not None and ms >= GROWS \
                and (top["memory_added_bytes"] or 0) > SIGNIFICANT_MEMORY:
            notes.append(f"{where}: backward-pass memory grows as n^{ms:.2f} ({fmt.nbytes(low['memory_added_bytes'])}"
                         f" at n={low['n']} -> {fmt.nbytes(top['memory_added_bytes'])} at n={top['n']})")
        elif f["phase"] == "forward" and ms is not None and ms >= GROWS \
                and (top["memory_added_bytes"] or 0) > SIGNIFICANT_MEMORY:
            notes.append(f"{where}: memory grows as n^{ms:.2f} in the forward pass, which keeps no activations "
                         f"({fmt.nbytes(low['memory_added_bytes'])} at n={low['n']} -> "
                         f"{fmt.nbytes(top['memory_added_bytes'])} at n={top['n']}): the program itself grows (its "
                         f"compiled code, and what compiling it left resident)")
    # what rematerialisation buys back, at the largest n both ran
    by = {(f["workload"], f["phase"], f["backend"], f["impl"], f["remat"]): f for f in fitted}
    for (w, ph, b, impl, remat), f in by.items():
        plain = by.get((w, ph, b, impl, False))
        if not remat or ph != "train-step" or plain is None or not f["at_max"] or not plain["at_max"]:
            continue
        m_r, m_p = f["at_max"]["memory_added_bytes"], plain["at_max"]["memory_added_bytes"]
        t_r, t_p = f["at_max"]["steady_median_s"], plain["at_max"]["steady_median_s"]
        if m_r and m_p and t_r and t_p and f["at_max"]["n"] == plain["at_max"]["n"] \
                and max(m_r, m_p) > SIGNIFICANT_MEMORY:
            change = f"{100 * (1 - m_r / m_p):.0f}% less" if m_r <= m_p else f"{100 * (m_r / m_p - 1):.0f}% more"
            busy = f["at_max"].get("contended") or plain["at_max"].get("contended")
            cost = ("its step time not compared (a machine busy while one was timed)" if busy
                    else f"for {t_r / t_p:.2f}x the step time")
            notes.append(f"{w} train-step · {b} · impl={impl}: remat at n={f['at_max']['n']} holds "
                         f"{fmt.nbytes(m_r)} instead of {fmt.nbytes(m_p)} ({change}) {cost}")
    # flat against growing: the same workload's best alternative
    for f in fitted:
        cs = f["compile_slope"]
        if f["backend"] not in COMPILED or cs is None or cs < GROWS \
                or ((f["at_max"] or {}).get("compile_s") or 0) <= SIGNIFICANT_COMPILE_S:
            continue
        flat = [g for g in fitted if g["workload"] == f["workload"] and g["phase"] == f["phase"]
                and g["backend"] == f["backend"] and g["impl"] != f["impl"] and g["remat"] == f["remat"]
                and g["compile_slope"] is not None and g["compile_slope"] <= FLAT]
        for g in flat:
            remat = " · remat" if g["remat"] else ""
            notes.append(f"{g['workload']} {g['phase']} · {g['backend']}{remat}: impl={g['impl']} keeps the compile "
                         f"flat (n^{g['compile_slope']:.2f}) where impl={f['impl']} grows (n^{cs:.2f})"
                         + (" (but its results fail parity)" if "parity_fail" in g["statuses"] else ""))
    # a graph break that sends the loop back to eager: compiled, but no faster than eager
    for f in fitted:
        top = f["at_max"]
        if f["backend"] != "torch-compile" or top is None or not top.get("graph_breaks"):
            continue
        eager = by.get((f["workload"], f["phase"], "torch-eager", f["impl"], f["remat"]))
        e_top = (eager or {}).get("at_max")
        if not e_top or e_top["n"] != top["n"] or not e_top["steady_median_s"] or not top["steady_median_s"] \
                or e_top.get("contended") or top.get("contended"):  # times from a busy machine compare nothing
            continue
        if top["steady_median_s"] >= 0.7 * e_top["steady_median_s"]:
            reason = f"; Dynamo: {top['break_reason']}" if top.get("break_reason") else ""
            low = f["at_min"]
            span = (f"at n={low['n']} and n={top['n']} alike" if low and low["n"] != top["n"]
                    and low.get("graph_breaks") == top["graph_breaks"] else f"at n={top['n']}")
            notes.append(f"{f['workload']} {f['phase']} · torch-compile · impl={f['impl']}: {top['graph_breaks']} "
                         f"graph break(s) {span}, {top.get('ir_ops')} calls captured, and the loop runs at eager "
                         f"speed ({fmt.seconds(top['steady_median_s'])} vs torch-eager "
                         f"{fmt.seconds(e_top['steady_median_s'])} at n={top['n']}): the compiler gave the loop back "
                         f"to Python{reason}")
    # run time at the largest n: an implementation far slower than its framework's fastest
    tops: dict[tuple, list[Mapping[str, Any]]] = {}
    for f in fitted:
        if f["at_max"] is not None and not f["remat"]:
            tops.setdefault((f["workload"], f["phase"], f["backend"].split("-")[0], f["max_n"]), []).append(f["at_max"])
    for (w, ph, fw, n), cands in tops.items():
        # a wrong answer is no baseline: only cells that agreed with the reference, timed on a quiet machine
        clean = [c for c in cands if c["status"] == "ok" and c["steady_median_s"] and not c.get("contended")]
        if len(clean) < 2:
            continue
        best = min(clean, key=lambda c: c["steady_median_s"])
        for c in clean:
            ratio = c["steady_median_s"] / best["steady_median_s"]
            if ratio >= 3:
                notes.append(f"{w} {ph} at n={n}: {c['backend']} · impl={c['impl']} takes {ratio:.1f}x the time "
                             f"per step of {best['backend']} · impl={best['impl']} ({fmt.seconds(c['steady_median_s'])} "
                             f"vs {fmt.seconds(best['steady_median_s'])})")
    contended = [r for r in rows if r.get("contended")]
    if contended:
        notes.append(f"{len(contended)} cell(s) ran while other processes took over {THRESHOLD:.0%} of the CPUs "
                     "(marked †): their times are not compared")
    failing = [r for r in rows if r["status"] in ("error", "timeout", "parity_fail")]
    for r in failing:
        notes.append(f"{r['workload']} {r['phase']} · {r['backend']} · impl={r['impl']} n={r['n']}: {r['status']}"
                     + (f" ({r['error'][:160]})" if r.get("error") else ""))
    return list(dict.fromkeys(notes))


def capabilities(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Which impl runs where: ok / unsupported (by design) / error (in this version) /
    parity_fail, per workload x impl x backend x phase, over every n measured."""
    out: OrderedDict[tuple, set[str]] = OrderedDict()
    for r in rows:
        out.setdefault((r["workload"], r["impl"], r["backend"], r["phase"]), set()).add(r["status"])
    return [{"workload": w, "impl": i, "backend": b, "phase": p, "status": "/".join(sorted(s))}
            for (w, i, b, p), s in out.items()]


def workload_names() -> list[str]:
    return [w for w in WORKLOADS if w in registry.workloads()]
