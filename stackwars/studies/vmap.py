"""vmap study (S5, done right): a per-example dot product and attention, batched by a
Python loop, by ``vmap``, by hand, each eager and compiled, over a sweep of batch sizes.

    stackwars study vmap --op dot --op attention --batch 1,16,256,1024

Every (op, impl, batch) x backend is a cell measured by the harness (synchronised, first
call apart, a steady state of thousands of calls, the RSS high-water mark or the device
allocator, parity against numpy in float64). Beside it, in a worker of its own, the same
callable is measured S5's way: 1000 calls timed with ``time.perf_counter`` and no
synchronisation, the process's RSS read by psutil after each call, the first call excluded
(S5 measured JAX warm); a call slower than S5_WINDOW_S / 1000 gets as many calls as fill
S5_WINDOW_S, at least S5_MIN_CALLS (what the method gets wrong is per call: a JAX Python
loop at batch 128, 0.13 s a call on the 2-CPU VM, spent 133 s on 1000 calls to read
1.00x). The report sets the two side by side, so how much that method misleads is a
measured figure: JAX dispatches asynchronously, so an unsynchronised clock
reads the dispatch, not the work.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from typing import Any, Callable, Mapping, Sequence

from stackwars.errors import SpecError
from stackwars.records import CellSpec, Measurement
from stackwars.workloads.vmapped import IMPLS

OPS = {"dot": "vmap-dot", "attention": "vmap-attention"}
BACKENDS = ("torch-eager", "torch-compile", "jax-eager", "jax-jit")
S5_CALLS = 1000  # S5's window
S5_WINDOW_S = 5.0  # a slow call's window: as many calls as fill it, at least S5_MIN_CALLS
S5_MIN_CALLS = 100
S5_WORDS = (f"{S5_CALLS} calls between two perf_counter reads with no synchronisation (a slower call: as many as fill "
            f"{S5_WINDOW_S:g} s, at least {S5_MIN_CALLS}), psutil's RSS read after each call, first call excluded")
RSS_READ_S = 100e-6  # a psutil RSS read costs tens of microseconds: a larger gap per call is something else
LABELS = {  # what each (backend, impl) is, in the words of S5 and the frameworks
    ("torch-eager", "loop"): "PyTorch Python loop", ("torch-eager", "vmap"): "torch.func.vmap",
    ("torch-eager", "batched"): "PyTorch batched op", ("torch-compile", "vmap"): "torch.compile(vmap)",
    ("torch-compile", "loop"): "torch.compile(loop)", ("torch-compile", "batched"): "torch.compile(batched)",
    ("jax-eager", "loop"): "JAX Python loop", ("jax-eager", "vmap"): "jax.vmap (no jit)",
    ("jax-eager", "batched"): "JAX batched, no jit", ("jax-jit", "vmap"): "jax.jit(jax.vmap)",
    ("jax-jit", "loop"): "jax.jit(loop)", ("jax-jit", "batched"): "jax.jit(batched)",
}


def parse_batches(text: str) -> list[int]:
    from stackwars.parse import positive_ints

    return positive_ints(text, "--batch", "batch sizes")


def plan(ops: Sequence[str], impls: Sequence[str] | None, batches: Sequence[int], backends: Sequence[str],
         preset: str, device: str, dtype: str) -> list[CellSpec]:
    from stackwars import runner
    from stackwars.parse import one_of

    one_of(ops, OPS, "op")
    for b in backends:
        if b not in BACKENDS:
            raise SpecError(f"the vmap study compares {', '.join(BACKENDS)}; got {b!r}")
    one_of(impls or (), IMPLS, "impl")
    specs = []
    for op in ops:
        for impl in impls or IMPLS:
            for batch in batches:
                specs += runner.plan_cells([OPS[op]], [preset], ["forward"], list(backends), [device], [dtype],
                                           {"impl": impl, "batch": batch})
    return specs


def s5_calls(call_s: float, calls: int = S5_CALLS, window_s: float = S5_WINDOW_S,
             least: int = S5_MIN_CALLS) -> int:
    """The calls of S5's window for a call of ``call_s`` (synchronised, warm): S5's ``calls``,
    or, where they would take more than ``window_s``, as many as fill it and at least ``least``
    (never more than ``calls``)."""
    if call_s * calls <= window_s:
        return calls
    return min(calls, max(least, math.ceil(window_s / call_s)))


def s5_method(spec: Mapping[str, Any], config: Mapping[str, Any], calls: int = S5_CALLS,
              window_s: float = S5_WINDOW_S) -> dict[str, Any]:
    """Worker target: the cell's callable measured as S5 did. The first call (compile) is
    excluded, and a second one, synchronised, sizes the window (``s5_calls``); then that many
    calls between two reads of perf_counter with no synchronisation, and the RSS read after
    each call; the last output is synchronised only after the clock was read, to say how long
    the work really took."""
    import psutil

    from stackwars.harness.measure import prepare_cell

    pc = prepare_cell(spec, config)
    call, sync = pc.prepared.call, pc.prepared.sync
    sync([call()])  # warm: S5 excluded JAX's compilation
    t = time.perf_counter()
    sync([call()])
    calls = s5_calls(time.perf_counter() - t, calls, window_s)
    proc = psutil.Process()
    rss0 = peak = proc.memory_info().rss
    out = None
    t0 = time.perf_counter()
    for _ in range(calls):
        out = call()
        peak = max(peak, proc.memory_info().rss)
    t1 = time.perf_counter()  # S5 read the clock here, with work possibly still queued
    sync([out])
    t2 = time.perf_counter()
    return {"status": "ok", "calls": calls, "s5_per_call_s": (t1 - t0) / calls,
            "until_done_per_call_s": (t2 - t0) / calls, "s5_memory_bytes": peak - rss0}


def row(m: Measurement, s5: Mapping[str, Any] | None) -> dict[str, Any]:
    r = m.to_row()
    over = dict(m.spec.overrides)
    mem = m.memory
    ours_mem = None
    if mem is not None:
        if mem.peak_device_bytes is not None:
            ours_mem = mem.peak_device_bytes
        elif mem.peak_rss_steady_bytes is not None and mem.baseline_rss_bytes is not None:
            ours_mem = max(0, mem.peak_rss_steady_bytes - mem.baseline_rss_bytes)
    s5 = s5 or {}
    ours = r["steady_median_s"]
    return {"op": "dot" if m.spec.workload == "vmap-dot" else "attention", "impl": over.get("impl"),
            "backend": m.spec.backend, "label": LABELS.get((m.spec.backend, over.get("impl")), m.spec.backend),
            "batch": int(over.get("batch", 0)), "status": m.status, "first_call_s": r["first_call_s"],
            "steady_median_s": ours, "steady_iqr_s": r["steady_iqr_s"], "samples": r["steady_n"],
            "calls_per_sample": r["calls_per_sample"], "memory_bytes": ours_mem,
            "memory_counter": r["peak_memory_counter"], "parity": r["parity_max_rel_err"],
            "s5_per_call_s": s5.get("s5_per_call_s"), "s5_until_done_per_call_s": s5.get("until_done_per_call_s"),
            "s5_memory_bytes": s5.get("s5_memory_bytes"), "s5_status": s5.get("status"), "s5_calls": s5.get("calls"),
            "s5_vs_ours": (s5["s5_per_call_s"] / ours) if s5.get("s5_per_call_s") and ours else None,
            "contended": r["contended"], "error": (m.error or "").splitlines()[0][:200] if m.error else None}


def run(specs: Sequence[CellSpec], measure: Callable[[CellSpec], Measurement],
        naive: Callable[[CellSpec], Mapping[str, Any]],
        on_row: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    rows = []
    for spec in specs:
        m = measure(spec)
        s5 = naive(spec) if m.status == "ok" else None
        r = row(m, s5)
        rows.append(r)
        if on_row:
            on_row(r)
    return rows


def findings(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    from stackwars.report import format as fmt

    notes = []
    # a time measured on a busy machine is no basis for a ranking or a ratio
    ok = [r for r in rows if r["status"] == "ok" and r["steady_median_s"] and not r.get("contended")]
    by: OrderedDict[tuple, dict[tuple, Mapping[str, Any]]] = OrderedDict()
    for r in ok:
        by.setdefault((r["op"], r["batch"]), {})[(r["backend"], r["impl"])] = r
    for (op, batch), cells in by.items():
        best = min(cells.values(), key=lambda r: r["steady_median_s"])
        notes.append(f"{op}, batch {batch}: fastest {best['label']} ({fmt.seconds(best['steady_median_s'])} per call)")
        pairs = ((("torch-eager", "loop"), ("torch-eager", "vmap"), "the PyTorch Python loop", "torch.func.vmap"),
                 (("jax-eager", "loop"), ("jax-jit", "vmap"), "the JAX Python loop", "jax.jit(jax.vmap)"),
                 (("jax-eager", "vmap"), ("jax-jit", "vmap"), "jax.vmap without jit", "jax.jit(jax.vmap)"),
                 (("torch-eager", "vmap"), ("torch-eager", "batched"), "torch.func.vmap", "the batched op"))
        for slow, fast, slow_name, fast_name in pairs:
            a, b = cells.get(slow), cells.get(fast)
            if a and b and batch > 1:
                notes.append(f"{op}, batch {batch}: {slow_name} takes {a['steady_median_s'] / b['steady_median_s']:.1f}x "
                             f"the time of {fast_name}")
    misled = [r for r in ok if r.get("s5_vs_ours") is not None and (r["s5_vs_ours"] < 0.5 or r["s5_vs_ours"] > 2)]
    for r in misled:
        head = (f"{r['op']}, batch {r['batch']}, {r['label']}: S5's method reads {fmt.seconds(r['s5_per_call_s'])} "
                f"per call against the harness's {fmt.seconds(r['steady_median_s'])} ({r['s5_vs_ours']:.2f}x)")
        done = r.get("s5_until_done_per_call_s")
        if done and done > 1.2 * r["s5_per_call_s"]:
            # the clock was read while work was still queued: it timed the dispatch
            notes.append(f"{head}: its unsynchronised clock read the dispatch, the work took {fmt.seconds(done)} "
                         f"per call once waited for")
        elif r["s5_vs_ours"] > 1 and r["s5_per_call_s"] - r["steady_median_s"] <= RSS_READ_S:
            # waiting changed nothing: the gap is the method's own per-call cost
            notes.append(f"{head}: waiting for the work changed nothing ({fmt.seconds(done)} per call), so the gap "
                         f"is the method's own cost, the RSS read after every call inside its timed loop")
        elif r["s5_vs_ours"] > 1:
            window = r.get("s5_calls") or S5_CALLS
            notes.append(f"{head}: more than its RSS reads cost; one unrepeated window of {window} calls has no "
                         f"defence against a noisy moment")
        else:
            notes.append(head)
    return notes
