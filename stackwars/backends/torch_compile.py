"""torch-compile: TorchDynamo -> AOTAutograd -> Inductor.

What is compiled: ``twin.forward`` (forward phase) or ``twin.loss`` (train-step: forward
and, through AOTAutograd, backward), and by default the optimizer step as well (its own
``torch.compile``; ``--torch-optimizer`` picks another implementation, run eagerly). Compile cost and
graph structure come from Dynamo's own records: ``calculate_time_spent()`` (taken right
after the first call, which includes the lazily compiled backward), the per-compile
``CompilationMetrics`` (recompile reasons) and ``counters`` (graphs, graph breaks), the
latter two read at the end of the cell so recompiles during the steady state count.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import torch

from stackwars.backends.base import Prepared
from stackwars.backends.torch_common import TorchBackend
from stackwars.harness.settings import RUN_CELL_CACHE
from stackwars.records import CompileStats

_INDUCTOR_THREADS: list[int] = []  # Inductor's own number of compile threads in this process, before any cell set it


def compile_threads(cache: Mapping[str, Any]) -> dict[str, Any]:
    """Inductor's compile threads for this process, set and reported.

    At a process's first compile on a GPU, Inductor starts its compile pool (a sidecar
    interpreter that imports torch, then a worker per CPU: 16 on the H200's host), even where
    the FX-graph cache leaves nothing to compile. A process of a run that finds its cell's
    cache warm is there for its steady state (only cold processes give the run's first-call
    figures): its programs come from that cache, and the pool would only be host load beside
    its first calls, which the cell then waits out (``settle``). Such a process compiles with one
    thread: no pool, and whatever the cache lacks is compiled here, a kernel at a time. Every
    other process (a cold one, the user's ``--warm-cache``, the cache study's warm run: their
    first calls are figures) keeps Inductor's own number, as its users run it."""
    from torch._inductor import config

    if not _INDUCTOR_THREADS:
        from torch._inductor.async_compile import get_compile_threads

        _INDUCTOR_THREADS.append(get_compile_threads())
    default = _INDUCTOR_THREADS[0]
    steady_only = cache.get("mode") == "warm" and cache.get("source") == RUN_CELL_CACHE
    config.compile_threads = 1 if steady_only else default
    out: dict[str, Any] = {"value": config.compile_threads, "inductor_default": default}
    if steady_only and default > 1:
        out["why"] = ("a warm process of the run, there for its steady state: its programs come from the cell's "
                      "cache, and one thread starts no compile pool beside its first calls")
    return out


def _first_line(reason: str) -> str:
    return reason.strip().splitlines()[0][:200] if reason.strip() else reason


def cudagraph_skips() -> str | None:
    """Why mode='reduce-overhead' ran without CUDA graphs, or None where every graph Inductor
    built is replayed. Inductor falls back to plain kernel launches, silently but for a log
    line, when a graph holds a CPU tensor, a host copy, a mutated input or dynamic shapes;
    ``counters['inductor']['cudagraph_skips']`` counts those graphs, the compile metrics keep
    the reason."""
    from torch._dynamo.utils import counters, get_compilation_metrics

    skips = int(counters["inductor"]["cudagraph_skips"])
    if not skips:
        return None
    reasons = sorted({m.cudagraph_skip_reason for m in get_compilation_metrics()
                      if getattr(m, "cudagraph_skip_reason", None)})
    return (f"CUDA graphs skipped: Inductor ran {skips} graph(s) of this cell without CUDA graphs "
            f"(counters['inductor']['cudagraph_skips'])" + (f": {'; '.join(reasons)}" if reasons else "")
            + "; the timings are plain torch.compile's, kept in the record, not a CUDA-graph result")


class TorchCompile(TorchBackend):
    """Serves torch-compile, torch-compile-max-autotune and torch-cudagraphs (mode differs)."""

    compiles = True

    def configure(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        applied = super().configure(settings)
        applied["inductor_compile_threads"] = compile_threads(settings.get("cache") or {})
        return applied

    def wrap(self, fn: Callable) -> Callable:
        return torch.compile(fn, mode=self.options["mode"], fullgraph=self.options["fullgraph"])

    def before_call(self) -> None:
        if self.options["mode"] == "reduce-overhead":
            # CUDA graph trees need to know where one step ends and the next begins.
            torch.compiler.cudagraph_mark_step_begin()

    def prepare(self, workload, cfg, phase, params, batch, device, dtype) -> Prepared:
        # Dynamo's statistics are process-global; a worker measures one cell, but inline
        # (debug) runs measure several in one process, so start each cell from zero.
        from torch._dynamo import utils as dynamo_utils

        torch._dynamo.reset()
        dynamo_utils.counters.clear()
        dynamo_utils.compilation_time_metrics.clear()
        dynamo_utils.clear_compilation_metrics()
        prepared = super().prepare(workload, cfg, phase, params, batch, device, dtype)
        first: dict[str, float] = {}

        def after_first_call():
            from torch._dynamo.utils import calculate_time_spent
            first.update(calculate_time_spent())

        prepared.after_first_call = after_first_call
        prepared.compile_stats = lambda: self._stats(first)
        if self.options["mode"] == "reduce-overhead":
            prepared.not_as_named = cudagraph_skips
        step_compiled = "step compiled" in str(prepared.notes.get("optimizer_impl"))
        prepared.notes.update(compile_mode=self.options["mode"], fullgraph=self.options["fullgraph"],
                              compiled="twin.forward" if phase == "forward"
                              else "twin.loss (forward + AOTAutograd backward); optimizer step "
                                   + ("compiled" if step_compiled else "eager"))
        return prepared

    @staticmethod
    def _stats(first: dict[str, float]) -> CompileStats:
        from torch._dynamo.utils import counters, get_compilation_metrics

        frame = first.get("entire_frame_compile", 0.0)
        backward = first.get("entire_backward_compile", 0.0)
        backend = first.get("backend_compile", 0.0)
        inductor = first.get("inductor_compile", 0.0)
        metrics = get_compilation_metrics()
        recompile_reasons = [m.recompile_reason for m in metrics if m.recompile_reason]
        breaks = dict(counters["graph_break"])
        return CompileStats(
            total_s=frame + backward if first else None,
            # the first three add up to total_s. Inductor's time covers the forward graphs (inside
            # backend_compile) and the backward ones (compiled lazily at the first backward, outside
            # it): so AOTAutograd's share is what both compiles took less Inductor's, never
            # backend - inductor (a train step once read -8.6 s so)
            breakdown={
                "dynamo_s": frame - backend,  # bytecode tracing, guards
                "aot_autograd_s": backend + backward - inductor,  # joint graph, partition
                "inductor_s": inductor,  # lowering, scheduling, codegen, C++/Triton build
                "inductor_codegen_s": first.get("code_gen", 0.0),  # part of inductor_s
                "backward_compile_s": backward,  # part of the three above: the first backward's compile
            },
            graphs=int(counters["stats"]["unique_graphs"]),
            graph_breaks=int(sum(breaks.values())),
            recompiles=len(recompile_reasons),
            break_reasons=tuple(_first_line(r) for r in list(breaks) + recompile_reasons),
            source="torch._dynamo.utils: calculate_time_spent (after first call), "
                   "CompilationMetrics and counters (end of cell)",
            extra={"compiles": len(metrics), "program_sha": _program_sha(),
                   "cudagraph_skips": int(counters["inductor"]["cudagraph_skips"]),
                   # operations Dynamo captured into its graphs: an unrolled loop's body once per step
                   "ir_size": {"fx_ops_captured": int(counters["stats"]["calls_captured"])},
                   "fx_graph_cache": {k: int(v) for k, v in counters["inductor"].items()
                                      if k.startswith("fxgraph_cache")},
                   "aot_autograd_cache": {k: int(v) for k, v in counters["aot_autograd"].items()
                                          if "cache" in k}},
        )


def _program_sha() -> str | None:
    """A fingerprint of the code Inductor generated (or read back from its cache) in this
    process: two processes of a cell with the same one ran the same kernels."""
    import hashlib

    from torch._inductor.codecache import PyCodeCache

    sources = []
    for module in list(PyCodeCache.modules):
        try:
            with open(module.__file__) as f:
                sources.append(f.read())
        except (OSError, AttributeError, TypeError):
            continue
    return hashlib.sha256("\n".join(sorted(sources)).encode()).hexdigest()[:12] if sources else None
