"""Was anything else running on the cell's CPUs while it was timed?

A CPU benchmark pinned to N cores measures N cores only if nothing else runs there. On a
2-core machine one other busy process (a compiler, a test run, another benchmark) slows
PyTorch's OpenMP GEMMs several-fold: every parallel region waits for its descheduled
thread. Such a cell's samples are consistent (the IQR stays small), so the noise flag
cannot see it. This module measures it directly: over a window, the CPU time the kernel
counted as busy on the worker's CPUs (``/proc/stat`` through psutil) minus the CPU time of
the worker process and its descendants (Inductor's compile workers are the cell's own work)
is time spent by others; together with the hypervisor's steal
time it is stated as a fraction of the window's CPU capacity, and a cell above
``THRESHOLD`` is flagged ``contended``.

Kernel tick accounting has a 10 ms grain per CPU, so a window shorter than ``MIN_WINDOW_S``
is reported but never flagged, and no window is flagged on what the ticks alone can make: each
counter read at both ends of the window (every CPU's busy time, the worker's user and system
time) may be off by a tick, so others' share is judged beyond that many ticks (``tick_margin_s``:
40 ms for 2 CPUs). Without it, 4 ticks of anything in a 0.25 s window of 2 CPUs (8%) flagged a
process busy: 5 of 26 processes of an idle 2-CPU VM's run of tiny cells, each replaced by another.
"""

from __future__ import annotations

import os
import time
from typing import Any

import psutil

from stackwars.stats import CONTENTION_MIN_WINDOW_S, CONTENTION_THRESHOLD

THRESHOLD = CONTENTION_THRESHOLD  # others' CPU time above this share of the window's CPU capacity flags the cell
MIN_WINDOW_S = CONTENTION_MIN_WINDOW_S


def _tick_s() -> float:
    """The kernel's accounting tick (USER_HZ: /proc/stat and a process's CPU times count in it)."""
    try:
        return 1.0 / os.sysconf("SC_CLK_TCK")
    except (AttributeError, ValueError, OSError):
        return 0.01


TICK_S = _tick_s()


def tick_margin_s(cpus: int) -> float:
    """What the counters' grain alone can add to others' CPU time over a window: a tick for each
    CPU's busy time and for the worker's user and system time, each a difference of two readings."""
    return TICK_S * (cpus + 2)


def _cpus() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(psutil.cpu_count() or 1))


def _busy_and_steal(cpus: list[int]) -> tuple[float, float]:
    per_cpu = psutil.cpu_times(percpu=True)
    busy = steal = 0.0
    for i in cpus:
        if i >= len(per_cpu):
            continue
        t = per_cpu[i]
        # user includes guest time on Linux; idle, iowait and steal are not this VM's work
        busy += t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)
        steal += getattr(t, "steal", 0.0)
    return busy, steal


def _own(process: psutil.Process) -> tuple[float, float]:
    """CPU time of the worker, and of everything it started: its live descendants (Inductor's
    compile workers, a data loader) and the children it has already waited for. Both are the
    cell's own work, not other people's load; the second is kept apart because it is not the
    measured program either (a compile pool starting up beside the timed calls)."""
    def children(t) -> float:  # waited-for children's (a reaped process is listed nowhere else)
        return getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)

    t = process.cpu_times()
    descendants = children(t)
    for child in process.children(recursive=True):
        try:
            c = child.cpu_times()
            descendants += c.user + c.system + children(c)
        except psutil.Error:  # exited between listing and reading: counted once reaped
            pass
    return t.user + t.system, descendants


SETTLE_POLL_S = 0.1  # how often the descendants' CPU time is read while waiting for them
SETTLE_QUIET_SHARE = 0.2  # of one CPU over a poll: quiet (two 10 ms ticks in 0.1 s; a busy child reads 10)
SETTLE_MAX_S = 8.0  # the longest wait; a cell whose children are still busy then is timed anyway, and says so


def settle_descendants(process: psutil.Process | None = None, max_s: float = SETTLE_MAX_S,
                       poll_s: float = SETTLE_POLL_S, quiet_share: float = SETTLE_QUIET_SHARE) -> dict[str, Any]:
    """Wait until the worker's own child processes are quiet before its calls are timed.

    Inductor starts its compile pool (a sidecar interpreter that imports torch, then a worker
    per CPU) at a process's first compile, even when a warm cache leaves nothing to compile. A
    warm torch-compile process is timed seconds later, possibly while that pool is still
    starting. The pool is the cell's own work, so contention never flags it. It is not the
    timed program either: in a long-running job it sits idle. A worker with no child processes
    (every JAX cell, every cell on a host without Triton) waits for nothing."""
    process = process or psutil.Process()
    try:
        n = len(process.children(recursive=True))
    except psutil.Error:
        n = 0
    if not n:
        return {"children": 0, "waited_s": 0.0, "quiet": True}
    t0 = time.perf_counter()
    first = last = _own(process)[1]
    while True:
        time.sleep(poll_s)
        now = _own(process)[1]
        waited = time.perf_counter() - t0
        quiet = now - last <= quiet_share * poll_s + 1e-9
        last = now
        if quiet or waited >= max_s:
            return {"children": n, "waited_s": waited, "quiet": quiet, "descendants_cpu_s": now - first,
                    "max_s": max_s}


class ForeignLoad:
    """Start it before a window, ``stop()`` after: returns what others did meanwhile."""

    def __init__(self, process: psutil.Process | None = None):
        self.process = process or psutil.Process()
        self.cpus = _cpus()
        self._start: tuple[float, float, float, float] | None = None

    def start(self) -> "ForeignLoad":
        busy, steal = _busy_and_steal(self.cpus)
        self._start = (time.perf_counter(), busy, steal, *_own(self.process))
        return self

    def stop(self) -> dict[str, Any]:
        if self._start is None:
            raise RuntimeError("ForeignLoad.stop() before start()")
        t0, busy0, steal0, self0, descendants0 = self._start
        busy, steal = _busy_and_steal(self.cpus)
        wall = time.perf_counter() - t0
        mine, descendants = _own(self.process)
        descendants = max(0.0, descendants - descendants0)
        own = (mine - self0) + descendants
        # the worker's own threads may run outside its CPUs (threads started before pinning):
        # that only lowers the estimate, never raises it
        foreign = max(0.0, (busy - busy0) - own)
        steal_s = max(0.0, steal - steal0)
        capacity = wall * len(self.cpus)
        fraction = (foreign + steal_s) / capacity if capacity > 0 else 0.0
        margin = tick_margin_s(len(self.cpus))
        # judged beyond what the ticks alone can make (the fraction itself is reported as read)
        beyond = (foreign + steal_s - margin) / capacity if capacity > 0 else 0.0
        return {"window_s": wall, "cpus": len(self.cpus), "own_cpu_s": own, "foreign_cpu_s": foreign,
                # the cell's own child processes (Inductor's compile pool): its work, not the timed program's
                "descendants_cpu_s": descendants,
                "descendants_fraction": descendants / capacity if capacity > 0 else 0.0,
                "steal_s": steal_s, "fraction": fraction, "threshold": THRESHOLD, "tick_margin_s": margin,
                # a window under MIN_WINDOW_S cannot be judged (verdict/gate.py: never clean)
                "judged": bool(wall >= MIN_WINDOW_S),
                "contended": bool(wall >= MIN_WINDOW_S and beyond > THRESHOLD)}
