"""Timing of one callable: first call, second call, warm-up, steady state.

The clock and the synchronisation are injected (``clock``, ``sync``), so the
repetition logic is tested with a fake clock and no device. ``sync`` receives the
list of outputs produced inside the timed region and must block until all of them
are computed; the clock is read only after it returns.

The steady state is timed in one of two modes, the run's (MeasureConfig.timing), so that
every process of both sides of a comparison is timed alike:

* ``throughput`` (the default; torch.utils.benchmark's blocked autorange): blocks of
  ``number`` back-to-back calls, one synchronisation per block, ``number`` chosen so that a
  block lasts at least ``min_block_s`` and is at least 2, so that every block issues a call
  while the one before runs, however long a call is. Each stored sample is the block time
  divided by ``number``;
* ``latency``: one call per sample, synchronised on its own (a flush of the caches between
  calls needs it).

Before, a call under ``min_block_s`` was timed in blocks and a longer one alone, so the two
sides of one comparison (or two processes of one cell, around the line) could be timed in
different modes. Sampling stops once ``min_samples`` samples (blocks, in throughput mode) and
``min_time_s`` are reached and every readout has what it needs, or at ``max_samples`` samples.

Readouts (``Readout``) take their figures from the same calls: a device's clock recorded
around each sample's calls, the host's time to issue the first call of each sample (the
launch queue is empty there), an energy counter read between samples.

Each output is released before the next call, as a loop that consumes its results
would (and as torch.utils.benchmark does). Holding the previous output alive changes
what is measured: with glibc malloc, PyTorch CPU eager mha (small) ran in 11.9 ms when
the caller kept the last output and 13.8 ms when it dropped it, because freeing
everything lets malloc trim the heap and the next call faults its buffers back in.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from stackwars.records import TIMING_MODES

Clock = Callable[[], float]
Sync = Callable[[Sequence[Any]], None]


# how each mode times a sample, in words (the record and the verdict row say which)
MODE_WORDS = {
    "throughput": "blocks of at least 2 back-to-back calls and min_block_s, one synchronisation a block",
    "latency": "one call a sample, synchronised on its own",
}


@dataclass(frozen=True)
class SteadyState:
    samples: tuple[float, ...]  # seconds per call
    number: int  # calls per sample
    total_s: float  # wall time spent sampling
    mode: str = "throughput"  # how the samples were timed (TIMING_MODES)
    # the host clock from each sample's start to its first call's return (``issue=True``): the
    # launch queue is empty there (a synchronisation ends every sample), so it is the host's time
    # to issue one call, read from the timed calls themselves
    issue: tuple[float, ...] = ()
    started: float = 0.0  # the clock when the first sample started


class Readout:
    """A figure read beside the host clock from the steady window's own calls: a device's clock
    (events recorded around each sample's calls), an energy counter read between samples. Each
    hook runs where its comment says; every hook but ``end_calls`` is outside the timed region."""

    def begin_sample(self) -> None:
        """Right before a sample's clock starts (untimed)."""

    def end_calls(self) -> None:
        """After the sample's last call returns and before its synchronisation: inside the timed
        region, so it must cost a few microseconds at most (a CUDA event's record)."""

    def after_sample(self, now: float, calls: int) -> None:
        """After the sample's synchronisation and clock read (untimed): ``now`` the clock,
        ``calls`` the window's calls so far."""

    def satisfied(self, now: float) -> bool:
        """Whether the readout has what it needs: the window does not end before (an energy
        counter needs several of its update periods)."""
        return True


class Timer:
    """``between``: run (and synchronised by itself) before every timed call, outside the
    clock: a cache flush (harness/flush.py). With it every call is its own sample."""

    def __init__(self, fn: Callable[[], Any], sync: Sync, clock: Clock = time.perf_counter,
                 between: Callable[[], None] | None = None):
        self._fn = fn
        self._sync = sync
        self._clock = clock
        self._between = between

    def once(self, between: bool = True) -> tuple[float, Any]:
        """Time one call, synchronised on its whole output (``between=False``: without the flush
        before it, where the call is read for something else than its time: memory)."""
        fn, sync, clock = self._fn, self._sync, self._clock
        if between and self._between is not None:
            self._between()
        t0 = clock()
        out = fn()
        sync((out,))
        t1 = clock()
        return t1 - t0, out

    def warmup(self, calls: int) -> list[float]:
        """Not part of the steady state, but recorded for inspection (outputs dropped)."""
        return [self.once()[0] for _ in range(calls)]

    @staticmethod
    def choose_number(estimate_s: float, min_block_s: float, max_number: int = 10_000) -> int:
        """Calls per block so that one block lasts at least ``min_block_s``."""
        if estimate_s <= 0:
            return max_number
        if estimate_s >= min_block_s:
            return 1
        ratio = min_block_s / estimate_s  # compared before ceil: a huge ratio is inf, which ceil refuses
        return max_number if ratio >= max_number else max(1, math.ceil(ratio))

    @staticmethod
    def calls_per_sample(mode: str, estimate_s: float, min_block_s: float) -> int:
        """A sample's calls in ``mode``: one in latency mode; in throughput mode enough for the
        block to last ``min_block_s``, and at least two, so that every block of every cell
        issues a call while the one before runs (a long call is never timed alone while a short
        one is timed in blocks: the two sides of a comparison are timed alike)."""
        if mode not in TIMING_MODES:
            raise ValueError(f"timing mode {mode!r}; allowed: {', '.join(TIMING_MODES)}")
        return 1 if mode == "latency" else max(2, Timer.choose_number(estimate_s, min_block_s))

    def steady(self, min_samples: int, min_time_s: float, max_samples: int, number: int = 1,
               readouts: Sequence[Readout] = (), issue: bool = False, mode: str | None = None) -> SteadyState:
        """Samples until ``min_samples`` and ``min_time_s`` are both reached and every readout is
        satisfied, or ``max_samples``. ``readouts`` and ``issue`` read their figures from these
        same calls (see ``Readout``)."""
        if min_samples < 1 or max_samples < min_samples or number < 1:
            raise ValueError("need 1 <= min_samples <= max_samples and number >= 1")
        fn, sync, clock, between = self._fn, self._sync, self._clock, self._between
        if between is not None and number != 1:
            raise ValueError("a flush between calls needs one call per sample (number=1)")
        mode = mode or ("latency" if number == 1 else "throughput")
        if readouts or issue:
            return self._steady_read(min_samples, min_time_s, max_samples, number, list(readouts), issue, mode)
        samples: list[float] = []
        append = samples.append
        start = clock()
        if number == 1:
            while True:
                if between is not None:
                    between()
                t0 = clock()
                out = fn()
                sync((out,))
                t1 = clock()
                out = None  # released before the next call
                append(t1 - t0)
                n = len(samples)
                if (n >= min_samples and t1 - start >= min_time_s) or n >= max_samples:
                    break
        else:
            calls = range(number)
            while True:
                t0 = clock()
                outs = [fn() for _ in calls]
                sync(outs)
                t1 = clock()
                outs = None
                append((t1 - t0) / number)
                n = len(samples)
                if (n >= min_samples and t1 - start >= min_time_s) or n >= max_samples:
                    break
        return SteadyState(tuple(samples), number, clock() - start, mode, (), start)

    def _steady_read(self, min_samples: int, min_time_s: float, max_samples: int, number: int,
                     readouts: list[Readout], issue: bool, mode: str) -> SteadyState:
        """The steady loop with readouts: the same calls, the same synchronisation, one more
        clock read at the first call's return (``issue``) and the readouts' hooks."""
        fn, sync, clock, between = self._fn, self._sync, self._clock, self._between
        samples: list[float] = []
        issued: list[float] = []
        rest = range(number - 1)
        start = clock()
        while True:
            if between is not None:
                between()
            for r in readouts:
                r.begin_sample()
            t0 = clock()
            outs = [fn()]
            ti = clock() if issue else 0.0
            outs += [fn() for _ in rest]
            for r in readouts:
                r.end_calls()
            sync(outs)
            t1 = clock()
            outs = None
            samples.append((t1 - t0) / number)
            if issue:
                issued.append(ti - t0)
            n = len(samples)
            for r in readouts:
                r.after_sample(t1, n * number)
            if n >= max_samples or (n >= min_samples and t1 - start >= min_time_s
                                    and all(r.satisfied(t1) for r in readouts)):
                break
        return SteadyState(tuple(samples), number, clock() - start, mode, tuple(issued), start)

    def warm_then_steady(self, warmup: int, min_samples: int, min_time_s: float, max_samples: int,
                         min_block_s: float, fallback_estimate_s: float,
                         before_steady: Callable[[], Sequence[Readout] | None] | None = None,
                         mode: str = "throughput", readouts: Sequence[Readout] = (),
                         issue: bool = False) -> tuple[list[float], SteadyState]:
        """Warm-up calls, then the steady state in ``mode``: blocks sized from the warm-up median
        (``fallback_estimate_s``, e.g. the second call, when there is no warm-up) in throughput
        mode, single calls in latency mode. ``min_samples`` counts samples, each one block, whatever
        the block's size: a window has at least ``min_samples`` timed samples in either mode, so its
        spread is read from as many values on a fast machine as on a slow one (before, it counted
        calls, and a block of ``number >= min_samples`` calls made a steady state of one sample on a
        fast CPU under load). ``before_steady`` runs between the two, untimed (e.g. to open a
        monitoring window); readouts it returns are read beside the samples, with ``readouts``."""
        warm = self.warmup(warmup)
        estimate = statistics.median(warm) if warm else fallback_estimate_s
        # a flush between calls cannot sit inside a block: every call is then its own sample
        if self._between is not None and mode != "latency":
            raise ValueError("a flush between calls times every call on its own: latency mode")
        number = self.calls_per_sample(mode, estimate, min_block_s)
        opened = before_steady() if before_steady is not None else None
        readouts = [*readouts, *(opened or ())]
        return warm, self.steady(min_samples, min_time_s, max_samples, number, readouts, issue, mode)
