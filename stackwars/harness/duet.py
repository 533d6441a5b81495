"""The deciding pair measured together: both programs of a verdict in one process, alternating.

A verdict is a ratio. Measured in processes of their own, each side's figure carries its
process's state: on the 2-core VM the same program's process medians spread by 8-13%
(results/duet-cpu/), and on the H100 a host whose speed changed over seconds set the spread of
launch-bound cells. Two programs that alternate in one process share that state, and their
ratio cancels it: two instances of the same GEMM read the same within 1.6% (process to process)
where their separate processes spread 8%. PyTorch's dynamo harness alternates the eager and the
compiled call for the same reason ("to handle frequency scaling and load changes").

``measure_duet`` is a worker target: it prepares both cells (each as its own process would:
``measure.prepare_cell``), makes each one's first and second call and warm-up, waits for its own
child processes, then times rounds: in each, one block of each program, in an order drawn at
random (seeded), each block timed as the run times every sample (its timing mode; blocks of
``min_block_s`` in throughput mode). Each round gives a ratio B/A of neighbouring blocks; the
duet's estimate is the median of those ratios. The window goes on until both its rounds and its
time reach the run's settings (twice ``min_time_s``: each side gets what a process of its own
would).

What the paired figure cannot show, and why each cell keeps its own processes: the first call,
memory and parity (two runtimes in one process: two allocators, two thread pools, two CUDA
contexts on a GPU), and the figures of each side alone (its time in a process of its own, its
device time, issue time and energy). A duet reads a ratio, nothing else.
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any, Callable, Mapping

from stackwars import canary
from stackwars.harness.contention import ForeignLoad, settle_descendants
from stackwars.harness.measure import prepare_cell, stage
from stackwars.harness.timer import Timer
from stackwars.records import MeasureConfig
from stackwars.stats import CONTENTION_MIN_WINDOW_S

MIN_ROUNDS = 10  # rounds a duet takes at least, however long its blocks


def alternate(timers: Mapping[str, Timer], calls: Mapping[str, int], mode: str, window_s: float, max_rounds: int,
              rng: random.Random, clock: Callable[[], float] = time.perf_counter
              ) -> tuple[dict[str, list[float]], list[str], float]:
    """The rounds: in each, one sample of each timer (``calls`` calls a sample), in an order drawn
    from ``rng``, until ``MIN_ROUNDS`` rounds and ``window_s`` are reached, or ``max_rounds``.
    Returns each side's per-call times by round, the side that went first in each, and the span
    (on ``clock``, the timers' own)."""
    rounds: dict[str, list[float]] = {k: [] for k in timers}
    first: list[str] = []
    start = clock()
    while True:
        order = list(timers)
        rng.shuffle(order)
        first.append(order[0])
        for k in order:
            rounds[k].append(timers[k].steady(1, 0.0, 1, calls[k], mode=mode).samples[0])
        if (len(first) >= MIN_ROUNDS and clock() - start >= window_s) or len(first) >= max_rounds:
            return rounds, first, clock() - start


def measure_duet(a: Mapping[str, Any], b: Mapping[str, Any], config: Mapping[str, Any],
                 caches: Mapping[str, Mapping[str, Any]], seed: int = 0) -> dict[str, Any]:
    """Cells ``a`` and ``b`` (CellSpec dicts) alternating in this process; ``caches``: each cell's
    compile-cache record ("a", "b"), as its own process's. Returns the duet's record: the rounds'
    per-call times of each side, their order, the ratio, and what the host did meanwhile."""
    stage("canary")
    before = canary.reading()
    cfg = MeasureConfig.from_dict(config)
    cells = {"a": prepare_cell(a, config, caches.get("a")), "b": prepare_cell(b, config, caches.get("b"))}
    timers = {k: Timer(pc.prepared.call, pc.prepared.sync) for k, pc in cells.items()}
    calls = {}
    for k, t in timers.items():  # each program compiled and warm before any round
        stage(f"first calls ({k})")
        first, out = t.once()
        del out
        second, out = t.once()
        del out
        warm = t.warmup(cfg.warmup)
        estimate = statistics.median(warm) if warm else second
        calls[k] = Timer.calls_per_sample(cfg.timing_mode, estimate, cfg.min_block_s)
        cells[k].timeline.update(first_call_s=first, second_call_s=second, warmup_s=sum(warm))
    stage("own child processes settling")
    settle = settle_descendants()
    others = ForeignLoad().start()
    stage("rounds")
    rounds, first_side, span = alternate(timers, calls, cfg.timing_mode, max(2 * cfg.min_time_s,
                                                                             CONTENTION_MIN_WINDOW_S),
                                         cfg.max_samples, random.Random(seed))
    contention = others.stop()
    ratios = [y / x for x, y in zip(rounds["a"], rounds["b"]) if x > 0]
    stage("canary")
    after = canary.reading()
    return {
        "status": "ok",
        "a": dict(a), "b": dict(b),
        "rounds": rounds, "first": first_side, "calls_per_sample": calls, "timing": cfg.timing_mode,
        "ratio": statistics.median(ratios),
        "median_a_s": statistics.median(rounds["a"]), "median_b_s": statistics.median(rounds["b"]),
        "window_s": span, "seed": seed,
        "settings": {"contention": contention, "settle": settle,
                     "canary": {"before": before, "after": after, "program": canary.DESCRIPTION},
                     "backends": {k: pc.settings.get("backend") for k, pc in cells.items()},
                     "cache": {k: pc.settings.get("cache", {}).get("mode") for k, pc in cells.items()}},
        "timeline": {k: dict(pc.timeline) for k, pc in cells.items()},
    }
