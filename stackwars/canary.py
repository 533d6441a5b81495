"""A canary for the machine: a small fixed program timed before and after every cell.

A host can slow down with nothing the guest can see: two identical runs on the 2-core VM,
one after the other, had every gemm cell of the second 1.2-3.2x slower in all three of its
processes for about a minute, with contention 0-9% and steal time 0, and the two frameworks
slowed by different factors. Contention accounting (harness/contention.py) cannot see
that; a program whose cost never changes can. Every worker times ``program`` (the same
in every process and every run: an interpreter loop, a small float64 GEMM and a stream over
8 MiB, so a slower core, a slower memory system or a throttled clock all show) before the
framework is imported and again after the cell; each reading is the median of
``PASSES`` passes.

``judge`` sets each process against its run's own canary on the same machine: a process
whose reading is off the run's median by more than the run's own canary noise (never less
than ``FLOOR``) is flagged ``slowed``, and like a process measured while the machine was
busy, its figures decide nothing (report/gate.py). ``run_canary`` says whether two runs'
canaries differ, so that ``stackwars compare`` does not call a slower host a regression.

Pure Python and numpy: records, the store and the report may import it; it imports no
framework.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

PASSES = 5  # passes per reading; the reading is their median
PY_ITERS = 20_000  # interpreter loop iterations per pass
GEMM_N, GEMM_REPS = 64, 8  # float64 GEMMs per pass
STREAM_ELEMENTS = 1 << 19  # float64 elements per stream pass: 4 MiB read, 4 MiB written
FLOOR = 0.15  # a process's canary off its run's by more than this (or the run's own noise) is flagged
NOISE_K = 4.0  # the run's noise: this many robust standard deviations of its readings (log scale)
MIN_READINGS = 4  # below this many readings in a run, its noise is not estimated: FLOOR alone
DESCRIPTION = (f"median of {PASSES} passes of: {PY_ITERS:,} interpreter-loop iterations, {GEMM_REPS} float64 "
               f"{GEMM_N}x{GEMM_N} GEMMs, one stream over {STREAM_ELEMENTS * 8 // 2**20} MiB")


class _Program:
    """The fixed program; its arrays are made once per process, outside the clock."""

    def __init__(self) -> None:
        rng = np.random.default_rng(0)
        self.a = rng.standard_normal((GEMM_N, GEMM_N))
        self.x = rng.standard_normal(STREAM_ELEMENTS)
        self.y = np.empty_like(self.x)

    def __call__(self) -> float:
        s = 0
        for i in range(PY_ITERS):
            s += i * i % 7
        b = self.a
        for _ in range(GEMM_REPS):
            b = self.a @ b
            b *= 1.0 / GEMM_N
        np.add(self.x, 1.0, out=self.y)
        return float(s) + float(b[0, 0]) + float(self.y[0])


_program: _Program | None = None


def reading(clock: Callable[[], float] = time.perf_counter, passes: int = PASSES) -> dict[str, Any]:
    """One canary reading: the median seconds of ``passes`` passes (a first, untimed pass
    warms the caches and the arrays' pages), the passes themselves and what it cost."""
    global _program
    t_start = time.perf_counter()
    if _program is None:
        _program = _Program()
    _program()
    times = []
    for _ in range(passes):
        t0 = clock()
        _program()
        times.append(clock() - t0)
    return {"s": float(statistics.median(times)), "passes": times, "cost_s": time.perf_counter() - t_start}


# ---- judging the readings (no timing below) -----------------------------------------------------------------

def readings(row: Mapping[str, Any]) -> list[float]:
    """A row's canary readings (before and after its cell), those it has."""
    return [float(v) for v in (row.get("canary_before_s"), row.get("canary_after_s")) if v and v > 0]


def noise(values: Sequence[float]) -> float:
    """The run's own canary noise as a fraction: ``NOISE_K`` robust standard deviations
    (1.4826 x the median absolute deviation) of the log readings, never below ``FLOOR``."""
    if len(values) < MIN_READINGS:
        return FLOOR
    logs = [math.log(v) for v in values]
    centre = statistics.median(logs)
    mad = statistics.median(abs(x - centre) for x in logs)
    return max(FLOOR, math.exp(NOISE_K * 1.4826 * mad) - 1.0)


def run_canary(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The canary of a set of processes (one run on one machine): the median of their
    readings and its noise; None where none recorded one."""
    values = [v for r in rows for v in readings(r)]
    if not values:
        return None
    return {"s": float(statistics.median(values)), "noise": noise(values), "readings": len(values)}


def judge(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Copies of ``rows`` with ``canary_ratio`` (the process's reading furthest from its
    run's canary, as a ratio to it), ``canary_noise`` and ``slowed`` (off by more than the
    noise, either way: a process faster than its run's canary ran on a machine in another
    state too). Runs and machines are judged apart; a row without readings is not flagged."""
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
            worst = max(mine, key=lambda v: abs(math.log(v / base["s"])))
            ratio = worst / base["s"]
            r.update(canary_ratio=ratio, canary_noise=base["noise"],
                     slowed=bool(abs(math.log(ratio)) > math.log1p(base["noise"])))
    return rows


def differ(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Whether two runs' canaries (``run_canary``) differ by more than their noise: None
    when they agree or either has none; else the ratio B / A and the bound it passed."""
    if not a or not b:
        return None
    ratio = b["s"] / a["s"]
    bound = max(a["noise"], b["noise"])
    if abs(math.log(ratio)) <= math.log1p(bound):
        return None
    return {"ratio": ratio, "bound": bound, "a_s": a["s"], "b_s": b["s"]}
