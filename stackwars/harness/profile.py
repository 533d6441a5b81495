"""Summarise a profiler trace of a cell's profiled steps: where each step's wall time went.

The trace is Chrome trace-event JSON, as ``torch.profiler`` (``export_chrome_trace``) and
``jax.profiler`` (``create_perfetto_trace=True``) write it; times are microseconds. Each
profiled step is wrapped in an annotation named ``stackwars.step`` (``#i`` for torch) and
ends with the step's synchronisation, so every kernel of a step ends inside its window.

Per step:

* ``wall_s``: the step's annotation, launch to synchronised end;
* ``busy_s``: the union of the intervals in which a kernel ran. A kernel is, by device and
  framework (``kernel_kind`` says which):
  CUDA: a GPU kernel, copy or memset (torch: trace categories ``kernel``/``gpu_memcpy``/
  ``gpu_memset``; JAX: events on the ``Stream`` lines of a ``/device:GPU`` process);
  CPU, PyTorch: a top-level aten operator (nested calls are its parts, not more work);
  CPU, JAX: an XLA op executed by the CPU runtime (events carrying ``hlo_op``);
* ``gap_s`` = ``wall_s - busy_s``: the host's share (Python, dispatch, launch, the
  framework's bookkeeping) during which no kernel ran, split into before the first kernel,
  between kernels and after the last;
* kernels per step, the top kernels by time with their share (XLA's numbered instructions
  grouped by name), host<->device copies (bytes and time), the host's top operators by
  self time, and the framework's named regions (PyTorch's ``Optimizer.step#...``);
* the step's kernel mix: every kernel name with its count and time per step (the
  ``MIX`` longest), and a fingerprint of the whole multiset of names and counts, so two
  processes' profiles can say whether they ran the same kernels (verdict/spread.py).

Pure Python: no framework is imported; the report and the tests read the same summary.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import statistics
from collections import defaultdict
from typing import Any, Iterable, Mapping

STEP = re.compile(r"^stackwars\.step(#\d+)?$")
TOP = 10
MIX = 200  # kernels kept in a step's mix (by time); the fingerprint covers them all
US = 1e-6
HOST_ONLY = {"TorchDynamo Cache Lookup"}


def load(path: str) -> list[dict[str, Any]]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def _names(events: Iterable[Mapping[str, Any]]) -> tuple[dict[Any, str], dict[tuple[Any, Any], str]]:
    procs, threads = {}, {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            procs[e.get("pid")] = str((e.get("args") or {}).get("name", ""))
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[(e.get("pid"), e.get("tid"))] = str((e.get("args") or {}).get("name", ""))
    return procs, threads


def copy_direction(name: str) -> str | None:
    low = name.lower().replace(" ", "")
    if "memcpy" not in low:
        return None
    for tag, direction in (("htod", "h2d"), ("h2d", "h2d"), ("dtoh", "d2h"), ("d2h", "d2h"), ("dtod", "d2d"),
                           ("d2d", "d2d"), ("ptop", "d2d"), ("p2p", "d2d")):
        if tag in low:
            return direction
    return "other"


def copy_bytes(args: Mapping[str, Any]) -> int | None:
    for key in ("bytes", "num_bytes", "size", "Bytes"):
        if isinstance(args.get(key), (int, float)):
            return int(args[key])
    details = str(args.get("memcpy_details", ""))
    m = re.search(r"size:\s*(\d+)", details)
    return int(m.group(1)) if m else None


def union(intervals: list[tuple[float, float]]) -> tuple[float, list[tuple[float, float]]]:
    """Total length of the union of [start, end) intervals, and the merged intervals."""
    merged: list[list[float]] = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return sum(e - s for s, e in merged), [(s, e) for s, e in merged]


def _complete(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float))
            and isinstance(e.get("dur"), (int, float))]


def _self_times(events: list[dict[str, Any]]) -> dict[int, float]:
    """Self time of each event (its duration minus its direct children's), nesting found per
    thread from the intervals."""
    out: dict[int, float] = {}
    by_thread: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        by_thread[(e.get("pid"), e.get("tid"))].append(e)
    for evs in by_thread.values():
        stack: list[dict[str, Any]] = []
        for e in sorted(evs, key=lambda e: (e["ts"], -e["dur"])):
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
                stack.pop()
            out[id(e)] = float(e["dur"])
            if stack:
                out[id(stack[-1])] -= float(e["dur"])
            stack.append(e)
    return out


def _top_level(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events not nested inside another of ``events`` on the same thread."""
    top = []
    by_thread: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        by_thread[(e.get("pid"), e.get("tid"))].append(e)
    for evs in by_thread.values():
        end = float("-inf")
        for e in sorted(evs, key=lambda e: (e["ts"], -e["dur"])):
            if e["ts"] >= end:
                top.append(e)
                end = e["ts"] + e["dur"]
            else:
                end = max(end, e["ts"] + e["dur"])
    return top


def classify(events: list[dict[str, Any]], framework: str, device: str) -> dict[str, Any]:
    """Split a trace into step windows, kernels, copies and host events (see the module doc)."""
    procs, threads = _names(events)
    xs = _complete(events)
    steps = sorted((e for e in xs if STEP.match(str(e.get("name", ""))) and e.get("cat") != "gpu_user_annotation"),
                   key=lambda e: e["ts"])
    copies: list[dict[str, Any]] = []
    if device == "cuda":
        if framework == "torch":
            kernels = [e for e in xs if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
            copies = [e for e in xs if e.get("cat") == "gpu_memcpy"]
            kind = "CUDA kernels, copies and memsets (torch.profiler / CUPTI)"
        else:
            device_pids = {pid for pid, name in procs.items() if name.startswith("/device:GPU")}
            kernels = [e for e in xs if e.get("pid") in device_pids
                       and threads.get((e.get("pid"), e.get("tid")), "").startswith("Stream")]
            copies = [e for e in kernels if copy_direction(str(e.get("name", "")))]
            kind = "CUDA kernels and copies on the GPU's stream lines (jax.profiler / CUPTI)"
        in_kernels = {id(e) for e in kernels}  # by identity: a trace holds 10^5 events
        host = [e for e in xs if id(e) not in in_kernels and not STEP.match(str(e.get("name", "")))
                and e.get("cat") not in ("gpu_user_annotation", "ac2g", "cuda_runtime", "cuda_driver")]
    elif framework == "torch":
        ops = [e for e in xs if e.get("cat") == "cpu_op"]
        # Dynamo's guard check before a compiled region is host bookkeeping, not an operator's work
        kernels = [e for e in _top_level(ops) if e.get("name") not in HOST_ONLY]
        host = [e for e in xs if e.get("cat") in ("cpu_op", "user_annotation", "python_function")
                and not STEP.match(str(e.get("name", "")))]
        kind = "top-level aten operators (torch.profiler, CPU)"
    else:
        kernels = [e for e in xs if "hlo_op" in (e.get("args") or {})]
        host = [e for e in xs if "hlo_op" not in (e.get("args") or {}) and not STEP.match(str(e.get("name", "")))
                and not str(e.get("name", "")).startswith("end: ")]
        kind = "XLA ops run by the CPU runtime (jax.profiler, events with hlo_op)"
    if framework == "jax":
        # JAX's Python tracer records every Python thread; a thread the trace does not name is not
        # the framework's (the worker's heartbeat sleeping): only the stepping thread and named ones count
        stepping = {(s.get("pid"), s.get("tid")) for s in steps}
        host = [e for e in host if (e.get("pid"), e.get("tid")) in threads or (e.get("pid"), e.get("tid")) in stepping]
    regions = [e for e in xs if e.get("cat") == "user_annotation" and not STEP.match(str(e.get("name", "")))]
    return {"steps": steps, "kernels": kernels, "copies": copies, "host": host, "regions": regions,
            "kernel_kind": kind}


def kernel_name(name: str, framework: str) -> str:
    """XLA numbers every instruction (``fusion.330``): JAX's kernels are grouped by their
    name without the number, so a table shows kinds of kernels, not 1,955 singletons."""
    return re.sub(r"\.\d+$", "", name) if framework == "jax" else name


def _inside(e: Mapping[str, Any], start: float, end: float) -> bool:
    return e["ts"] >= start and e["ts"] < end


def _clip(e: Mapping[str, Any], start: float, end: float) -> tuple[float, float]:
    return max(e["ts"], start), min(e["ts"] + e["dur"], end)


def summarize(events: list[dict[str, Any]], framework: str, device: str, top: int = TOP) -> dict[str, Any]:
    """The per-step summary of a trace's ``stackwars.step`` windows (see the module doc).
    ``framework``: whose profiler wrote the trace (torch-mlir-xla's is JAX's)."""
    parts = classify(events, framework, device)
    steps = parts["steps"]
    if not steps:
        raise ValueError("the trace has no 'stackwars.step' annotations: nothing to summarise")
    n = len(steps)
    per_step = []
    kernel_time: dict[str, float] = defaultdict(float)
    kernel_count: dict[str, int] = defaultdict(int)
    copy_stats: dict[str, dict[str, float]] = {}
    host_self = _self_times(parts["host"])
    host_time: dict[str, float] = defaultdict(float)
    host_count: dict[str, int] = defaultdict(int)
    region_time: dict[str, float] = defaultdict(float)
    for s in steps:
        start, end = float(s["ts"]), float(s["ts"] + s["dur"])
        ks = [k for k in parts["kernels"] if _inside(k, start, end)]
        busy, merged = union([_clip(k, start, end) for k in ks])
        wall = end - start
        before = (merged[0][0] - start) if merged else wall
        after = (end - merged[-1][1]) if merged else 0.0
        per_step.append({"wall_s": wall * US, "busy_s": busy * US, "gap_s": (wall - busy) * US,
                         "gap_before_s": before * US, "gap_after_s": after * US,
                         "gap_between_s": max(0.0, wall - busy - before - after) * US,
                         "kernels": len(ks), "kernel_s": sum(k["dur"] for k in ks) * US})
        for k in ks:
            kernel_time[kernel_name(str(k.get("name")), framework)] += k["dur"] * US
            kernel_count[kernel_name(str(k.get("name")), framework)] += 1
        for r in parts["regions"]:
            if _inside(r, start, end):
                region_time[str(r.get("name"))] += r["dur"] * US
        for c in parts["copies"]:
            if _inside(c, start, end):
                d = copy_stats.setdefault(copy_direction(str(c.get("name", ""))) or "other",
                                          {"count": 0, "bytes": 0, "bytes_known": True, "time_s": 0.0})
                nbytes = copy_bytes(c.get("args") or {})
                d["count"] += 1
                d["time_s"] += c["dur"] * US
                if nbytes is None:
                    d["bytes_known"] = False
                else:
                    d["bytes"] += nbytes
        for h in parts["host"]:
            if _inside(h, start, end):
                host_time[str(h.get("name"))] += host_self.get(id(h), 0.0) * US
                host_count[str(h.get("name"))] += 1
    total_kernel = sum(kernel_time.values()) or 1.0
    top_kernels = [{"name": name, "count_per_step": kernel_count[name] / n, "time_per_step_s": t / n,
                    "share": t / total_kernel}
                   for name, t in sorted(kernel_time.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]
    top_host = [{"name": name, "count_per_step": host_count[name] / n, "self_per_step_s": t / n}
                for name, t in sorted(host_time.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]
    copies = {d: {"count_per_step": v["count"] / n, "bytes_per_step": v["bytes"] / n if v["bytes_known"] else None,
                  "time_per_step_s": v["time_s"] / n} for d, v in sorted(copy_stats.items())}
    median = {key: statistics.median(p[key] for p in per_step) for key in per_step[0]}
    wall = sum(p["wall_s"] for p in per_step)
    # the framework's own named regions (torch: Optimizer.step#AdamW.step, zero_grad): their share of the steps
    regions = [{"name": name, "time_per_step_s": t / n, "share": t / wall if wall else None}
               for name, t in sorted(region_time.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]
    return {"steps": n, "kernel_kind": parts["kernel_kind"], "median": median, "per_step": per_step,
            "distinct_kernels": len(kernel_time), "top_kernels": top_kernels, "top_host": top_host,
            "copies": copies, "regions": regions, **kernel_mix(kernel_count, kernel_time, n)}


def kernel_mix(count: Mapping[str, int], time_s: Mapping[str, float], steps: int) -> dict[str, Any]:
    """What a step ran: ``kernel_mix`` {name: [count per step, time per step]} for the ``MIX``
    longest kernels, and ``kernel_mix_sha``, a fingerprint of every name with its count per
    step (times left out: the same kernels run at another speed are the same mix)."""
    names = sorted(count)
    sha = hashlib.sha256("\n".join(f"{k}\t{count[k] / steps:g}" for k in names).encode()).hexdigest()[:16]
    kept = sorted(names, key=lambda k: (-time_s[k], k))[:MIX]
    return {"kernel_mix": {k: [count[k] / steps, time_s[k] / steps] for k in kept}, "kernel_mix_sha": sha}


def summarize_file(path: str, framework: str, device: str) -> dict[str, Any]:
    return summarize(load(path), framework, device)
