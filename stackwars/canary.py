"""A canary for the machine: a small fixed program timed before and after every cell.

A host can slow down with nothing the guest can see: two identical runs on the 2-core VM,
one after the other, had every gemm cell of the second 1.2-3.2x slower in all three of its
processes for about a minute, with contention 0-9% and steal time 0, and the two frameworks
slowed by different factors. Contention accounting (harness/contention.py) cannot see
that; a program whose cost never changes can. Every worker times the same fixed program
(``reading``), in every process and every run, before the framework is imported and again
after the cell. It runs on all of the process's CPUs at once: a single-threaded canary
missed what slowed the cells here (a 2-thread PyTorch GEMM ran 1.9x slower for seconds at a
time while a one-thread program did not move; measured on the 2-core VM, 2026-11-24),
because the host took part of one CPU away.

``judge`` sets each process against its run's canary on the same machine (the lower quartile
of the run's readings: the machine near its best): a process whose reading is off it by
more than the canary's own noise (never less than ``FLOOR``) is flagged ``slowed``, and
like a process measured while the machine was busy, its figures decide nothing
(verdict/gate.py). ``differ`` says whether two runs' canaries differ, so that ``stackwars
compare`` does not call a slower host a regression.

Pure Python and numpy: records, the store and the report may import it; it imports no
framework.
"""

from __future__ import annotations

import math
import os
import statistics
import threading
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

PASSES = 5  # passes per reading; each lane's figure is the fastest of its passes
COMPUTE_ELEMENTS = 1 << 15  # float64 elements per compute pass (256 KiB: in a core's L2)
COMPUTE_REPS = 6  # sin and multiply over them, this many times a pass
STREAM_ELEMENTS = 1 << 19  # float64 elements per stream pass: 4 MiB read, 4 MiB written
FLOOR = 0.15  # a process's canary off its run's by more than this (or the canary's own noise) is flagged
NOISE_K = 3.0  # the canary's own noise: this many times the median spread (IQR / median) of its passes
BASE_QUANTILE = 0.25  # the run's canary: this quantile of its readings (the machine near its best)
DESCRIPTION = (f"on each of the process's CPUs at once (a thread each: numpy releases the GIL), the fastest of "
               f"{PASSES} passes of {COMPUTE_REPS} x (sin, multiply) over {COMPUTE_ELEMENTS * 8 // 1024} KiB and a "
               f"stream over {STREAM_ELEMENTS * 8 // 2**20} MiB; the reading is the slowest CPU's")


class _Lane:
    """The fixed program for one CPU; its arrays are made once per process, outside the clock.
    No BLAS: a GEMM would start the BLAS library's own threads."""

    def __init__(self, seed: int) -> None:
        # fixed values, cheap to make (drawing them at random took 22 ms of a 60 ms first reading)
        self.x = np.linspace(-3.0 - seed, 3.0 + seed, COMPUTE_ELEMENTS)
        self.y = np.empty_like(self.x)
        self.s = np.linspace(0.0, 1.0, STREAM_ELEMENTS)
        self.t = np.empty_like(self.s)

    def __call__(self) -> None:
        for _ in range(COMPUTE_REPS):
            np.sin(self.x, out=self.y)
            np.multiply(self.y, self.x, out=self.y)
        np.add(self.s, 1.0, out=self.t)


_lanes: list[_Lane] = []


def _cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def reading(clock: Callable[[], float] = time.perf_counter, passes: int = PASSES,
            lanes: int | None = None) -> dict[str, Any]:
    """One canary reading: the program runs on every CPU of the process at once, a thread
    each, started together at every pass (a barrier); each lane's figure is the fastest of its
    passes (an interrupt lengthens a pass, a slower machine every pass; a first, untimed pass
    warms the caches and the pages); the reading ``s`` is the
    slowest lane's: a host that takes half of one CPU away (a busy hyperthread sibling of
    another guest, invisible as steal time) shows there, as it does in a cell's parallel
    GEMM. With the passes themselves, their spread (the canary's own noise) and its cost."""
    t_start = time.perf_counter()
    n = lanes or _cpus()
    while len(_lanes) < n:
        _lanes.append(_Lane(len(_lanes)))
    times: list[list[float]] = [[] for _ in range(n)]
    barrier = threading.Barrier(n)

    def run(i: int) -> None:
        lane = _lanes[i]
        lane()
        for _ in range(passes):
            barrier.wait()
            t0 = clock()
            lane()
            times[i].append(clock() - t0)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    per_lane = [float(min(t)) for t in times]
    spread = statistics.median(_rel_iqr(t) for t in times)
    return {"s": max(per_lane), "lanes": per_lane, "spread": spread, "passes": times,
            "cost_s": time.perf_counter() - t_start}


def _rel_iqr(values: Sequence[float]) -> float:
    q = np.quantile(values, [0.25, 0.5, 0.75])
    return float((q[2] - q[0]) / q[1]) if q[1] > 0 else 0.0


# ---- judging the readings (no timing below) -----------------------------------------------------------------

def readings(row: Mapping[str, Any]) -> list[float]:
    """A row's canary readings (before and after its cell), those it has."""
    return [float(v) for v in (row.get("canary_before_s"), row.get("canary_after_s")) if v and v > 0]


def tolerance(rows: Iterable[Mapping[str, Any]]) -> float:
    """How far a reading may be off its run's canary: the canary's own noise (``NOISE_K`` x
    the median spread of its passes within a reading, where the rows recorded it), never
    below ``FLOOR``."""
    spreads = [float(r["canary_spread"]) for r in rows if r.get("canary_spread") is not None]
    return max(FLOOR, NOISE_K * statistics.median(spreads)) if spreads else FLOOR


def run_canary(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The canary of a set of processes (one run on one machine): the ``BASE_QUANTILE`` of
    their readings (the machine near its best in that run: a run slowed for half its time
    still has its fast readings), the tolerance, and how many readings; None where none
    recorded one."""
    rows = list(rows)
    values = [v for r in rows for v in readings(r)]
    if not values:
        return None
    return {"s": float(np.quantile(values, BASE_QUANTILE)), "noise": tolerance(rows), "readings": len(values)}


def judge(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Copies of ``rows`` with ``canary_ratio`` (the one of the process's two readings nearer its
    run's canary, as a ratio to it), ``canary_noise`` (the tolerance) and ``slowed`` (off by more
    than the tolerance, either way: a process much faster than its run's canary ran on a
    machine in another state too). Runs and machines are judged apart; a row without
    readings is not flagged."""
    rows = [dict(r) for r in rows]
    by: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault((r.get("run_id"), r.get("machine")), []).append(r)
    for group in by.values():
        base = run_canary(group)
        for r in group:
            mine = readings(r)
            if base is None or not mine:
                r.update(canary_ratio=None, canary_noise=None, slowed=False)
                continue
            # the reading nearer the run's: a host slower (or faster) at both ends of the cell was so
            # through it; one reading off alone is as likely a moment's fluctuation. Both ways: on the
            # 2-CPU Xeon VM (2026-11-27) 2% of readings ran 1.5x faster than the rest for a moment,
            # the two lanes overlapping, and the faster of two readings flagged a third of a run's
            # gemm processes "slowed" that ran at the run's speed at their other end
            ratio = min((v / base["s"] for v in mine), key=lambda x: abs(math.log(x)))
            r.update(canary_ratio=ratio, canary_noise=base["noise"],
                     slowed=bool(abs(math.log(ratio)) > math.log1p(base["noise"])))
    return rows


def differ(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Whether two runs' canaries (``run_canary``) differ by more than their tolerance: None
    when they agree or either has none; else the ratio B / A and the bound it passed."""
    if not a or not b:
        return None
    ratio = b["s"] / a["s"]
    bound = max(a["noise"], b["noise"])
    if abs(math.log(ratio)) <= math.log1p(bound):
        return None
    return {"ratio": ratio, "bound": bound, "a_s": a["s"], "b_s": b["s"]}
