"""What the host takes to issue a call, and the GPU's clocks while it runs: the evidence that
tells a host-bound process from a device that ran slower.

CUDA events cannot tell them apart. They span the gaps in which the device waits for the
host's next launch, so a host too slow to keep the device fed raises the event time as much as
slower kernels do. The H200 run of 2026-11-26 (`results/gpu-h200-2026-11-26b/`) had exactly
this: resnet50's torch-compile processes ran at 2.0 or 3.3-3.7 ms a call, with the same program
and the same factor on the events.

Two readings settle it, taken after the steady state and the CUDA-event window, outside every
timed window:

* **the issue time**: each of ``ISSUE_SAMPLES`` calls is made right after a synchronisation,
  and the host clock is read when the call returns, before synchronising on its output. The
  launch queue is empty when each call starts, so the time is the host's alone: Python, the
  framework's dispatch, the launches. There is no back-pressure from a queue that a run of
  unsynchronised calls would fill. An issue time close to the call's wall time means the device
  waited on the host. One well under it means the host ran ahead and the device's own work set
  the pace.
* **the GPU's clocks** (NVML), read once while the last of those calls runs on the device: the
  SM and memory clocks against the SM's maximum, the temperature, the board power, and the
  reasons NVML gives for holding the clocks down (power cap, thermal or hardware slowdown,
  ...). A slower process whose SM clock was lower ran on a slowed device.

report/spread.py reads both (``issue_median_s``, ``gpu_sm_mhz``, ``gpu_clock_reasons`` in
the row).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from stackwars.harness.energy import cell_gpu, nvml_handle

ISSUE_SAMPLES = 20  # single calls timed to their return, at most
ISSUE_MIN_SAMPLES = 5  # and at least, however long a call is
ISSUE_WINDOW_S = 0.1  # the calls stop at ISSUE_MIN_SAMPLES once this is spent (llama3-8b's 52 ms calls: 5)

# NVML's clocks-event (formerly "throttle") reason bits, as nvml.h defines them
CLOCK_REASONS = {
    0x1: "idle",
    0x2: "application clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
    0x100: "display clock setting",
}
# the reasons that slow a working GPU; "idle" and the settings are not the device being held down
SLOWING = frozenset({"software power cap", "hardware slowdown", "software thermal slowdown",
                     "hardware thermal slowdown", "hardware power brake"})


def reasons(mask: int) -> list[str]:
    """NVML's reason bitmask in words (an unknown bit by its value)."""
    named = [name for bit, name in CLOCK_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_REASONS)
    return named + ([f"unknown reason bits {unknown:#x}"] if unknown else [])


def gpu_clocks(gpu: str | None = None) -> dict[str, Any]:
    """The cell's GPU's clocks now, from NVML, or why there are none (``why``). ``gpu``: an
    index as NVML numbers them, or a UUID; by default the first of ``CUDA_VISIBLE_DEVICES``, else 0."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - no library, no driver
        return {"why": f"NVML cannot be initialised ({type(exc).__name__}: {exc})"}
    try:
        handle = nvml_handle(pynvml, cell_gpu(gpu))
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
    except Exception as exc:  # noqa: BLE001 - a driver that does not answer: no figure, and why
        return {"why": f"NVML gave no clocks ({type(exc).__name__}: {exc})"}
    finally:
        pynvml.nvmlShutdown()


def samples_for(call_s: float) -> int:
    """How many calls to time for a call of ``call_s`` (its steady-state median)."""
    fit = int(ISSUE_WINDOW_S / call_s) if call_s > 0 else ISSUE_SAMPLES
    return max(ISSUE_MIN_SAMPLES, min(ISSUE_SAMPLES, fit))


def issue_times(call: Callable[[], Any], sync: Callable[[Sequence[Any]], None], samples: int = ISSUE_SAMPLES,
                clock: Callable[[], float] = time.perf_counter,
                while_busy: Callable[[], dict[str, Any]] | None = None) -> dict[str, Any]:
    """``samples`` calls, each after a synchronisation, each timed from its start to its return
    (not to its output's completion); ``while_busy`` runs once after the last call returns and
    before its output is waited for (the device still working on it), and its answer is kept
    as ``clocks``."""
    times: list[float] = []
    clocks = None
    for i in range(samples):
        t0 = clock()
        out = call()
        t1 = clock()
        if while_busy is not None and i == samples - 1:
            clocks = while_busy()
        sync([out])
        out = None
        times.append(t1 - t0)
    record: dict[str, Any] = {"samples": times, "clock": "host clock to the call's return, after a sync"}
    if while_busy is not None:
        record["clocks"] = clocks
    return record
