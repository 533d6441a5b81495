"""Where the cells of a sweep run: one small interface, one class per way.

An executor takes the planned cells and a ``measure(spec, placement)`` function (the runner's
``measure_one``, which starts the cell's worker) and yields each cell's Measurement as it
finishes; the runner stores it from its own thread. Timing integrity is the executor's job:

* ``Serial`` (the default): one cell at a time on this host, as every run so far.
* ``GpuPool``: the node's GPUs, one cell per GPU at a time, each worker seeing only its GPU
  (``CUDA_VISIBLE_DEVICES``) and pinned to its own share of the host's cores, so that no two
  timed cells share a device or a core. CPU cells are refused: on a CPU the device is the
  host's cores, so a CPU sweep runs one cell per host at a time (``Serial``).

Every cell records its ``Placement``: the host, the device it ran on, and what its worker
was given (``settings.placement``; the rows' ``host`` and ``placed_on`` columns).
"""

from __future__ import annotations

import queue
import socket
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Mapping, Sequence

from stackwars.errors import SpecError
from stackwars.records import CellSpec, Measurement

EXECUTORS = ("serial", "gpu-pool")


@dataclass(frozen=True)
class Placement:
    """Where one cell runs: the host, the device as the machine names it (``cuda:3`` is the
    fourth GPU of the node, whatever the worker calls it), the environment and the CPUs its
    worker is given."""

    host: str
    device: str
    env: Mapping[str, str] = field(default_factory=dict)
    cpus: tuple[int, ...] | None = None

    def to_dict(self) -> dict:
        return {"host": self.host, "device": self.device, "env": dict(self.env),
                "cpus": list(self.cpus) if self.cpus is not None else None}


Measure = Callable[[CellSpec, Placement], Measurement]


class Serial:
    """One cell at a time, on this host, in the plan's order."""

    name = "serial"

    def run(self, specs: Iterable[CellSpec], measure: Measure) -> Iterator[Measurement]:
        host = socket.gethostname()
        for spec in specs:
            yield measure(spec, Placement(host, "cpu" if spec.device == "cpu" else f"{spec.device}:0"))


class GpuPool:
    """One cell per GPU at a time over ``gpus`` (the indices ``CUDA_VISIBLE_DEVICES`` takes),
    each worker pinned to an equal, disjoint share of ``cpus``."""

    name = "gpu-pool"

    def __init__(self, gpus: Sequence[str], cpus: Sequence[int]):
        gpus = [str(g) for g in gpus]
        if not gpus:
            raise SpecError("--executor gpu-pool: no GPU to place cells on (NVML finds none, or --gpus is empty)")
        if len(set(gpus)) != len(gpus):
            raise SpecError(f"--gpus {','.join(gpus)}: a GPU given twice would hold two timed cells at once")
        if len(cpus) < len(gpus):
            raise SpecError(f"--executor gpu-pool: {len(gpus)} GPUs but {len(cpus)} CPU cores; each cell's worker "
                            f"needs a core of its own (give fewer GPUs with --gpus)")
        share = len(cpus) // len(gpus)
        self.host = socket.gethostname()
        self.slots = [Placement(self.host, f"cuda:{g}", {"CUDA_VISIBLE_DEVICES": g},
                                tuple(cpus[i * share:(i + 1) * share])) for i, g in enumerate(gpus)]

    def check(self, specs: Sequence[CellSpec]) -> None:
        cpu = sorted({s.key for s in specs if s.device != "cuda"})
        if cpu:
            raise SpecError(f"--executor gpu-pool places one cell per GPU; {len(cpu)} cell(s) are not on cuda "
                            f"(e.g. {cpu[0]}): on a CPU the device is the host's cores, so a CPU sweep runs one cell "
                            f"at a time (--executor serial)")

    def run(self, specs: Iterable[CellSpec], measure: Measure) -> Iterator[Measurement]:
        specs = list(specs)
        self.check(specs)
        free: queue.Queue[Placement] = queue.Queue()
        for slot in self.slots:
            free.put(slot)
        lock = threading.Lock()

        def one(spec: CellSpec) -> Measurement:
            slot = free.get()  # a GPU with no timed cell on it
            try:
                return measure(spec, slot)
            finally:
                with lock:
                    free.put(slot)

        pool = ThreadPoolExecutor(max_workers=len(self.slots), thread_name_prefix="stackwars-gpu")
        try:
            pending: set[Future] = {pool.submit(one, s) for s in specs}
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    yield f.result()
        finally:
            # stopped (Ctrl-C, an error): no new cell starts; those in flight finish on their GPUs
            # and are not stored, so --resume measures them again
            pool.shutdown(wait=True, cancel_futures=True)


def visible_gpus() -> list[str]:
    """The GPU indices this process may use: ``CUDA_VISIBLE_DEVICES`` where it is set, else every
    GPU NVML sees; none without NVML."""
    import os

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [g.strip() for g in visible.split(",") if g.strip()]
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no driver, no library: no GPU to place cells on
        return []


def make(name: str, gpus: Sequence[str] | None = None, cpus: Sequence[int] = ()) -> Serial | GpuPool:
    if name == "serial":
        if gpus:
            raise SpecError("--gpus applies to --executor gpu-pool")
        return Serial()
    if name == "gpu-pool":
        return GpuPool(gpus or [], cpus)
    raise SpecError(f"unknown executor {name!r}; allowed: {', '.join(EXECUTORS)}")
