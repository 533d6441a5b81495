"""The steady window: every figure of a cell's steady state, from the same calls.

A cell's steady state is one window of timed samples (harness/timer.py) in the run's timing
mode. Every figure the verdict and its notes read about that state is taken from the window's
own calls, never from calls of its own before or after it:

* **wall time**: the host clock around each sample (the samples);
* **device time** (CUDA, where the framework has device events: PyTorch): an event pair around
  each sample's calls (``DeviceClock``), the same calls the host clock times;
* **host issue time** (CUDA): each sample's first call from the sample's start to its return
  (the launch queue is empty after the previous sample's synchronisation), read by the timer
  (harness/issue.py says why it tells a host-bound process from a slowed device);
* **the GPU's clocks** (CUDA): NVML every 0.1 s between samples (issue.WindowClocks);
* **energy**: the device's counter read after every sample, between its steps
  (energy.WindowEnergy); the window goes on until the counter's window is long enough;
* **contention**: others' CPU time on the worker's CPUs over the window (harness/contention.py).

Every readout's record names its window (``"window": "steady"``) and which of its calls it
read; ``Window.record`` describes the window itself (mode, calls a sample, samples, span).

Before, the CUDA-event time, the issue time and the energy each came from a window of their own
after the steady one. On the H100 (2026-11-27) a process that changed speed between windows then
read, for one mha torch-compile process, a wall median of 174.8 us against 311.9 us of device
time and 296.6 us of issue time, and the notes drew conclusions from figures of different
moments. Now a process's figures disagree only where its calls did.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Callable

from stackwars.harness.timer import MODE_WORDS, Readout, SteadyState

WINDOW = "steady"  # the name every readout of the steady window carries


class DeviceClock(Readout):
    """The device's own clock around each sample's calls: ``make()`` gives one sample's events
    (a backend's ``device_events``: ``start()`` before the sample's clock starts, ``end()`` after
    its last call and before its synchronisation, ``seconds()`` after it). Per call, as the
    samples are."""

    def __init__(self, make: Callable[[], Any]):
        self.make = make
        self.pending: Any = None
        self.calls = 0
        self.samples: list[float] = []

    def begin_sample(self) -> None:
        self.pending = self.make()
        self.pending.start()

    def end_calls(self) -> None:
        self.pending.end()

    def after_sample(self, now: float, calls: int) -> None:
        self.samples.append(self.pending.seconds() / (calls - self.calls))
        self.calls, self.pending = calls, None

    def record(self, number: int) -> dict[str, Any]:
        return {"available": True, "samples": self.samples, "number": number, "window": WINDOW,
                "clock": "device events around each timed sample's calls (the start event recorded before the "
                         "sample's clock starts, the end event after its last call, before its synchronisation)"}


@dataclass
class Window:
    """What the steady phase measured: the warm-up calls, the steady state and every readout's
    record, each naming this window."""

    warm: list[float]
    steady: SteadyState
    readouts: dict[str, dict[str, Any]] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The window itself, as the record keeps it (settings["window"])."""
        s = self.steady
        return {"name": WINDOW, "mode": s.mode, "how": MODE_WORDS[s.mode], "calls_per_sample": s.number,
                "samples": len(s.samples), "calls": len(s.samples) * s.number, "span_s": s.total_s,
                "readouts": sorted(k for k, r in self.readouts.items()
                                   if not r.get("why") and r.get("available") is not False)}

    @property
    def median_s(self) -> float:
        return statistics.median(self.steady.samples)
