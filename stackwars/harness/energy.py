"""Energy per call: a cumulative energy counter read at the ends of a synchronised window.

On CUDA the counter is NVML's total energy (``nvmlDeviceGetTotalEnergyConsumption``,
millijoules since the driver loaded, Volta and newer); on a CPU host, RAPL's powercap files
(``/sys/class/powercap/intel-rapl:N/energy_uj``, microjoules, per package, with the package's
DRAM zone where there is one) where they can be read. Either covers the whole device (every SM
of the GPU, every core of the package), not our process: the record says so, and on a GPU
another process seen in NVML's process list voids the figure (``voided``), as contention voids
a CPU time.

The counter moves in steps: NVML's every 20-100 ms, RAPL's about every millisecond. A window
that began and ended between steps would read the step, not the calls. So the window:

1. starts on a step: the second step the counter takes (the time since the first is its
   update period, measured);
2. is at least ``WINDOW_PERIODS`` update periods long and at least the asked-for length
   (lengthened, and the record says so, where the asked-for one was shorter);
3. ends on a step too: the first one past that length.

Joules per call = the energy between the two steps / the calls made between them; the mean
power = that energy / the window's time. Every ``TRACE_EVERY_S`` of the window a mark keeps
the calls made so far, the counter's reading and, on a GPU, NVML's SM clock (``trace``): the
window is a second of the cell's calls, and a process that ran at two speeds shows whether
its calls slowed with the clock (a slowed device) or without it (a device waiting for the
host), as the H200's resnet50 torch-compile processes did on 2026-11-26. A counter that does not step within
``STEP_WAIT_S`` gives no figure and says why.

The window is the steady window itself (``WindowEnergy``, a readout of harness/timer.py): the
counter is read after each timed sample, outside the clock, and the steady window lasts until
the energy window is long enough. Before, the energy came from a window of its own after the
steady one, and on the H100 a process's call rate differed between the two (gpt2 torch-compile
107-189 calls a second in its energy window, 186 in its timed one): an energy ratio then
compared host speeds too. Now both figures come from the same calls.
"""

from __future__ import annotations

import glob
import math
import os
import time
from dataclasses import dataclass
from typing import Any, Callable

from stackwars.harness.timer import Readout

WINDOW_PERIODS = 10  # the window spans at least this many counter updates: a step is <= 1/10 of it
MIN_WINDOW_S = {"cuda": 1.0, "cpu": 0.25}  # the least window asked for, by device (NVML steps slowly)
# a counter that does not move for this long while the device works is stuck or too coarse: no
# figure (so a window is never lengthened past WINDOW_PERIODS of this: 10 s)
STEP_WAIT_S = 1.0
TRACE_EVERY_S = 0.1  # a mark of the window's progress this often (NVML's counter steps about as often)


@dataclass
class Counter:
    """A cumulative energy counter: ``read()`` in joules (monotonic, wrap-around handled by the
    reader), what it covers and where it comes from."""

    read: Callable[[], float]
    source: str  # "nvml" or "rapl"
    scope: str  # what the energy is of, in words
    close: Callable[[], None] = lambda: None
    sm_mhz: Callable[[], int] | None = None  # the GPU's SM clock now, where the counter is a GPU's


def cell_gpu(gpu: str | None = None) -> str:
    """The cell's GPU as NVML names it: ``gpu`` (an index or a UUID), else the first of
    ``CUDA_VISIBLE_DEVICES``, else 0."""
    return gpu or (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip()


def nvml_handle(pynvml: Any, gpu: str) -> Any:
    """NVML's handle of ``gpu`` (an index or a UUID)."""
    return pynvml.nvmlDeviceGetHandleByIndex(int(gpu)) if gpu.isdigit() else pynvml.nvmlDeviceGetHandleByUUID(gpu)


def nvml_counter(gpu: str | None = None) -> tuple[Counter | None, str | None]:
    """NVML's total-energy counter of the cell's GPU (``gpu``: an index as NVML numbers them, or
    a UUID; default: the first of ``CUDA_VISIBLE_DEVICES``, else 0), or why there is none."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - no library, no driver
        return None, f"NVML cannot be initialised ({type(exc).__name__}: {exc})"
    gpu = cell_gpu(gpu)
    handle = None
    try:
        handle = nvml_handle(pynvml, gpu)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)  # NotSupported before Volta, and on a MIG slice
    except Exception as exc:  # noqa: BLE001
        mig = _is_mig(pynvml, gpu, handle)
        pynvml.nvmlShutdown()
        if mig:
            return None, (f"the cell's GPU {gpu} is a MIG slice: NVML's energy counter is the whole GPU's, which "
                          f"its other slices share, so no figure is one slice's ({type(exc).__name__}: {exc})")
        return None, (f"this GPU has no total-energy counter in NVML ({type(exc).__name__}: {exc}); Volta and "
                      f"newer have one")
    return Counter(lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1e3, "nvml",
                   "the whole GPU (NVML's total-energy counter), not this process alone",
                   pynvml.nvmlShutdown, lambda: int(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))), None


def _is_mig(pynvml: Any, gpu: str, handle: Any) -> bool:
    """Whether the cell's GPU is a MIG slice (its UUID, or NVML's own word where it answers)."""
    if str(gpu).startswith("MIG-"):
        return True
    try:
        return handle is not None and bool(pynvml.nvmlDeviceIsMigDeviceHandle(handle))
    except Exception:  # noqa: BLE001 - an NVML without MIG
        return False


def foreign_gpu_processes(gpu: str | None = None, ours: set[int] | None = None) -> list[int] | None:
    """PIDs of other processes NVML sees on the GPU (compute and graphics), or None where NVML
    cannot list them. ``ours``: this process and its family, never foreign."""
    try:
        import psutil
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001
        return None
    try:
        handle = nvml_handle(pynvml, cell_gpu(gpu))
        procs = list(pynvml.nvmlDeviceGetComputeRunningProcesses(handle))
        procs += list(pynvml.nvmlDeviceGetGraphicsRunningProcesses(handle))
    except Exception:  # noqa: BLE001 - a driver that does not say: unknown, not "none"
        return None
    finally:
        pynvml.nvmlShutdown()
    if ours is None:
        me = psutil.Process()
        ours = {me.pid, *(p.pid for p in me.parents()), *(p.pid for p in me.children(recursive=True))}
    return sorted({int(p.pid) for p in procs} - ours)


RAPL_GLOB = "/sys/class/powercap/intel-rapl:[0-9]*"  # packages and their subzones (core, uncore, dram)


def rapl_counter(root: str = RAPL_GLOB) -> tuple[Counter | None, str | None]:
    """The CPU's RAPL counter: the sum over its packages and their DRAM zones (a package's
    energy covers its cores and uncore, not the memory; its core and uncore subzones are inside
    it and not added again), or why there is none."""
    found = sorted(glob.glob(root))
    packages = [z for z in found if ":" not in os.path.basename(z).split("intel-rapl:", 1)[1]]
    zones = packages + [z for z in found if z not in packages and _zone_name(z) == "dram"] if packages else []
    if not zones:
        return None, "no RAPL powercap zone on this host (/sys/class/powercap/intel-rapl:N): a VM or a CPU without it"
    files, ranges = [], []
    for z in zones:
        try:
            with open(os.path.join(z, "energy_uj")) as f:
                int(f.read())
            with open(os.path.join(z, "max_energy_range_uj")) as f:
                ranges.append(int(f.read()))
        except (OSError, ValueError) as exc:
            return None, (f"RAPL's {z}/energy_uj cannot be read ({exc.strerror if isinstance(exc, OSError) else exc}); "
                          f"since Linux 5.10 only root may read it")
        files.append(os.path.join(z, "energy_uj"))
    last = [None] * len(files)
    total = [0.0]

    def read() -> float:
        for i, path in enumerate(files):
            with open(path) as f:
                now = int(f.read())
            if last[i] is not None:
                total[0] += (now - last[i]) % (ranges[i] + 1)  # the counter wraps at its range
            last[i] = now
        return total[0] / 1e6

    read()
    dram = len(zones) - len(packages)
    return Counter(read, "rapl", f"the CPU package(s){' and DRAM' if dram else ' (no DRAM zone: memory left out)'} "
                                 f"({len(files)} RAPL zone(s)): every core, not this process alone"), None


def _zone_name(zone: str) -> str:
    try:
        with open(os.path.join(zone, "name")) as f:
            return f.read().strip()
    except OSError:
        return ""


class WindowEnergy(Readout):
    """The energy window, read from the steady window's own calls (harness/timer.py's readout
    hooks): the counter is read after every sample's synchronisation, outside the clock. The
    window of the figure lies on the counter's steps (see the module docstring): it starts at
    the counter's second step seen in the steady window (the first two give the update period)
    and ends at the first step at least ``max(min_window_s, WINDOW_PERIODS x period)`` later; the
    steady window goes on until then (``satisfied``). Joules per call = the energy between
    those two steps / the calls the samples between them made. ``record`` says which samples."""

    def __init__(self, counter: Counter, min_window_s: float, clock: Callable[[], float] = time.perf_counter):
        self.counter, self.min_window_s, self.clock = counter, min_window_s, clock
        self.opened = clock()
        self.value = counter.read()
        self.steps: list[tuple[float, float, int, int]] = []  # (clock, joules, calls, samples) at each step seen
        self.samples = 0
        self.trace: Trace | None = None
        self.mark = math.inf
        self.why: str | None = None
        self.started_unix = self.ended_unix = None

    def after_sample(self, now: float, calls: int) -> None:
        self.samples += 1
        if self.why:
            return
        value = self.counter.read()
        if value != self.value:
            self.value = value
            self.steps.append((now, value, calls, self.samples))
            if len(self.steps) == 2:  # the figure's window opens on this step
                self.trace, self.mark = Trace(self.counter, value), now + TRACE_EVERY_S
                self.started_unix = time.time()
        if self.trace is not None and now >= self.mark:
            t1, _, c1, _ = self.steps[1]
            self.trace.mark(now - t1, calls - c1, value)
            self.mark = now + TRACE_EVERY_S

    def window_s(self) -> float:
        period = self.steps[1][0] - self.steps[0][0]
        return max(self.min_window_s, WINDOW_PERIODS * period)

    def satisfied(self, now: float) -> bool:
        if self.why:
            return True
        since = self.steps[-1][0] if self.steps else self.opened
        if len(self.steps) < 2 or self.steps[-1][0] - self.steps[1][0] < self.window_s():
            if now - since > STEP_WAIT_S:  # stuck, or too coarse for a window: no figure, and the window ends
                self.why = (f"the {self.counter.source} counter did not move in {STEP_WAIT_S:g} s of calls"
                            if len(self.steps) < 2 else
                            f"the {self.counter.source} counter stopped moving during the window")
                return True
            return False
        self.ended_unix = time.time()
        return True

    def record(self) -> dict[str, Any]:
        base = {"source": self.counter.source, "scope": self.counter.scope}
        long_enough = len(self.steps) >= 2 and self.steps[-1][0] - self.steps[1][0] >= self.window_s()
        if self.why or not long_enough:
            why = self.why or ("the steady window ended (its --max-samples) before the counter's window was long "
                               "enough" if len(self.steps) >= 2 else
                               f"the {self.counter.source} counter did not step twice in the steady window")
            return {**base, "why": why}
        (t1, e1, c1, s1), (t2, e2, c2, s2) = self.steps[1], self.steps[-1]
        joules, window = e2 - e1, self.window_s()
        return {**base, "joules_per_call": joules / (c2 - c1), "mean_power_w": joules / (t2 - t1), "joules": joules,
                "calls": c2 - c1, "window_s": t2 - t1, "asked_window_s": self.min_window_s,
                "update_period_s": self.steps[1][0] - self.steps[0][0], "lengthened": window > self.min_window_s,
                "started_unix": self.started_unix, "ended_unix": self.ended_unix,
                "window": "steady", "samples": [s1 + 1, s2],
                "calls_read": "the steady window's samples between the counter's two steps (numbered from 1), "
                              "the counter read after each sample's synchronisation, outside the clock",
                "trace": self.trace.record() if self.trace else None}


class Trace:
    """Marks of an energy window's progress (``TRACE_EVERY_S`` apart, taken between steps):
    seconds since the window began, calls made, the counter's joules since then and the SM
    clock where the counter has one. ``record`` gives them as columns, with the call rate and
    the clock's range over the marks."""

    def __init__(self, counter: Counter, e0: float):
        self.counter, self.e0 = counter, e0
        self.cols: dict[str, list] = {"t_s": [], "calls": [], "joules": [], "sm_mhz": []}

    def mark(self, t_s: float, calls: int, value: float) -> None:
        self.cols["t_s"].append(round(t_s, 4))
        self.cols["calls"].append(calls)
        self.cols["joules"].append(round(value - self.e0, 4))
        try:
            mhz = self.counter.sm_mhz() if self.counter.sm_mhz else None
        except Exception:  # noqa: BLE001 - a clock the driver does not give: the mark without it
            mhz = None
        self.cols["sm_mhz"].append(mhz)

    def record(self) -> dict[str, Any]:
        t, n = self.cols["t_s"], self.cols["calls"]
        rates = [(n[i] - n[i - 1]) / (t[i] - t[i - 1]) for i in range(1, len(t)) if t[i] > t[i - 1]]
        clocks = [c for c in self.cols["sm_mhz"] if c is not None]
        return {"every_s": TRACE_EVERY_S, **self.cols,
                "calls_per_s": [min(rates), max(rates)] if rates else None,
                "sm_mhz_range": [min(clocks), max(clocks)] if clocks else None}


def open_window(device: str, clock: Callable[[], float] = time.perf_counter) -> tuple[WindowEnergy | None, dict[str, Any]]:
    """The energy readout of a cell's steady window on ``device``'s counter, or None and the
    record that says why there is none (no counter: a VM's CPU, a GPU before Volta, a MIG slice)."""
    counter, why = nvml_counter() if device == "cuda" else rapl_counter()
    if counter is None:
        return None, {"source": "nvml" if device == "cuda" else "rapl", "why": why}
    return WindowEnergy(counter, MIN_WINDOW_S.get(device, 1.0), clock), {}


def close_window(device: str, meter: WindowEnergy) -> dict[str, Any]:
    """The readout's record, its counter closed; on a GPU voided where another process shared it."""
    try:
        record = meter.record()
    finally:
        meter.counter.close()
    if device == "cuda" and "joules_per_call" in record:
        others = foreign_gpu_processes()
        record["foreign_processes"] = others
        if others:  # the counter is the whole GPU's: another process's work is in it
            record["voided"] = f"{len(others)} other process(es) on the GPU (pids {', '.join(map(str, others[:5]))})"
    return record
