"""Harness fidelity: does stackwars time what independent tools time?

For one cell (run inside a worker), the very callable the cell measures is timed by:

* stackwars: ``Timer.warm_then_steady`` with the run's settings (median of samples);
* a reference, in the same process: ``torch.utils.benchmark.Timer.blocked_autorange``
  for PyTorch (given the same thread count: its default is one thread), and for JAX a
  hand-written loop that calls, ``jax.block_until_ready``s the output, and reads
  ``time.perf_counter`` around each call.

The two alternate for ``ROUNDS`` rounds (stackwars, reference, stackwars, ...): on a
shared VM, slow phases lasting a second or more hit either side at random, and with
two rounds a single one decided the ratio. The ratio is of the medians of each side's
per-round medians; each side's round-to-round spread is reported so that a machine
noisier than the target can be told from a real disagreement. ``overhead`` measures
the harness's own cost per sample on a no-op.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Mapping

from stackwars.harness.measure import prepare_cell
from stackwars.harness.timer import Timer

ROUNDS = 5


def _torch_reference(call: Callable[[], Any], min_time_s: float) -> tuple[float, str]:
    import torch
    import torch.utils.benchmark as tb

    timer = tb.Timer(stmt="call()", globals={"call": call}, num_threads=torch.get_num_threads())
    m = timer.blocked_autorange(min_run_time=max(min_time_s, 0.2))
    return float(m.median), f"torch.utils.benchmark blocked_autorange ({len(m.times)} blocks x {m.number_per_run})"


def _jax_reference(call: Callable[[], Any], min_time_s: float) -> tuple[float, str]:
    import jax

    for _ in range(3):
        jax.block_until_ready(call())
    times = []
    start = time.perf_counter()
    while len(times) < 10 or time.perf_counter() - start < min_time_s:
        t0 = time.perf_counter()
        out = call()
        jax.block_until_ready(out)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), f"perf_counter + jax.block_until_ready loop ({len(times)} calls)"


def fidelity_cell(spec: Mapping[str, Any], config: Mapping[str, Any],
                  cache: Mapping[str, Any] | None = None) -> dict[str, Any]:
    pc = prepare_cell(spec, config, cache)
    cfg = pc.config
    timer = Timer(pc.prepared.call, pc.prepared.sync)
    timer.once()  # compile
    second, _ = timer.once()
    reference = _torch_reference if pc.framework == "torch" else _jax_reference
    ours, theirs, tool = [], [], ""
    for _ in range(ROUNDS):
        _, steady = timer.warm_then_steady(cfg.warmup, cfg.min_samples, cfg.min_time_s, cfg.max_samples,
                                           cfg.min_block_s, second, mode=cfg.timing_mode)
        ours.append(statistics.median(steady.samples))
        median, tool = reference(pc.prepared.call, cfg.min_time_s)
        theirs.append(median)
    a, b = statistics.median(ours), statistics.median(theirs)
    return {"status": "ok", "cell": pc.cell.key, "framework": pc.framework, "stackwars_median_s": a,
            "reference_median_s": b, "ratio": a / b, "stackwars_rounds_s": ours, "reference_rounds_s": theirs,
            "round_spread": max((max(x) - min(x)) / statistics.median(x) for x in (ours, theirs)),
            "reference_tool": tool}


def overhead(framework: str | None = None, device: str = "cpu", min_time_s: float = 0.5) -> dict[str, Any]:
    """Per-sample cost of the harness itself: a no-op callable, timed one call per sample.

    ``bare``: no-op sync (the clock reads, the call, the bookkeeping); with a framework,
    also its real sync on an output that is already computed."""
    out: dict[str, Any] = {"status": "ok"}
    bare = Timer(lambda: None, lambda outs: None).steady(1000, min_time_s, 10_000_000, number=1)
    out["bare_per_sample_s"] = statistics.median(bare.samples)
    if framework == "jax":
        import jax
        import jax.numpy as jnp

        x = jax.block_until_ready(jnp.ones(4))
        s = Timer(lambda: x, jax.block_until_ready).steady(1000, min_time_s, 10_000_000, number=1)
        out["framework_sync_per_sample_s"] = statistics.median(s.samples)
        out["framework_sync"] = "jax.block_until_ready on a ready array"
    elif framework == "torch":
        import torch

        x = torch.ones(4, device=device)
        if device == "cuda":
            sync, what = (lambda outs: torch.cuda.synchronize()), "torch.cuda.synchronize with an idle stream"
        else:
            sync, what = (lambda outs: None), "none needed on CPU (eager CPU ops complete before returning)"
        s = Timer(lambda: x, sync).steady(1000, min_time_s, 10_000_000, number=1)
        out["framework_sync_per_sample_s"] = statistics.median(s.samples)
        out["framework_sync"] = what
    return out
