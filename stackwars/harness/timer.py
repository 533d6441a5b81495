"""Timing of one callable: first call, second call, warm-up, steady state.

The clock and the synchronisation are injected (``clock``, ``sync``), so the
repetition logic is tested with a fake clock and no device. ``sync`` receives the
list of outputs produced inside the timed region and must block until all of them
are computed; the clock is read only after it returns.

Steady state follows torch.utils.benchmark's blocked autorange: calls shorter than
``min_block_s`` are timed in blocks of ``number`` calls (one synchronisation per
block) so the clock's own cost stays negligible; each stored sample is the block
time divided by ``number``. Sampling stops once both ``min_samples`` and
``min_time_s`` are reached, or at ``max_samples``.

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

Clock = Callable[[], float]
Sync = Callable[[Sequence[Any]], None]


@dataclass(frozen=True)
class SteadyState:
    samples: tuple[float, ...]  # seconds per call
    number: int  # calls per sample
    total_s: float  # wall time spent sampling


class Timer:
    """``between``: run (and synchronised by itself) before every timed call, outside the
    clock: a cache flush (harness/flush.py). With it every call is its own sample."""

    def __init__(self, fn: Callable[[], Any], sync: Sync, clock: Clock = time.perf_counter,
                 between: Callable[[], None] | None = None):
        self._fn = fn
        self._sync = sync
        self._clock = clock
        self._between = between

    def once(self) -> tuple[float, Any]:
        """Time one call, synchronised on its whole output."""
        fn, sync, clock = self._fn, self._sync, self._clock
        if self._between is not None:
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
        return max(1, min(max_number, math.ceil(min_block_s / estimate_s)))

    def steady(self, min_samples: int, min_time_s: float, max_samples: int, number: int = 1) -> SteadyState:
        if min_samples < 1 or max_samples < min_samples or number < 1:
            raise ValueError("need 1 <= min_samples <= max_samples and number >= 1")
        fn, sync, clock, between = self._fn, self._sync, self._clock, self._between
        if between is not None and number != 1:
            raise ValueError("a flush between calls needs one call per sample (number=1)")
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
        return SteadyState(tuple(samples), number, clock() - start)

    def warm_then_steady(self, warmup: int, min_samples: int, min_time_s: float, max_samples: int,
                         min_block_s: float, fallback_estimate_s: float,
                         before_steady: Callable[[], Any] | None = None) -> tuple[list[float], SteadyState]:
        """Warm-up calls, then the steady state in blocks sized from the warm-up median
        (``fallback_estimate_s``, e.g. the second call, when there is no warm-up).
        ``before_steady`` runs between the two, untimed (e.g. to open a monitoring window)."""
        warm = self.warmup(warmup)
        estimate = statistics.median(warm) if warm else fallback_estimate_s
        # a flush between calls cannot sit inside a block: every call is then its own sample
        number = 1 if self._between is not None else self.choose_number(estimate, min_block_s)
        if before_steady is not None:
            before_steady()
        return warm, self.steady(min_samples, min_time_s, max_samples, number)
