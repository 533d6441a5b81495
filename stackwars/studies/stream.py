"""Dynamic shapes over a realistic stream: requests of varying sequence length through a
compiled forward pass, under each framework's shape policies.

    stackwars study stream mha --preset small --requests 40 --dist lognormal:median=64,sigma=1.2

The lengths are drawn once from a seeded long-tailed distribution, clipped to
[min, max]; every policy serves the same requests with the same inputs (request i draws
its input from seed + i; the weights are shared). Policies:

* ``eager`` (torch-eager, jax-eager): no compiler, the baseline a compile must beat;
* ``exact`` (jax.jit; torch.compile(dynamic=False)): one compile per new length;
* ``buckets`` (both): inputs zero-padded to the next power of two and the output cut back,
  one compile per bucket, exact where the workload says padding is (causal attention: the
  padded positions come after every real one);
* ``automatic`` (torch.compile's default: static first, dynamic after a shape changes),
  ``dynamic`` (dynamic=True), ``mark_dynamic`` (the sequence axis marked on every input).

Per request: the synchronised wall time (a compile included when one happened), whether it
compiled (the frameworks' own events), the FLOPs done against the FLOPs needed (padding is
waste), and the output's parity with the float64 reference of the unpadded request (shared
by all policies through the run's reference cache). Per policy: total time, compiles,
wasted FLOPs, and the request after which its cumulative time stays below the eager
baseline's (when compiling has paid for itself).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any, Mapping, Sequence

import numpy as np

from stackwars import registry
from stackwars.errors import SpecError
from stackwars.workloads.base import param_dtype, round_all

POLICIES = {"torch-eager": ("eager",), "torch-compile": ("exact", "automatic", "dynamic", "mark_dynamic", "buckets"),
            "jax-eager": ("eager",), "jax-jit": ("exact", "buckets")}
WORKLOADS = ("mha", "gpt2")


def draw_lengths(count: int, low: int, high: int, dist: str, seed: int) -> list[int]:
    """``dist``: 'lognormal:median=M,sigma=S' (long-tailed) or 'uniform'."""
    if count < 1 or not 1 <= low <= high:
        raise SpecError(f"need requests >= 1 and 1 <= min <= max, got {count}, {low}, {high}")
    rng = np.random.default_rng(seed)
    name, _, params = dist.partition(":")
    if name == "uniform":
        values = rng.integers(low, high + 1, count)
    elif name == "lognormal":
        kv = dict(p.split("=", 1) for p in params.split(",") if "=" in p)
        try:
            median, sigma = float(kv.get("median", 64)), float(kv.get("sigma", 1.0))
        except ValueError:
            raise SpecError(f"--dist {dist!r}: median and sigma must be numbers") from None
        if not (median > 0 and sigma > 0):
            raise SpecError(f"--dist {dist!r}: median and sigma must be positive")
        values = np.exp(rng.normal(math.log(median), sigma, count))
    else:
        raise SpecError(f"unknown --dist {dist!r}; allowed: lognormal:median=M,sigma=S, uniform")
    return [int(v) for v in np.clip(np.rint(values), low, high)]


def bucket(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(n)))


def plan(workload: str, preset: str, backends: Sequence[str], policies: Sequence[str] | None,
         high: int) -> list[dict[str, Any]]:
    if workload not in WORKLOADS:
        raise SpecError(f"the stream study serves {', '.join(WORKLOADS)}; got {workload!r}")
    wl = registry.workload(workload)
    base = wl.config(preset)
    limit = getattr(base, "max_pos", None)
    if limit and bucket(high) > limit:
        raise SpecError(f"--max-seq {high}: its bucket {bucket(high)} exceeds {workload}'s position table "
                        f"({limit}); use --max-seq {limit} or less")
    wl.config(preset, {"seq": high})  # a valid size
    from stackwars.parse import one_of
    offered = [p for b in backends if b in POLICIES for p in POLICIES[b]]
    one_of(policies or (), list(dict.fromkeys(offered)) or [p for ps in POLICIES.values() for p in ps],
           f"policy (for {', '.join(backends)})")
    items = []
    for b in backends:
        if b not in POLICIES:
            raise SpecError(f"the stream study runs {', '.join(POLICIES)}; got {b!r}")
        for p in POLICIES[b]:
            if policies and p not in policies:
                continue
            items.append({"workload": workload, "preset": preset, "backend": b, "policy": p,
                          "exact": p != "buckets" or wl.pad_exact(base, "seq", "forward")})
    if not items:
        raise SpecError("no policy of the chosen backends was selected")
    return items


def _request(wl, base, seq: int, seed: int, i: int, dtype: str):
    cfg = replace(base, seq=seq)
    _, batch = wl.init(cfg, seed + i) if not hasattr(wl, "init_batch") else (None, wl.init_batch(cfg, seed + i))
    return cfg, round_all(batch, dtype)


def _pad(batch: Mapping[str, np.ndarray], axes: Mapping[str, list[int]], target: int) -> dict[str, np.ndarray]:
    out = {}
    for name, a in batch.items():
        pad = [(0, 0)] * a.ndim
        for ax in axes.get(name, []):
            pad[ax] = (0, target - a.shape[ax])
        out[name] = np.pad(a, pad)
    return out


def run_policy(item: Mapping[str, Any], lengths: Sequence[int], seed: int = 0, dtype: str = "float32",
               device: str = "cpu", reference_dir: str | None = None, cache_dir: str | None = None) -> dict[str, Any]:
    """Worker target: one backend x policy serving every request."""
    from stackwars.harness import reference as refmod

    wl = registry.workload(item["workload"])
    base = wl.config(item["preset"])
    settings = {"matmul_precision": "float32", "cache_dir": cache_dir}
    params, _ = wl.init(replace(base, seq=max(lengths)), seed)
    params = round_all(params, param_dtype(dtype, "forward"))
    axes = wl.varying_axes(base, "seq")
    serve = (_jax_server if item["backend"].startswith("jax") else _torch_server)(
        wl, base, item, params, settings, device, dtype)
    cache = refmod.ReferenceCache(reference_dir)
    tol = wl.tolerance(dtype, "float32", "forward")
    rows = []
    for i, seq in enumerate(lengths):
        cfg, batch = _request(wl, base, seq, seed, i, dtype)
        padded_to = bucket(seq) if item["policy"] == "buckets" else None
        feed = _pad(batch, axes, padded_to) if padded_to else batch
        t0 = time.perf_counter()
        out, compiles = serve(feed, seq)
        call_s = time.perf_counter() - t0
        key = refmod.key(wl, cfg, "forward", seed + i, dtype, param_dtype(dtype, "forward"))
        parity, _ = refmod.reference_parity(wl, cfg, "forward", params, batch, {"out": out}, tol, cache, key,
                                            device, dtype, "reference", item["backend"], item["backend"])
        done_cfg = replace(base, seq=padded_to) if padded_to else cfg
        rows.append({"request": i, "seq": seq, "padded_to": padded_to, "call_s": call_s, "compiled": compiles > 0,
                     "compiles_in_call": compiles, "flops_needed": wl.flops(cfg, "forward"),
                     "flops_done": wl.flops(done_cfg, "forward"), "parity": parity.max_rel_err,
                     "parity_ok": parity.ok})
    total = 0
    for r in rows:
        total += r["compiles_in_call"]
        r["compile_count"] = total
        r.update(backend=item["backend"], policy=item["policy"], exact=item["exact"],
                 recompile_limit=getattr(serve, "recompile_limit", None))
    return {"status": "ok", "rows": rows}


def _jax_server(wl, base, item, params, settings, device, dtype):
    import jax

    from stackwars.backends.jax_common import COMPILE_EVENT, build_twin, to_device_array

    backend = registry.backend(item["backend"]).load()
    backend.configure(settings)
    events = backend.events
    twin = wl.twin("jax")
    dev = jax.devices("gpu" if device == "cuda" else "cpu")[0]
    from stackwars.workloads import attention
    cfg, _ = attention.resolve(wl, base, "jax", device, dtype, getattr(dev, "compute_capability", None))
    static, tree = build_twin(twin, cfg, params, lambda v: to_device_array(v, param_dtype(dtype, "forward"), dev))

    def fn(tree, batch):
        return twin.forward(static, tree, batch)

    step = jax.jit(fn) if item["policy"] != "eager" else fn
    axes = wl.varying_axes(base, "seq")
    first_axis = next(iter(axes.values()), [1])[0]

    def serve(batch, seq):
        n0 = sum(1 for e, _ in events.events if e == COMPILE_EVENT)
        out = step(tree, {k: to_device_array(v, dtype, dev) for k, v in batch.items()})
        out = jax.block_until_ready(out)
        host = np.asarray(jax.device_get(out), dtype=np.float64)
        host = np.take(host, np.arange(seq), axis=first_axis)  # padded positions cut off
        n1 = sum(1 for e, _ in events.events if e == COMPILE_EVENT)
        return host, (n1 - n0) if item["policy"] != "eager" else 0

    return serve


def _torch_server(wl, base, item, params, settings, device, dtype):
    import torch
    import torch._dynamo.utils as dynamo_utils

    from stackwars.backends.torch_common import configure_torch, to_tensor

    configure_torch(settings)
    torch._dynamo.reset()
    dynamo_utils.clear_compilation_metrics()
    twin = wl.twin("torch")
    dev = torch.device(device)
    model = twin.build(base, {k: to_tensor(v, param_dtype(dtype, "forward"), dev) for k, v in params.items()})
    model.eval()
    policy = item["policy"]
    dynamic = {"exact": False, "automatic": None, "dynamic": True, "mark_dynamic": None, "buckets": False}.get(policy)
    fn = twin.forward if policy == "eager" else torch.compile(twin.forward, dynamic=dynamic)
    axes = wl.varying_axes(base, "seq")
    first_axis = next(iter(axes.values()), [1])[0]

    def serve(batch, seq):
        tb = {k: to_tensor(v, dtype, dev) for k, v in batch.items()}
        if policy == "mark_dynamic":
            for name, ax in axes.items():
                for a in ax:
                    torch._dynamo.mark_dynamic(tb[name], a)
        n0 = len(dynamo_utils.get_compilation_metrics())
        with torch.inference_mode():
            out = fn(model, tb)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        host = out.detach().to("cpu", torch.float64).numpy()
        host = np.take(host, np.arange(seq), axis=first_axis)
        return host, len(dynamo_utils.get_compilation_metrics()) - n0

    # after this many recompiles of one frame Dynamo stops compiling it and runs new shapes eagerly
    serve.recompile_limit = getattr(torch._dynamo.config, "recompile_limit",
                                    getattr(torch._dynamo.config, "cache_size_limit", None))
    return serve


def summary(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per policy: totals, compiles, wasted FLOPs, parity, and where it beat the eager baseline."""
    by: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in rows:
        by.setdefault((r["backend"], r["policy"]), []).append(r)
    eager = {fw: by.get((f"{fw}-eager", "eager")) for fw in ("torch", "jax")}
    out = []
    for (backend, policy), rs in by.items():
        rs = sorted(rs, key=lambda r: r["request"])
        ok = [r for r in rs if r.get("call_s") is not None]
        total = sum(r["call_s"] for r in ok)
        needed = sum(r["flops_needed"] for r in ok)
        done = sum(r["flops_done"] for r in ok)
        base = eager.get(backend.split("-")[0])
        break_even = None
        if base and policy != "eager":
            mine = np.cumsum([r["call_s"] for r in ok])
            theirs = np.cumsum([r["call_s"] for r in sorted(base, key=lambda r: r["request"])])[:len(mine)]
            below = mine <= theirs
            for k in range(len(below)):
                if below[k:].all():
                    break_even = k
                    break
        # the shapes a static policy must compile for: each distinct length (exact) or bucket (buckets)
        shapes = len({r["padded_to"] or r["seq"] for r in rs}) if policy in ("exact", "buckets") else None
        compiles = rs[-1].get("compile_count") if rs else None
        out.append({"backend": backend, "policy": policy, "requests": len(ok), "total_s": total,
                    "shapes": shapes, "uncompiled_shapes": max(0, shapes - compiles) if shapes and compiles is not None
                    else None, "recompile_limit": rs[0].get("recompile_limit") if rs else None,
                    "compiles": compiles,
                    "compile_requests_s": sum(r["call_s"] for r in ok if r["compiled"]),
                    "wasted_flops_fraction": (done - needed) / done if done else None,
                    "parity_worst": max((r["parity"] for r in ok if r["parity"] is not None), default=None),
                    "parity_all_ok": all(r.get("parity_ok") for r in ok),
                    "break_even_request": break_even, "exact": rs[0].get("exact", True) if rs else None,
                    "status": rs[0].get("status", "ok") if rs else None})
    return out
