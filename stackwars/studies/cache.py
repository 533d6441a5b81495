"""Compile-cache study: what the caches save on the first call.

    stackwars study cache mha -b jax-jit -b torch-compile

Per backend, three first/second calls of the same cell:

1. ``cold``: a fresh worker process and an empty cache directory (JAX's persistent
   compilation cache; Inductor's FX-graph and AOTAutograd caches, and its C++ build
   directory);
2. ``warm``: another fresh worker process reusing that directory, now populated;
3. the second call inside process 1 (in-memory caches only).

Cache hits are read from the frameworks' own counters (JAX's
``/jax/compilation_cache/cache_hits`` events; Dynamo's ``fxgraph_cache_hit`` and
``autograd_cache_hit`` counters), so "warm" is shown, not assumed.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from typing import Any, Mapping, Sequence

from stackwars.errors import SpecError
from stackwars.records import CellSpec, Measurement, MeasureConfig
from stackwars.harness import tmp

BACKENDS = ("jax-jit", "jax-eager", "torch-compile", "torch-compile-max-autotune", "torch-mlir-xla")
ROW_KEYS = ("backend", "run", "first_call_s", "second_call_s", "compile_s", "cache_hits", "status")


def plan(backends: Sequence[str]) -> list[str]:
    for b in backends:
        if b not in BACKENDS:
            raise SpecError(f"the cache study covers compiled backends: {', '.join(BACKENDS)}; got {b!r}")
    return list(backends)


def cache_evidence(m: Measurement) -> dict[str, int]:
    extra = (m.compile.extra if m.compile else {}) or {}
    if "persistent_cache" in extra:
        return dict(extra["persistent_cache"])
    hits = {}
    for group in ("fx_graph_cache", "aot_autograd_cache"):
        for k, v in (extra.get(group) or {}).items():
            hits[k] = v
    return hits


def run(spec: CellSpec, config: MeasureConfig, probe: Mapping[str, Any], measure) -> list[dict[str, Any]]:
    """``measure(spec, config, probe, peak) -> Measurement``: runner.measure_one, injected."""
    rows = []
    directory = tmp.mkdtemp("cache-study")
    try:
        cfg = replace(config, cache_dir=directory)
        for run_name in ("cold", "warm"):
            m = measure(spec, cfg, probe, None)
            cache = m.settings.get("cache") or {}
            rows.append({"backend": spec.backend, "run": run_name, "first_call_s": m.first_call_s,
                         "second_call_s": m.second_call_s, "compile_s": m.compile.total_s if m.compile else None,
                         "cache_hits": cache_evidence(m), "status": m.status, "error": m.error,
                         "cache_entries_before": cache.get("entries_before"),
                         # what the directory held before and after: JAX executables, XLA's autotuning
                         # results (GPU), Inductor's and Triton's artefacts
                         "cache_contents_before": cache.get("contents_before"),
                         "cache_contents_after": cache.get("contents_after")})
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return rows
