"""Recompilation study: call one compiled function with a sequence of inputs and see,
call by call, whether it compiled, how long the call took, and why it recompiled.

    stackwars study recompile mha --vary seq=16,32,48,64,96,128 -b jax-jit -b torch-compile

``--vary KEY=V1,V2,...``: KEY is a shape parameter of the workload (``seq``, ``batch``,
...), ``dtype`` (float32/bfloat16), or ``scale`` (a Python float argument multiplying
the forward output). Variants:

* jax-jit: ``as-is`` (jax.jit, one compile per new input signature) and ``buckets``
  (inputs zero-padded along the varied axes to the next power of two and the output
  sliced back: one compile per bucket; exact only where the workload says so).
* torch-compile: ``dynamic=None`` (automatic dynamic: static first, dynamic after a
  shape changes), ``dynamic=True``, ``dynamic=False``, ``mark_dynamic`` (the varied axes
  marked dynamic before each call).

Compiles are counted from the frameworks' own signals, not inferred from timings: JAX's
``/jax/core/compile/backend_compile_duration`` monitoring events (reasons from
``jax_explain_cache_misses``), Dynamo's per-compile ``CompilationMetrics`` (reasons:
its guard failures). Each backend x variant runs in its own worker with cold caches.
"""

from __future__ import annotations

import io
import logging
import math
import time
from dataclasses import replace
from typing import Any, Mapping, Sequence

import numpy as np

from stackwars import registry
from stackwars.errors import SpecError
from stackwars.records import DTYPES
from stackwars.workloads.base import param_dtype, round_all

VARIANTS = {"jax-jit": ("as-is", "buckets"),
            "torch-compile": ("dynamic=None", "dynamic=True", "dynamic=False", "mark_dynamic")}
SPECIAL_KEYS = ("dtype", "scale")
ROW_KEYS = ("backend", "variant", "call_index", "key", "value", "shape", "compiled", "call_s", "compile_count",
            "reason")


def parse_vary(text: str) -> tuple[str, list[Any]]:
    from stackwars.parse import comma_list

    key, sep, values = text.partition("=")
    if not sep or not values.strip():
        raise SpecError(f"--vary expects KEY=V1,V2,..., got {text!r}")
    if key == "dtype":
        return key, comma_list(values, "--vary dtype", _choice(DTYPES), f"dtypes ({', '.join(DTYPES)})",
                               repeats=True)
    if key == "scale":
        return key, comma_list(values, "--vary scale", float, "numbers", repeats=True)
    return key, comma_list(values, f"--vary {key}", _positive, "positive integers", repeats=True)


def _choice(allowed):
    def cast(v: str) -> str:
        if v not in allowed:
            raise ValueError(v)
        return v
    return cast


def _positive(v: str) -> int:
    n = int(v)
    if n < 1:
        raise ValueError(v)
    return n


def plan(workload: str, preset: str, phase: str, key: str, values: Sequence[Any], backends: Sequence[str],
         variants: Sequence[str] | None) -> list[dict[str, Any]]:
    wl = registry.workload(workload)
    wl.check_phase(phase)
    base = wl.config(preset)
    if key not in SPECIAL_KEYS and key not in wl.shape_params:
        raise SpecError(f"--vary {key}: {workload} can vary {', '.join(wl.shape_params + SPECIAL_KEYS)} "
                        f"(other parameters change the program itself, not only its input shapes)")
    if key == "scale" and phase != "forward":
        raise SpecError("--vary scale (a Python float argument) applies to the forward phase")
    if len(values) < 2:
        raise SpecError("--vary needs at least two values")
    if key not in SPECIAL_KEYS:
        for v in values:
            wl.config(preset, {key: v})  # each size must be valid
    items = []
    for b in backends:
        if b not in VARIANTS:
            raise SpecError(f"the recompile study covers {', '.join(VARIANTS)}; got {b!r}")
        for variant in variants or VARIANTS[b]:
            if variant not in VARIANTS[b]:
                continue
            if variant == "buckets" and key in SPECIAL_KEYS:
                continue  # buckets pad shapes; nothing to pad for a dtype or a scalar
            items.append({"workload": workload, "preset": preset, "phase": phase, "key": key,
                          "values": list(values), "backend": b, "variant": variant,
                          "exact": variant != "buckets" or wl.pad_exact(base, key, phase)})
    if not items:
        raise SpecError(f"no variant of {', '.join(backends)} applies to --vary {key}")
    return items


def _bucket(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(n)))


def _inputs(wl, base, phase: str, key: str, value: Any, dtype: str, seed: int):
    cfg = base if key in SPECIAL_KEYS else replace(base, **{key: value})
    cell_dtype = value if key == "dtype" else dtype
    params, batch = wl.init(cfg, seed)
    params = round_all(params, param_dtype(cell_dtype, phase))
    batch = round_all(batch, cell_dtype)
    return cfg, cell_dtype, params, batch


def _shape(batch: Mapping[str, Any]) -> str:
    name = next(iter(batch))
    return f"{name}{list(batch[name].shape)}"


class _LogCapture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.buf = io.StringIO()

    def emit(self, record: logging.LogRecord) -> None:
        self.buf.write(record.getMessage() + "\n")

    def take(self) -> str:
        text = self.buf.getvalue()
        self.buf = io.StringIO()
        return text


def _jax_reason(log: str) -> str | None:
    """JAX's explanation of the last tracing-cache miss (``jax_explain_cache_misses``),
    without source locations or the persistent-cache messages logged after it."""
    if "TRACING CACHE MISS" not in log:
        return None
    keep = []
    for line in log.split("TRACING CACHE MISS")[-1].splitlines()[1:]:
        line = line.strip()
        if line.startswith(("PERSISTENT", "Writing", "Not writing", "Persistent")):
            break
        if line.startswith("never seen function"):
            return "first compilation of this function"
        if line and not line.startswith(("for ", "all previously")):
            keep.append(line)
    return " ".join(keep)[:300] or None


def _run_jax(item: Mapping[str, Any], settings: Mapping[str, Any], device: str, dtype: str, seed: int):
    import jax

    from stackwars.backends.jax_common import COMPILE_EVENT

    wl = registry.workload(item["workload"])
    base = wl.config(item["preset"])
    backend = registry.backend("jax-jit").load()
    backend.configure(settings)
    events = backend.events
    jax.config.update("jax_explain_cache_misses", True)
    capture = _LogCapture()
    logging.getLogger("jax").addHandler(capture)
    key, phase = item["key"], item["phase"]
    jitted, rows, main = None, [], None
    for i, value in enumerate(item["values"]):
        cfg, cdtype, params, batch = _inputs(wl, base, phase, key, value, dtype, seed)
        padded_to = None
        if item["variant"] == "buckets":
            axes = wl.varying_axes(cfg, key)
            target = _bucket(getattr(cfg, key))
            padded_to = target
            for name, ax in axes.items():
                pad = [(0, 0)] * batch[name].ndim
                for a in ax:
                    pad[a] = (0, target - batch[name].shape[a])
                batch[name] = np.pad(batch[name], pad)
        prog = backend.program(wl, cfg, phase, params, batch, device, cdtype)
        if jitted is None:
            if key == "scale":
                def fn(tree, b, s, _f=prog.fn):
                    return _f(tree, b) * s
            else:
                fn = prog.fn
            jitted = jax.jit(fn, donate_argnums=prog.donate)
        args = prog.args + ((float(value),) if key == "scale" else ())
        n0 = len(events.events)
        capture.take()
        t0 = time.perf_counter()
        out = jitted(*args)
        if padded_to is not None and phase == "forward":  # slice back to the requested size
            axes = wl.varying_axes(cfg, key).get(next(iter(batch)), [])
            out = out[tuple(slice(0, getattr(cfg, key)) if a in axes else slice(None) for a in range(out.ndim))]
        jax.block_until_ready(out)
        call_s = time.perf_counter() - t0
        names = [name for (e, _), name in zip(events.events[n0:], events.names[n0:]) if e == COMPILE_EVENT]
        main = main or (names[0] if names else None)  # the studied function: the first thing compiled
        compiles = sum(1 for n in names if n == main)
        rows.append({"value": value, "shape": _shape(batch), "padded_to": padded_to, "compiled": compiles > 0,
                     "call_s": call_s, "compiles_in_call": compiles,
                     # e.g. the eager slice that cuts a padded output back: compiled too, but not the function
                     "helper_compiles": len(names) - compiles,
                     "reason": _jax_reason(capture.take()) if compiles else None})
    logging.getLogger("jax").removeHandler(capture)
    total = 0
    for r in rows:
        total += r["compiles_in_call"]
        r["compile_count"] = total
    return rows


def _run_torch(item: Mapping[str, Any], settings: Mapping[str, Any], device: str, dtype: str, seed: int):
    import torch
    import torch._dynamo.utils as dynamo_utils

    from stackwars.backends.torch_common import configure_torch, make_optimizer, to_tensor

    configure_torch(settings)
    torch._dynamo.reset()
    dynamo_utils.clear_compilation_metrics()
    wl = registry.workload(item["workload"])
    base = wl.config(item["preset"])
    twin = wl.twin("torch")
    key, phase, variant = item["key"], item["phase"], item["variant"]
    dynamic = {"dynamic=None": None, "dynamic=True": True, "dynamic=False": False, "mark_dynamic": None}[variant]
    dev = torch.device(device)
    if key == "scale":
        def forward(model, batch, s):
            return twin.forward(model, batch) * s
    else:
        forward = twin.forward
    compiled = torch.compile(forward if phase == "forward" else twin.loss, dynamic=dynamic)
    models: dict[Any, Any] = {}  # one model per parameter shapes: the same model sees new inputs
    rows = []
    for value in item["values"]:
        cfg, cdtype, params, batch = _inputs(wl, base, phase, key, value, dtype, seed)
        pdt = param_dtype(cdtype, phase)
        sig = (pdt, tuple(sorted((k, v.shape) for k, v in params.items())))
        if sig not in models:
            model = twin.build(cfg, {k: to_tensor(v, pdt, dev) for k, v in params.items()})
            models[sig] = (model, make_optimizer(wl.optimizer(cfg), model.parameters()))
        model, opt = models[sig]
        tbatch = {k: to_tensor(v, cdtype, dev) for k, v in batch.items()}
        if variant == "mark_dynamic" and key not in SPECIAL_KEYS:
            for name, axes in wl.varying_axes(cfg, key).items():
                for a in axes:
                    torch._dynamo.mark_dynamic(tbatch[name], a)
        n0 = len(dynamo_utils.get_compilation_metrics())
        t0 = time.perf_counter()
        if phase == "forward":
            with torch.inference_mode():
                out = compiled(model, tbatch, float(value)) if key == "scale" else compiled(model, tbatch)
        else:
            out = compiled(model, tbatch)
            out.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        call_s = time.perf_counter() - t0
        del out
        metrics = dynamo_utils.get_compilation_metrics()
        new = metrics[n0:]
        reason = None
        if new:
            reason = next((m.recompile_reason for m in reversed(new) if m.recompile_reason), None)
            reason = (reason or "first compilation of this code").splitlines()[0].strip()[:300]
            fails = [m.fail_reason for m in new if m.fail_reason]
            if fails:
                reason += f" [{fails[-1].splitlines()[0][:200]}]"
        rows.append({"value": value, "shape": _shape(batch), "padded_to": None, "compiled": bool(new),
                     "call_s": call_s, "compiles_in_call": len(new), "compile_count": len(metrics),
                     "reason": reason})
    return rows


def run_item(item: Mapping[str, Any], dtype: str = "float32", device: str = "cpu", matmul_precision: str = "float32",
             seed: int = 0, cache_dir: str | None = None) -> dict[str, Any]:
    """Worker target: one backend x variant over the whole value sequence."""
    settings = {"matmul_precision": matmul_precision, "cache_dir": cache_dir}
    rows = (_run_jax if item["backend"] == "jax-jit" else _run_torch)(item, settings, device, dtype, seed)
    for i, r in enumerate(rows):
        r.update(backend=item["backend"], variant=item["variant"], call_index=i, key=item["key"],
                 exact=item["exact"])
    return {"status": "ok", "rows": rows}
