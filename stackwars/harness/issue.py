"""What the host takes to issue a call, and the GPU's clocks while it runs: the evidence that
tells a host-bound process from a device that ran slower.

CUDA events cannot tell them apart. They span the gaps in which the device waits for the
host's next launch, so a host too slow to keep the device fed raises the event time as much as
slower kernels do. The H200 run of 2026-11-26 (`results/gpu-h200-2026-11-26b/`) had exactly
this: resnet50's torch-compile processes ran at 2.0 or 3.3-3.7 ms a call, with the same program
and the same factor on the events.

Two readings settle it, both from the steady window's own calls (harness/timer.py's readouts):

* **the issue time**: every timed sample starts after a synchronisation, so its first call
  starts with an empty launch queue; the host clock is read when that call returns, before
  anything waits on it. The time is the host's alone: Python, the framework's dispatch, the
  launches, with no back-pressure from a queue that a run of unsynchronised calls would fill.
  An issue time close to the call's wall time means the device waited on the host. One well
  under it means the host ran ahead and the device's own work set the pace.
* **the GPU's clocks** (NVML, ``WindowClocks``), read every 0.1 s between samples, outside the
  clock: the SM and memory clocks against the SM's maximum, the temperature, the board power,
  and the reasons NVML gives for holding the clocks down (power cap, thermal or hardware
  slowdown, ...). A slower process whose SM clock was lower ran on a slowed device; a note
  says a clock changed only where NVML read it change.

Before, both came from calls of their own after the steady window, and a process that changed
speed between windows made them disagree with its wall time (an H100 mha process: wall 174.8 us,
issue 296.6 us). Now they are read from the calls the wall time comes from.

verdict/spread.py reads both (``issue_median_s``, ``gpu_sm_mhz``, ``gpu_clock_reasons`` in
the row).
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any, Callable, Mapping, Sequence

from stackwars.harness.energy import cell_gpu, nvml_handle
from stackwars.harness.timer import Readout
from stackwars.records import CLOCK_REASONS, SLOWING  # noqa: F401 - the words a record stores, read by the report too

MARK_EVERY_S = 0.1  # the GPU's clocks read this often through the steady window



def reasons(mask: int) -> list[str]:
    """NVML's reason bitmask in words (an unknown bit by its value)."""
    named = [name for bit, name in CLOCK_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_REASONS)
    return named + ([f"unknown reason bits {unknown:#x}"] if unknown else [])


def _read(pynvml: Any, handle: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "sm_mhz": int(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
        "sm_max_mhz": int(pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)),
        "mem_mhz": int(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM)),
    }
    for key, read in (("temperature_c", lambda: pynvml.nvmlDeviceGetTemperature(handle, 0)),  # 0: the GPU die
                      ("power_w", lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3)):
        try:
            out[key] = read()
        except Exception:  # noqa: BLE001 - not every board reports every sensor
            out[key] = None
    read_reasons = (getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                    or getattr(pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
    try:
        mask = int(read_reasons(handle)) if read_reasons else None
    except Exception:  # noqa: BLE001
        mask = None
    out["reasons"] = reasons(mask) if mask is not None else None
    return out


def _open(gpu: str | None) -> tuple[Any, Any, str | None]:
    """NVML initialised and the cell's GPU's handle, or the reason there is none."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - no library, no driver
        return None, None, f"NVML cannot be initialised ({type(exc).__name__}: {exc})"
    try:
        return pynvml, nvml_handle(pynvml, cell_gpu(gpu)), None
    except Exception as exc:  # noqa: BLE001
        pynvml.nvmlShutdown()
        return None, None, f"NVML gave no clocks ({type(exc).__name__}: {exc})"


def gpu_clocks(gpu: str | None = None) -> dict[str, Any]:
    """The cell's GPU's clocks now, from NVML, or why there are none (``why``). ``gpu``: an
    index as NVML numbers them, or a UUID; by default the first of ``CUDA_VISIBLE_DEVICES``, else 0."""
    pynvml, handle, why = _open(gpu)
    if why:
        return {"why": why}
    try:
        return _read(pynvml, handle)
    except Exception as exc:  # noqa: BLE001 - a driver that does not answer: no figure, and why
        return {"why": f"NVML gave no clocks ({type(exc).__name__}: {exc})"}
    finally:
        pynvml.nvmlShutdown()


class WindowClocks(Readout):
    """The GPU's clocks through the steady window: NVML read every ``MARK_EVERY_S`` after a
    sample's synchronisation, outside the clock, from one NVML session. ``record`` keeps every
    mark's SM clock and the reasons NVML gave; a clock that changed is one NVML read change."""

    def __init__(self, gpu: str | None = None, clock: Callable[[], float] = time.perf_counter):
        self.clock = clock
        self.pynvml, self.handle, self.why = _open(gpu)
        self.marks: list[dict[str, Any]] = []
        self.next = -math.inf

    def after_sample(self, now: float, calls: int) -> None:
        if self.why or now < self.next:
            return
        self.next = now + MARK_EVERY_S
        try:
            self.marks.append({"calls": calls, **_read(self.pynvml, self.handle)})
        except Exception as exc:  # noqa: BLE001 - a driver that stops answering: the marks so far, and why
            self.why = f"NVML gave no clocks ({type(exc).__name__}: {exc})"

    def record(self) -> dict[str, Any]:
        if self.pynvml is not None:
            self.pynvml.nvmlShutdown()
            self.pynvml = None
        if not self.marks:
            return {"why": self.why or "the window ended before its first mark", "window": "steady"}
        sm = [m["sm_mhz"] for m in self.marks]
        seen = list(dict.fromkeys(r for m in self.marks for r in (m.get("reasons") or ())))
        return {"window": "steady", "marks": len(self.marks), "every_s": MARK_EVERY_S,
                "read": "NVML, after a sample's synchronisation (outside the clock)",
                "sm_mhz": int(statistics.median(sm)), "sm_mhz_range": [min(sm), max(sm)],
                "sm_max_mhz": self.marks[0]["sm_max_mhz"], "mem_mhz": int(statistics.median(m["mem_mhz"] for m in self.marks)),
                "temperature_c": self.marks[-1].get("temperature_c"), "power_w": self.marks[-1].get("power_w"),
                "reasons": seen, "sm_mhz_marks": sm}


def issue_record(samples: Sequence[float], clocks: Mapping[str, Any] | None) -> dict[str, Any]:
    """The issue-time readout of a steady window: each sample's first call, from its start to its
    return (harness/timer.py), and the window's GPU clocks."""
    record: dict[str, Any] = {"samples": list(samples), "window": "steady",
                              "clock": "host clock from a sample's start to its first call's return (each sample "
                                       "starts after a synchronisation: the launch queue is empty)"}
    if clocks is not None:
        record["clocks"] = dict(clocks)
    return record
