"""The published studies' claims (S1-S5, named in ``STUDIES``) beside what the stored runs
measured on the same question: each claim with our figures, a verdict and why.

A verdict is computed from the data in the report: ``holds here``, ``does not hold here``,
``impossible`` (a figure no correct measurement of that computation can give, shown by
arithmetic), or ``not measured in these runs`` (the runs hold nothing on that question;
`stackwars reproduce` runs what answers it). Machines differ (S3 ran on a TPU, S4 on an RTX
5060): a verdict is about the claim's substance, never a comparison of raw times across
machines.
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping, Sequence

from stackwars import stats
from stackwars.report import format as fmt
from stackwars.verdict import beside
from stackwars.verdict.figures import combined, variant

NOT_MEASURED = "not measured in these runs"
# the five write-ups the report answers: what each is, where it ran, what it asked (as published)
STUDIES = {
    "S1": ("Compilation and parallelisation strategies", "a proposal, GPU; no figures",
           "how jaxpr/XLA and Dynamo/Inductor trace, recompile, cache and handle control flow; vmap/pjit against "
           "DDP/FSDP; compile cost against speed-up; memory; IR inspection"),
    "S2": ("A framework overview", "slides; no figures",
           "eager against compiled modes, CUDA graphs, recompilation, memory management, CPU overhead, custom "
           "kernels (Triton, Pallas), distribution"),
    "S3": ("The same backend", "TPU v6e-1, PyTorch through torch_xla",
           "first, second and steady-state calls of GEMM, FFN, MHA and five models when both frameworks compile "
           "to StableHLO/XLA; memory"),
    "S4": ("An MNIST MLP", "GeForce RTX 5060 GPU",
           "epoch times and final accuracy of a 784-512-512-10 MLP trained by SGD in both frameworks"),
    "S5": ("vmap", "a blog post, CPU",
           "per-example dot products and attention as a loop, with vmap and jit(vmap), timed over 1000 calls"),
}
OTHER_DEVICE = {"S3": "a TPU v6e-1", "S4": "a GeForce RTX 5060"}  # studies whose figures come from another device


def study_label(sid: str) -> str:
    """"S3 (The same backend; TPU v6e-1, PyTorch through torch_xla)": what a claim's row names."""
    title, where, _ = STUDIES[sid]
    return f"{sid} ({title}; {where})"
MLP_LAYERS = (784, 512, 512, 10)
S4_TRAIN = 50_000  # S4's training split
S4_STEADY_EPOCH_S = {("JAX", 64): 0.0026, ("PyTorch", 64): 0.0012, ("JAX", 256): 0.0029, ("PyTorch", 256): 0.0012,
                     ("JAX", 1024): 0.0087, ("PyTorch", 1024): 0.0020}
S4_VAL_ACC = {("JAX", 64): 0.1529, ("PyTorch", 64): 0.0671, ("JAX", 256): 0.1557, ("PyTorch", 256): 0.1401,
              ("JAX", 1024): 0.1551, ("PyTorch", 1024): 0.0995}  # S4's final validation accuracies
S4_ACCURACY = (min(S4_VAL_ACC.values()), max(S4_VAL_ACC.values()))  # their range
RTX_5060_FP32_FLOPS = 19.2e12  # NVIDIA's published FP32 peak for the GeForce RTX 5060


# S3's table (TPU v6e-1): workload -> (JAX, PyTorch/torch_xla) as (first, second, steady) in ms, or None for OOM
S3_TABLE = {
    "gemm": ((41.243, 0.451, 0.192), (0.198, 0.086, 0.055)),
    "ffn": ((1081.837, 0.474, 0.225), (256.368, 2.729, 0.347)),
    "mha": ((1118.373, 0.619, 0.363), (987.797, 15.758, 0.946)),
    "resnet50": ((7328.458, 1.442, 0.931), (7659.820, 7271.575, 10.562)),
    "bert-base": ((9103.082, 1.351, 0.913), (4098.641, 3774.402, 21.723)),
    "gpt2": ((2128.444, 1.061, 0.708), (3545.754, 3256.955, 27.896)),
    "vit-b16": ((36453.13, 2.313, 1.836), None),
    "gpt-neo-1.3b": ((8011.992, 4.596, 4.883), None),
    "llama3-8b": (None, None),
}


def _second_over_steady(side: int) -> tuple[float, float, str]:
    """The range of S3's second call over its steady state for one side (0 JAX, 1 PyTorch), and the
    workload where it is largest."""
    ratios = {wl: t[side][1] / t[side][2] for wl, t in S3_TABLE.items() if t[side] is not None}
    return min(ratios.values()), max(ratios.values()), max(ratios, key=ratios.get)


def _s3_second() -> str:
    (j_low, j_high, _), (t_low, t_high, worst) = _second_over_steady(0), _second_over_steady(1)
    second, steady = S3_TABLE[worst][1][1:]
    return (f"second call over steady state: JAX {j_low:.1f}-{j_high:.1f}x, PyTorch/XLA {t_low:.1f}-{t_high:.0f}x "
            f"({worst} {second:g} ms against {steady:g} ms)")


S3_SECOND = _s3_second()
S3_MEMORY = "PyTorch/XLA out of memory on " + " and ".join(
    wl for wl, (j, t) in S3_TABLE.items() if t is None and j is not None) + ", where JAX ran (TPU v6e-1, 32 GB HBM)"
S5_FIGURE = "no numbers in its text (plots only)"


def _no_figure(r: Mapping[str, Any] | None) -> str | None:
    """Why a cell of ours gives no figure to set beside S3's (not measured, its status, no clean
    process), or None where it gives one: the one rule of S3's table and of its speed rows."""
    if r is None:
        return "not measured"
    if r["status"] != "ok":
        return r["status"]
    if r.get("busy") or not r.get("steady_median_s"):
        return "measured only while the machine was busy"
    return None


def s3_table(cells: Sequence[Mapping[str, Any]]) -> list[tuple[str, ...]]:
    """S3's rows beside ours: the same workload's jax-jit and torch-mlir-xla forward cells (the
    same-compiler pair S3 compared), first / second / steady, or what happened instead."""
    def fmt3(t):
        return "OOM" if t is None else " / ".join(f"{v:g}" for v in t)

    def ours(r):
        return _no_figure(r) or " / ".join(fmt.DASH if r.get(k) is None else f"{1e3 * r[k]:.3g}"
                                           for k in ("first_call_s", "second_call_s", "steady_median_s"))

    cells = combined(cells)
    machines = list(dict.fromkeys(r.get("machine") for r in cells)) or [None]
    by = {(r.get("machine"), r["workload"], r["backend"]): r for r in cells if r.get("phase") == "forward"}
    out = []
    for machine, (wl, (jx, pt)) in ((m, item) for m in machines for item in S3_TABLE.items()):
        j, t = by.get((machine, wl, "jax-jit")), by.get((machine, wl, "torch-mlir-xla"))
        where = next((", ".join([r["preset"], *(f"{k}={v}" for k, v in sorted((r.get("overrides") or {}).items())),
                                 r["device"], r["dtype"]]) for r in (j, t) if r), "")
        if len(machines) > 1 and machine:
            where += f" on {machine}"
        out.append((wl, fmt3(jx), fmt3(pt), ours(j), ours(t), where))
    return out


def _claim(study: str, claim: str, ours: str, verdict: str, why: str, figure: str = "") -> dict[str, str]:
    """One published question or claim: ``figure`` is what the study gave (empty: it published none
    on this question), ``ours`` what these runs measured, ``verdict`` and ``why`` what follows."""
    return {"study": study, "study_name": study_label(study), "claim": claim, "figure": figure, "ours": ours,
            "verdict": verdict, "why": why}


NO_FIGURE = "none published"
S3_SPEED = "same backend (both lower to StableHLO/XLA): which framework is faster in the steady state"


def s3_figure(workload: str) -> str:
    """S3's steady states for a workload, ms, and their ratio (JAX / PyTorch, as our verdict reads)."""
    jx, pt = S3_TABLE[workload]
    if jx is None or pt is None:
        ran = [f"{name} {t[2]:g} ms" for name, t in (("JAX", jx), ("PyTorch/XLA", pt)) if t]
        oom = [name for name, t in (("JAX", jx), ("PyTorch/XLA", pt)) if t is None]
        return ", ".join(ran + [f"{' and '.join(oom)} out of memory (32 GB HBM)"])
    return f"JAX {jx[2]:g} ms, PyTorch/XLA {pt[2]:g} ms: JAX/PyTorch {jx[2] / pt[2]:.2f}"


S3_HBM_BYTES = 32e9  # S3's TPU v6e-1: 32 GB of HBM


def s3_memory(workload: str) -> str:
    """For a model S3 ran out of memory on, what the cells' own estimate says it needs at S3's size
    (``paper``) on one accelerator (runner/planning.py: the running program; the host's copy apart), in
    float32 and in bfloat16 (S3 did not say which it loaded), against S3's HBM: a figure of ours that
    needs no run, for a question the runs here could not answer at that size."""
    from stackwars import registry
    from stackwars.runner.planning import GiB, memory_need

    wl = registry.workload(workload)
    cfg = wl.config("paper", {})
    parts = []
    for dtype in ("float32", "bfloat16"):
        est = wl.memory_estimate(cfg, "forward", dtype)
        need, _ = memory_need(est, "cuda")
        parts.append(f"{need / GiB:.1f} GiB in {dtype} (weights {est['parameters'] / GiB:.1f}): "
                     + ("over" if need > S3_HBM_BYTES else "under") + f" S3's {S3_HBM_BYTES / GiB:.1f} GiB")
    return f"by the cells' own estimate at S3's size, forward: {'; '.join(parts)}"


def s3_speed(cells: Sequence[Mapping[str, Any]], verdicts: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """S3's speed question, a row per workload of its table and per table of ours that measured it
    (forward): S3's steady states beside ours, the same pair of backends (jax-jit, torch-mlir-xla),
    and the verdict of that table (each framework's best mode against the other's, on fresh
    processes) with its interval, or why it cannot say."""
    from stackwars.report import verdict as view

    steady = {}
    for r in combined(cells):
        if r.get("phase") == "forward" and not variant(r)[1]:
            steady[(r.get("machine"), r["workload"], r["preset"], r["device"], r["dtype"], r["backend"])] = r

    def ours(b: str, r: Mapping[str, Any] | None) -> str:
        return f"{b} {_no_figure(r) or fmt.seconds(r['steady_median_s'])}"

    out = []
    for wl in S3_TABLE:
        rows = [v for v in verdicts if v["workload"] == wl and v["phase"] == "forward"]
        if not rows:
            oom = S3_TABLE[wl] == (None, None)  # both sides out of memory: the size is the question
            out.append(_claim("S3", f"{wl}: {S3_SPEED}", s3_memory(wl) if oom else "", NOT_MEASURED,
                              f"run `stackwars run {wl} --phase forward`" + (
                                  " where it fits (`stackwars reproduce` plans it on a GPU)" if oom else
                                  " (`stackwars reproduce` plans it)"), s3_figure(wl)))
            continue
        for v in rows:
            key = (v.get("machine"), wl, v["preset"], v["device"], v["dtype"])
            pair = [(b, steady.get((*key, b))) for b in ("jax-jit", "torch-mlir-xla")]
            text_ours = ", ".join(ours(b, r) for b, r in pair)
            if not any(_no_figure(r) for _, r in pair):
                text_ours += f": JAX/PyTorch {pair[0][1]['steady_median_s'] / pair[1][1]['steady_median_s']:.2f}"
            text = view.cells(v)
            at = ", ".join([v["preset"], *([v["overrides"]] if v.get("overrides") else []), v["device"], v["dtype"]])
            if v.get("ratio") is not None:
                verdict = f"{text[4]}: JAX/PyTorch {text[3]}"
                why = f"each side's best, {text[1]} against {text[2]}, at {at}"
            else:
                verdict = text[4]
                why = f"{v.get('reason') or 'no ratio'} (at {at})"
            out.append(_claim("S3", f"{wl}: {S3_SPEED}", f"steady state (median), {text_ours}", verdict, why,
                              s3_figure(wl)))
    return out


def answers(cells: Sequence[Mapping[str, Any]], studies: Mapping[str, tuple[Any, list]],
            profiles: Sequence[Mapping[str, Any]] = (), anatomy: Sequence[Mapping[str, Any]] = (),
            verdicts: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, str]]:
    """Every published question these runs answer: S3's speed question per workload (with the
    verdict's interval), then each claim (``claims``), each with the figure the study gave."""
    return s3_speed(cells, verdicts) + claims(cells, studies, profiles, anatomy)


def mlp_epoch_flops(samples: int = S4_TRAIN, layers: Sequence[int] = MLP_LAYERS) -> int:
    """Forward + backward of the MLP over an epoch: 3 x 2 multiply-adds per weight and sample."""
    weights = sum(a * b for a, b in zip(layers[:-1], layers[1:]))
    return 6 * weights * samples


def _s4_figure(table: Mapping[tuple[str, int], float], form: str) -> str:
    """S4's figures for JAX and PyTorch at its three batch sizes: 'JAX 0.0026 / 0.0029 / 0.0087 s, ...'."""
    batches = sorted({b for _, b in table})
    return "; ".join(f"{fw} " + " / ".join(form.format(table[(fw, b)]) for b in batches) for fw in ("JAX", "PyTorch")) \
        + f" (batch {' / '.join(map(str, batches))})"


def s4(train_rows: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    flops = mlp_epoch_flops()
    fastest = min(S4_STEADY_EPOCH_S.values())
    ok = [r for r in train_rows if r.get("status") == "ok" and r.get("epoch")]
    steady = [r for r in ok if r["epoch"] > 1]
    measured = []
    for (backend, batch) in sorted({(r["backend"], r["batch_size"]) for r in steady}):
        ts = [r["epoch_s"] for r in steady if (r["backend"], r["batch_size"]) == (backend, batch)]
        measured.append(f"{backend} batch {batch}: {fmt.seconds(statistics.median(ts))}")
    ours = (f"one epoch is {fmt.quantity(flops, 'FLOP')} of matmuls; 0.0012 s would need "
            f"{fmt.rate(flops / fastest, 'FLOP')}, {flops / fastest / RTX_5060_FP32_FLOPS:.1f}x the card's float32 "
            f"peak ({fmt.rate(RTX_5060_FP32_FLOPS, 'FLOP')})")
    if measured:
        ours += "; synchronised steady epochs here: " + "; ".join(measured)
    out = [_claim("S4", "steady epochs of 0.0012-0.0087 s for the 784-512-512-10 MLP on 50k images (RTX 5060)",
                  ours, "impossible", "an unsynchronised clock (JAX and CUDA return before the work is done) or "
                                      "an epoch that did not run over the data", _s4_figure(S4_STEADY_EPOCH_S, "{:g} s"))]
    last: dict[tuple, Mapping[str, Any]] = {}
    for r in ok:
        last[(r["backend"], r["batch_size"])] = r
    accs = [r["val_acc"] for r in last.values() if r.get("val_acc") is not None]
    if accs:
        text = "; ".join(f"{b} batch {bs}: validation {r['val_acc']:.1%} after {r['epoch']} epoch(s)"
                         + (f", test {r['test_acc']:.1%}" if r.get("test_acc") is not None else "")
                         for (b, bs), r in sorted(last.items()) if r.get("val_acc") is not None)
        gaps = []
        for bs in sorted({k[1] for k in last}):
            pair = [r["val_acc"] for (b, b2), r in last.items() if b2 == bs and r.get("val_acc") is not None
                    and (b.startswith("jax") or b.startswith("torch"))]
            if len({b.split("-")[0] for (b, b2) in last if b2 == bs}) == 2 and len(pair) >= 2:
                gaps.append(max(pair) - min(pair))
        verdict = "does not hold here" if min(accs) > 2 * S4_ACCURACY[1] else "holds here"
        why = (f"10% is chance for ten classes; trained correctly, every configuration here reaches "
               f"{min(accs):.1%} or more")
        if gaps:
            why += (f"; at the same batch size JAX and PyTorch end within {max(gaps):.2%} of each other (the same "
                    f"initial weights and batch order), so no accuracy is JAX's own")
        out.append(_claim("S4", "final validation accuracy 6.7-15.6%, JAX 'higher' (XLA numerics)", text, verdict,
                          why, _s4_figure(S4_VAL_ACC, "{:.2%}")))
    else:
        out.append(_claim("S4", "final validation accuracy 6.7-15.6%", "", NOT_MEASURED,
                          "run `stackwars train mnist` (S4's settings: SGD 0.01, batch 64/256/1024)",
                          _s4_figure(S4_VAL_ACC, "{:.2%}")))
    return out


def s3(cells: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Steady state after one run (JAX) vs two (PyTorch); memory efficiency."""
    by: dict[tuple, dict[str, Mapping[str, Any]]] = {}
    for r in combined(cells):  # one row per backend and table, each machine's apart
        # the frameworks' own implementations: a custom-kernel variant is another question (S2's)
        if r["status"] == "ok" and r.get("second_call_s") and r.get("steady_median_s") and not variant(r)[1]:
            by.setdefault((r["workload"], r["preset"], r["phase"], r["device"], r["dtype"], r.get("machine")),
                          {})[r["backend"]] = r
    warm = []
    for key, b in by.items():
        j = b.get("jax-jit")
        t = b.get("torch-mlir-xla") or b.get("torch-compile")
        if j and t:
            warm.append((key, j["second_call_s"] / j["steady_median_s"], t["backend"],
                         t["second_call_s"] / t["steady_median_s"]))
    out = []
    if warm:
        slow_torch = [w for w in warm if w[3] > 2]
        slow_jax = [w for w in warm if w[1] > 2]
        text = "; ".join(f"{k[0]} {k[2]}: jax-jit {a:.1f}x, {tb} {c:.1f}x" for k, a, tb, c in warm[:8])
        verdict = "holds here" if slow_torch and not slow_jax else "does not hold here"
        out.append(_claim("S3", "JAX reaches its steady state on the second call, PyTorch (torch_xla) on the third "
                                "(optimizer state created lazily)", "second call over steady state: " + text, verdict,
                          f"{len(slow_torch)} of {len(warm)} tables have a PyTorch second call over 2x its steady "
                          f"state, {len(slow_jax)} a JAX one", S3_SECOND))
    else:
        out.append(_claim("S3", "JAX reaches its steady state on the second call, PyTorch on the third", "",
                          NOT_MEASURED, "needs jax-jit and torch-mlir-xla (or torch-compile) cells of the same table",
                          S3_SECOND))
    # the verdict's memory figure (figures.added_memory over the clean processes): what the computation
    # added over the worker's baseline. A process's whole RSS is mostly what each framework takes to
    # load (0.25-0.6 GiB), which says nothing about a fused graph or buffer reuse.
    mem = []
    for key, b in by.items():
        j = b.get("jax-jit")
        torch_side = [r for n, r in b.items() if n.startswith("torch") and r.get("memory_added_bytes")]
        if j and j.get("memory_added_bytes") and torch_side:
            t = min(torch_side, key=lambda r: r["memory_added_bytes"])
            # a difference counts only where it clears the processes' spread at a size that matters
            d = beside.memory(t, j)  # the verdict's own rule: beyond both sides' spread, at a size that matters
            mem.append((key, j["memory_added_bytes"], t["backend"], t["memory_added_bytes"], d["memory_differs"]))
    if mem:
        lower = [m for m in mem if m[4] and m[1] < m[3]]
        higher = [m for m in mem if m[4] and m[1] > m[3]]
        text = "; ".join(f"{k[0]} {k[2]}: jax-jit +{fmt.nbytes(a)}, {tb} +{fmt.nbytes(c)}"
                         + ("" if differs else " (no difference here)") for k, a, tb, c, differs in mem[:8])
        verdict = ("no difference here" if not lower and not higher else
                   "holds here" if len(lower) == len(mem) else "does not hold here" if not lower else
                   f"holds in {len(lower)} of {len(mem)} tables")
        out.append(_claim("S3", "JAX is more memory-efficient (one fused graph, global buffer reuse)", text, verdict,
                          f"jax-jit added less memory than PyTorch's leanest backend in {len(lower)} of {len(mem)} "
                          f"tables and more in {len(higher)}, counting a difference only where the processes of the "
                          f"two sides do not overlap and it reaches {stats.MEMORY_MIN_BYTES >> 20} MiB and "
                          f"{stats.MEMORY_MIN_FRACTION:.0%} (in the other {len(mem) - len(lower) - len(higher)}: no "
                          f"difference here): the memory the computation added over the worker's baseline, the "
                          f"figure the verdict's memory ratio uses (device allocator on a GPU, RSS on a CPU), from "
                          f"processes measured on a quiet machine", S3_MEMORY))
    return out


def s5(vmap_rows: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    ratios = [r["s5_vs_ours"] for r in vmap_rows if r.get("status") == "ok" and r.get("s5_vs_ours")]
    if not ratios:
        return [_claim("S5", "1000 calls timed by perf_counter, memory by psutil", "", NOT_MEASURED,
                       "run `stackwars study vmap`", S5_FIGURE)]
    off = [x for x in ratios if x < 0.5 or x > 2]
    return [_claim("S5", "1000 calls timed by perf_counter with no synchronisation measure the per-call cost",
                   f"S5's method over the harness: median {statistics.median(ratios):.2f}x, range "
                   f"{min(ratios):.2f}-{max(ratios):.2f}x over {len(ratios)} cells",
                   "does not hold here" if off else "holds here",
                   f"{len(off)} of {len(ratios)} cells read more than 2x off (an unsynchronised clock reads JAX's "
                   f"dispatch; the RSS read inside the loop adds its own cost)", S5_FIGURE)]


def s2(scaling_rows: Sequence[Mapping[str, Any]], recompile_rows: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    out = []
    jax_fsdp = [r for r in scaling_rows if r.get("framework") == "jax" and r.get("status") == "ok"
                and r.get("devices", 1) > 1 and r.get("collectives")]
    if jax_fsdp:
        r = jax_fsdp[0]
        kinds = ", ".join(f"{k} x{v['count']}" for k, v in sorted(r["collectives"].items()))
        out.append(_claim("S2", "JAX: all sharding, communication and compute handled by the XLA compiler",
                          f"{r['strategy']} on {r['devices']} devices: the compiled program holds {kinds}, none "
                          f"written by hand", "holds here",
                          "the collectives are counted in XLA's optimized HLO; the program only annotated shardings"))
    else:
        out.append(_claim("S2", "JAX: all sharding, communication and compute handled by the XLA compiler", "",
                          NOT_MEASURED, "run `stackwars study scaling`"))
    calls = [r for r in recompile_rows if r.get("call_index") is not None]
    if calls:
        by: dict[tuple, list] = {}
        for r in calls:
            by.setdefault((r["backend"], r.get("variant")), []).append(r)
        text = "; ".join(f"{b} {v}: {max(x.get('compile_count') or 0 for x in rs)} compiles over {len(rs)} calls"
                         for (b, v), rs in by.items())
        recompiled = [r for r in calls if r.get("compiled") and r["call_index"] > 0]
        out.append(_claim("S2", "changing graphs triggers recompilation", text,
                          "holds here" if recompiled else "does not hold here",
                          "a new shape recompiles in both frameworks unless shapes are marked dynamic (torch) or "
                          "padded to buckets (JAX); see the recompile study"))
    return out


def s2_overhead(vmap_rows: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Per-call CPU overhead: at batch 1 a per-example dot product is microseconds of work, so
    its steady-state time is the cost of one call through each stack."""
    one = {(r["backend"], r["impl"]): r for r in vmap_rows if r.get("status") == "ok" and r.get("batch") == 1
           and r.get("op") == "dot" and r.get("steady_median_s") and not r.get("contended")}
    j, t = one.get(("jax-jit", "batched")) or one.get(("jax-jit", "vmap")), one.get(("torch-eager", "batched"))
    if not (j and t):
        return [_claim("S2", "JAX has low CPU overhead", "", NOT_MEASURED, "run `stackwars study vmap` (batch 1)")]
    verdict = "holds here" if j["steady_median_s"] < t["steady_median_s"] else "does not hold here"
    return [_claim("S2", "JAX has low CPU overhead", f"one call of a batch-1 dot product: {j['label']} "
                   f"{fmt.seconds(j['steady_median_s'])}, {t['label']} {fmt.seconds(t['steady_median_s'])}",
                   verdict, "at this size the call is almost all overhead: a compiled JAX call (argument "
                            "checks, dispatch to the XLA executable) against one PyTorch eager operator")]


def s2_memory(anatomy: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """"JAX has better memory management": the same train step's memory by part, XLA's plan for
    jax-jit against PyTorch's categorised peak (``--profile``), where both were measured."""
    claim = "JAX has better memory management"
    procs: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for a in anatomy:
        if a.get("error") or not a.get("sum_bytes") or a.get("not_measured"):
            continue
        # one row a table and backend, however many processes profiled it: the process of median memory
        table = a["cell"].split("#r")[0].replace(f"/{a['backend']}/", "/", 1)
        procs.setdefault(table, {}).setdefault(a["backend"], []).append(a)
    by = {k: {b: sorted(ps, key=lambda p: p["sum_bytes"])[(len(ps) - 1) // 2] for b, ps in v.items()}
          for k, v in procs.items()}
    pairs = [(k, v["jax-jit"], min((t for b, t in v.items() if b.startswith("torch-")), key=lambda t: t["sum_bytes"]))
             for k, v in by.items() if "jax-jit" in v and any(b.startswith("torch-") for b in v)]
    if not pairs:
        return [_claim("S2", claim, "", NOT_MEASURED, "run train steps of both frameworks with `--profile N`: the "
                                                       "memory anatomy compares them part by part")]
    smaller = [p for p in pairs if p[1]["sum_bytes"] < p[2]["sum_bytes"]]
    text = "; ".join(f"{k.split('/train-step/')[0]}: jax-jit {fmt.nbytes(j['sum_bytes'])} (XLA's plan) vs "
                     f"{t['backend']} {fmt.nbytes(t['sum_bytes'])} (at its peak)" for k, j, t in pairs)
    verdict = "holds here" if len(smaller) * 2 > len(pairs) else "does not hold here"
    return [_claim("S2", claim, text, verdict,
                   "with the same parameters and optimizer state, the difference is what a step holds besides them: "
                   "XLA's buffer assignment packs activations and gradients into its temporaries and need not hold "
                   "every gradient at once; PyTorch keeps a .grad per parameter (and both partial gradients of a tied "
                   "weight until they are summed)")]


S1_QUESTIONS = (  # S1 asks questions without figures: where these runs answer each
    ("tracing and graph construction (jaxpr/XLA vs Dynamo/Inductor)", "cells", "the compile split of every first "
     "call (trace / lower / compile; Dynamo / AOTAutograd / Inductor) and the IR sections"),
    ("recompilation triggers and caching", "study:recompile", "the recompile and cache studies"),
    ("dynamic shapes and control flow (scan vs loops under torch.compile)", "study:control-flow",
     "the control-flow and stream studies"),
    ("vmap/pmap/pjit vs DDP/FSDP, multi-device scaling", "study:scaling", "the scaling study"),
    ("compilation overhead vs execution speed-up", "cells", "the compile break-even table"),
    ("CPU<->GPU transfers and where the time goes", "profiles", "the profiles (busy time, gaps, copies)"),
)


def s1(cells: Sequence[Mapping[str, Any]], kinds: set[str], profiles: Sequence[Mapping[str, Any]]) -> list[dict]:
    out = []
    for question, needs, where in S1_QUESTIONS:
        have = bool(cells) if needs == "cells" else bool(profiles) if needs == "profiles" else needs in kinds
        out.append(_claim("S1", question, f"see {where}" if have else "", "answered here" if have else NOT_MEASURED,
                          "S1 is a proposal with questions and no figures: the report answers them with measurements"
                          if have else f"run what feeds {where} (`stackwars reproduce` plans it)"))
    return out


def claims(cells: Sequence[Mapping[str, Any]], studies: Mapping[str, tuple[Any, list]],
           profiles: Sequence[Mapping[str, Any]] = (), anatomy: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, str]]:
    rows_of: dict[str, list] = {}
    for info, rows in studies.values():
        rows_of.setdefault(info.kind, []).extend(rows)
    return (s1(cells, set(rows_of), profiles) + s3(cells) + s4(rows_of.get("train:mnist", []))
            + s5(rows_of.get("study:vmap", []))
            + s2(rows_of.get("study:scaling", []), rows_of.get("study:recompile", []))
            + s2_overhead(rows_of.get("study:vmap", [])) + s2_memory(anatomy))
