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

1. calls until the counter steps (its start lies on a step), and again until it steps once
   more: the time between the two is the counter's update period, measured;
2. is at least ``WINDOW_PERIODS`` update periods long and at least the asked-for length
   (lengthened, and the record says so, where the asked-for one was shorter);
3. ends on a step too: after the length is reached it calls until the counter moves.

Joules per call = the energy between the two steps / the calls made between them; the mean
power = that energy / the window's time. Every ``TRACE_EVERY_S`` of the window a mark keeps
the calls made so far, the counter's reading and, on a GPU, NVML's SM clock (``trace``): the
window is a second of the cell's calls, and a process that ran at two speeds shows whether
its calls slowed with the clock (a slowed device) or without it (a device waiting for the
host), as the H200's resnet50 torch-compile processes did on 2026-11-26. A counter that does not step within
``STEP_WAIT_S`` gives no figure and says why. This runs after the steady state, apart from it
(like the CUDA-event window): its calls are not timed samples.
"""

from __future__ import annotations

import glob
import os
import time
from dataclasses import dataclass
from typing import Any, Callable

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


def measure(call: Callable[[], Any], sync: Callable[[Any], Any], counter: Counter, number: int = 1,
            min_window_s: float = 1.0, clock: Callable[[], float] = time.perf_counter) -> dict[str, Any]:
    """The energy window (see the module docstring): ``number`` calls a step, each synced.
    Returns the record: ``joules_per_call``, ``mean_power_w``, the window, the counter's
    measured update period and whether the window was lengthened; or ``why`` there is none."""
    def step() -> int:
        sync([call() for _ in range(number)])  # as the timer syncs a block: every output of it
        return number

    def until_moved(since: float) -> tuple[float, float, int] | None:
        """Call until the counter leaves ``since``: (its new value, when, calls made)."""
        start, calls = clock(), 0
        while True:
            calls += step()
            value = counter.read()
            if value != since:
                return value, clock(), calls
            if clock() - start > STEP_WAIT_S:
                return None

    base = {"source": counter.source, "scope": counter.scope}
    first = until_moved(counter.read())
    second = until_moved(first[0]) if first else None
    if second is None:
        return {**base, "why": f"the {counter.source} counter did not move in {STEP_WAIT_S:g} s of calls"}
    period = second[1] - first[1]
    window = max(min_window_s, WINDOW_PERIODS * period)
    e0, t0, calls = second[0], second[1], 0
    started_unix = time.time()  # the wall clock too: a power meter sampled beside it can be lined up
    trace = Trace(counter, e0)
    mark = t0 + TRACE_EVERY_S
    while (now := clock()) - t0 < window:
        if now >= mark:
            trace.mark(now - t0, calls)
            mark = now + TRACE_EVERY_S
        calls += step()
    last = counter.read()
    end = until_moved(last)
    if end is None:
        return {**base, "why": f"the {counter.source} counter stopped moving during the window"}
    e1, t1, more = end
    calls += more
    joules = e1 - e0
    return {**base, "joules_per_call": joules / calls, "mean_power_w": joules / (t1 - t0), "joules": joules,
            "calls": calls, "window_s": t1 - t0, "asked_window_s": min_window_s, "update_period_s": period,
            "lengthened": window > min_window_s, "started_unix": started_unix, "ended_unix": time.time(),
            "trace": trace.record()}


class Trace:
    """Marks of an energy window's progress (``TRACE_EVERY_S`` apart, taken between steps):
    seconds since the window began, calls made, the counter's joules since then and the SM
    clock where the counter has one. ``record`` gives them as columns, with the call rate and
    the clock's range over the marks."""

    def __init__(self, counter: Counter, e0: float):
        self.counter, self.e0 = counter, e0
        self.cols: dict[str, list] = {"t_s": [], "calls": [], "joules": [], "sm_mhz": []}

    def mark(self, t_s: float, calls: int) -> None:
        self.cols["t_s"].append(round(t_s, 4))
        self.cols["calls"].append(calls)
        self.cols["joules"].append(round(self.counter.read() - self.e0, 4))
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


def cell_energy(device: str, call: Callable[[], Any], sync: Callable[[Any], Any], number: int) -> dict[str, Any]:
    """The energy record of a cell on ``device``: a window on its device's counter, or why none."""
    counter, why = nvml_counter() if device == "cuda" else rapl_counter()
    if counter is None:
        return {"source": "nvml" if device == "cuda" else "rapl", "why": why}
    try:
        record = measure(call, sync, counter, number, MIN_WINDOW_S.get(device, 1.0))
    finally:
        counter.close()
    if device == "cuda" and "joules_per_call" in record:
        others = foreign_gpu_processes()
        record["foreign_processes"] = others
        if others:  # the counter is the whole GPU's: another process's work is in it
            record["voided"] = f"{len(others)} other process(es) on the GPU (pids {', '.join(map(str, others[:5]))})"
    return record
