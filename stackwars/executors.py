"""Where the cells of a sweep run: one small interface, one class per way.

An executor takes the planned cells and a ``measure(spec, placement)`` function (the runner's
``CellMeasure``, picklable, which starts the cell's worker wherever it is called) and yields
each cell's Measurement as it finishes; the runner stores it from its own thread. Timing
integrity is the executor's job:

* ``Serial`` (the default): one cell at a time on this host, as every run so far.
* ``GpuPool``: the node's GPUs, one cell per GPU at a time, each worker seeing only its GPU
  (``CUDA_VISIBLE_DEVICES``) and pinned to its own share of the host's cores, so that no two
  timed cells share a device or a core. CPU cells are refused: on a CPU the device is the
  host's cores, so a CPU sweep runs one cell per host at a time (``Serial``).
* ``Ray``: each cell a Ray task asking for one GPU (and that GPU's share of the node's CPUs),
  or, for a CPU cell, for every CPU of a node, so Ray itself never puts two timed cells on one
  device or one host's cores. Results stream back to the driver as tasks finish.
* ``Submitit``: each cell a SLURM job (one job array per kind of cell) through submitit, a GPU
  cell asking for one GPU, a CPU cell for a whole node (``--exclusive``); or submitit's local
  executor, one job at a time on this host (the same jobs without a cluster).

Ray and submitit are optional extras (``pip install 'stackwars[ray]'`` / ``[slurm]``); asking
for one that is not installed is bad input with that command.

A cell whose worker dies under the executor (a Ray worker killed, a node lost, a SLURM job
pre-empted or cancelled) is ``lost``: stored with status ``error`` and ``settings.lost``, the
run goes on, and ``--resume`` measures it again, replacing the lost record (no duplicate).

Every cell records its ``Placement``: the host, the device it ran on, the kind of machine
there, and what its worker was given (``settings.placement``; the rows' ``host`` and
``placed_on`` columns). Cells that ran on different kinds of machine get different machine
labels, so their verdicts are kept apart.
"""

from __future__ import annotations

import contextlib
import math
import os
import queue
import shutil
import socket
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from stackwars import registry
from stackwars.errors import SpecError
from stackwars.harness import isolation, tmp
from stackwars.harness.env import device_kind
from stackwars.harness.settings import available_cpus
from stackwars.parse import comma_list
from stackwars.records import CellSpec, Measurement

EXECUTORS = ("serial", "gpu-pool", "ray", "slurm", "submitit-local")
EXTRAS = {"ray": ("ray", "ray"), "slurm": ("submitit", "slurm"), "submitit-local": ("submitit", "slurm")}


@dataclass(frozen=True)
class Placement:
    """Where one cell runs: the host, the device as the machine names it (``cuda:3`` is the
    fourth GPU of the node, whatever the worker calls it), the kind of machine there (its CPU
    and, for a GPU cell, that GPU's name: ``harness.env.device_kind``), the environment and the
    CPUs its worker is given."""

    host: str
    device: str
    env: Mapping[str, str] = field(default_factory=dict)
    cpus: tuple[int, ...] | None = None
    kind: Mapping[str, Any] | None = None

    def to_dict(self) -> dict:
        return {"host": self.host, "device": self.device, "env": dict(self.env),
                "cpus": list(self.cpus) if self.cpus is not None else None,
                "kind": dict(self.kind) if self.kind is not None else None}


Measure = Callable[[CellSpec, Placement], Measurement]
OnStart = Callable[[CellSpec], None]


def here(spec: CellSpec, gpu: str | None = None, env: Mapping[str, str] | None = None,
         cpus: Sequence[int] | None = None) -> Placement:
    """The placement of a cell on this host; on a GPU, ``gpu`` (the index ``CUDA_VISIBLE_DEVICES``
    takes; by default the first this process sees, as Ray or SLURM set it)."""
    if spec.device != "cuda":
        return Placement(socket.gethostname(), "cpu", dict(env or {}), tuple(cpus) if cpus else None, device_kind(None))
    if gpu is None:
        from stackwars.harness.energy import cell_gpu  # a GPU's cell only: the parent's import stays light

        gpu = cell_gpu()
    return Placement(socket.gethostname(), f"cuda:{gpu}", dict(env or {}), tuple(cpus) if cpus else None,
                     device_kind(gpu))


def lost(spec: CellSpec, executor: str, why: str) -> Measurement:
    """A cell whose worker died under the executor, not of anything the cell did: a failed
    record that ``--resume`` measures again (``Store.missing``)."""
    why = " ".join(str(why).split())[:2000]
    return Measurement(spec=spec, status="error", framework=registry.backend(spec.backend).framework,
                       error=f"lost: the {executor} worker running this cell died before it returned ({why}); "
                             f"`stackwars run --resume RUN_ID` measures it again",
                       settings={"lost": {"executor": executor, "why": why}})


class Executor:
    """The interface. ``local``: the cells run on this host, so a run-wide folder in this host's
    temporary directory (the float64 reference cache) is seen by every cell; otherwise only
    ``shared_dir`` is, where one was given."""

    name = "executor"
    local = True
    shared_dir: str | None = None

    def reach(self) -> None:
        """Refuse, before the machine is probed, what this executor can tell without the plan (a
        cluster address that does not answer)."""

    def check(self, specs: Sequence[CellSpec]) -> None:
        """Refuse, before anything is written, cells this executor cannot place."""

    def run(self, specs: Iterable[CellSpec], measure: Measure, on_start: OnStart | None = None
            ) -> Iterator[Measurement]:
        raise NotImplementedError

    def scratch(self, kind: str) -> str | None:
        """A fresh folder every cell of the run can read and write, or None where there is none
        (each cell then does its own work: a reference of its own)."""
        if self.local:
            return tmp.mkdtemp(kind)
        if self.shared_dir:
            os.makedirs(self.shared_dir, exist_ok=True)  # made when a run first needs it, never by a refused command
            return tempfile.mkdtemp(prefix=f"{tmp.PREFIX}{kind}-{os.getpid()}-", dir=self.shared_dir)
        return None


class Serial(Executor):
    """One cell at a time, on this host, in the plan's order."""

    name = "serial"

    def run(self, specs, measure, on_start=None):
        specs = list(specs)
        ahead = getattr(measure, "start_servers", None)
        generations: set[int] = set()
        for i, spec in enumerate(specs):
            if ahead is not None and spec.repeat not in generations:
                # between cells, before a process number's first: its fork servers started together,
                # with the next numbers' where they fit (forkserver.start_ahead)
                generations.add(spec.repeat)
                ahead(sorted(specs[i:], key=lambda s: s.repeat != spec.repeat), here)
            if on_start:
                on_start(spec)
            yield measure(spec, here(spec))


class GpuPool(Executor):
    """One cell per GPU at a time over ``gpus`` (the indices ``CUDA_VISIBLE_DEVICES`` takes,
    numbered as NVML numbers them: ``CUDA_DEVICE_ORDER=PCI_BUS_ID``), each worker pinned to an
    equal, disjoint share of ``cpus``."""

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
        self.slots = [Placement(self.host, f"cuda:{g}", {"CUDA_VISIBLE_DEVICES": g, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
                                tuple(cpus[i * share:(i + 1) * share]), device_kind(g)) for i, g in enumerate(gpus)]

    def check(self, specs):
        _only_cuda(self.name, specs, "on a CPU the device is the host's cores, so a CPU sweep runs one cell at a "
                                     "time (--executor serial)")

    def run(self, specs, measure, on_start=None):
        specs = list(specs)
        self.check(specs)
        free: queue.Queue[Placement] = queue.Queue()
        for slot in self.slots:
            free.put(slot)
        # set by a cell that raised (Ctrl-C, an error), before its GPU is free again: the pool's threads
        # took the next cell in the moment before this thread woke to cancel it, and its worker started
        stopping = threading.Event()

        def one(spec: CellSpec) -> Measurement | None:
            slot = free.get()  # a GPU with no timed cell on it
            try:
                if stopping.is_set():
                    return None  # not started: the pool is stopping
                if on_start:
                    on_start(spec)
                return measure(spec, slot)
            except BaseException:
                stopping.set()
                raise
            finally:
                free.put(slot)

        pool = ThreadPoolExecutor(max_workers=len(self.slots), thread_name_prefix="stackwars-gpu")
        pending: set[Future] = set()
        try:
            pending = {pool.submit(one, s) for s in specs}
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in sorted(done, key=lambda f: f.exception() is not None):  # what finished is kept first
                    m = f.result()
                    if m is not None:
                        yield m
        finally:
            # stopped (Ctrl-C, an error): no new cell starts, and the workers of those in flight are
            # killed (their results would not be stored); --resume measures them again
            if pending:
                isolation.stop_running()
            try:
                pool.shutdown(wait=True, cancel_futures=True)
            finally:
                isolation.allow_running()


def _only_cuda(name: str, specs: Sequence[CellSpec], why: str) -> None:
    cpu = sorted({s.key for s in specs if s.device != "cuda"})
    if cpu:
        raise SpecError(f"--executor {name} places one cell per GPU; {len(cpu)} cell(s) are not on cuda "
                        f"(e.g. {cpu[0]}): {why}")


def _needs(executor: str) -> None:
    module, extra = EXTRAS[executor]
    # submitit reconfigures the process's logging when first imported (logging.config.dictConfig,
    # which closes every handler already there, a test harness's included) unless told not to;
    # only this import is told: its jobs configure their own logging as submitit means them to
    before = os.environ.get("SUBMITIT_LOG_LEVEL")
    os.environ["SUBMITIT_LOG_LEVEL"] = "NOCONFIG"
    try:
        __import__(module)
    except ImportError as exc:
        raise SpecError(f"--executor {executor} needs {module}, which is not installed here ({exc}); install the "
                        f"extra: pip install 'stackwars[{extra}]'") from None
    finally:
        if before is None:
            os.environ.pop("SUBMITIT_LOG_LEVEL", None)
        else:
            os.environ["SUBMITIT_LOG_LEVEL"] = before


def _remote_cell(measure: Measure, spec: CellSpec) -> Measurement:
    """A cell inside a Ray task or a SLURM job: placed where the scheduler put it (the GPU it
    granted is this process's ``CUDA_VISIBLE_DEVICES``), measured in a fresh worker as always."""
    if spec.device != "cuda":
        return measure(spec, here(spec))
    from stackwars.harness.energy import cell_gpu  # as in here()

    gpu = cell_gpu()
    return measure(spec, here(spec, gpu, cpus=gpu_core_share(gpu)))


def gpu_core_share(gpu: str, cpus: Sequence[int] | None = None, gpus_on_node: int | None = None
                   ) -> tuple[int, ...] | None:
    """The cores of GPU ``gpu``'s cell: where this process may use every core of the node (Ray
    reserves a count of CPUs but pins nothing), the ``gpu``-th of as many equal, disjoint shares
    as the node has GPUs, so two GPU cells granted two GPUs never share a core; where something
    already narrowed this process to some cores (SLURM's ``--cpus-per-task`` binding), those.
    None where it cannot be told (no NVML, a GPU named by UUID)."""
    cpus = sorted(cpus if cpus is not None else available_cpus())
    if len(cpus) < (os.cpu_count() or 0):
        return tuple(cpus)  # already this cell's share
    if gpus_on_node is None:
        gpus_on_node = _nvml_count()  # the whole node, whatever this process may see
    if not gpu.isdigit() or not gpus_on_node or int(gpu) >= gpus_on_node or len(cpus) < gpus_on_node:
        return None
    share = len(cpus) // gpus_on_node
    return tuple(cpus[int(gpu) * share:(int(gpu) + 1) * share])


def _nvml_count() -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no NVML: unknown
        return 0


GRPC_ANSWER_S = 3.0
# HTTP/2's client preface and an empty SETTINGS frame: a gRPC server (Ray's GCS) answers with its own
# SETTINGS frame (9-byte header, type 4) at once; anything else (a web server, a database, a silent
# port) does not, and Ray would retry it without end
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def speaks_grpc(conn: socket.socket, timeout_s: float) -> bool:
    """Whether the peer of ``conn`` answers an HTTP/2 preface as HTTP/2 does (within ``timeout_s``)."""
    try:
        conn.settimeout(timeout_s)
        conn.sendall(_H2_PREFACE)
        head = b""
        while len(head) < 9:
            chunk = conn.recv(9 - len(head))
            if not chunk:
                return False
            head += chunk
    except OSError:
        return False
    return head[3] == 0x04  # a SETTINGS frame


class Ray(Executor):
    """Each cell a Ray task. ``address``: an existing cluster (``ray start --head`` on one node,
    ``ray start --address`` on the others; ``auto`` finds the local one); without it a private
    cluster of this host is started for the run (Ray stops it when this process exits)."""

    name = "ray"

    def __init__(self, address: str | None = None, shared_dir: str | None = None):
        _needs("ray")
        self.address = address
        self.local = address is None
        self.shared_dir = shared_dir

    def _connect(self) -> list[Mapping[str, Any]]:
        """Join (or start) the cluster; the resources of its live nodes."""
        import ray

        if not ray.is_initialized():
            self.reach()

            kw: dict[str, Any] = {"address": self.address, "include_dashboard": False, "log_to_driver": False,
                                  "logging_level": "ERROR"}
            if self.address is None:  # a cluster of this host alone: its cores, a small object store
                kw.update(num_cpus=len(available_cpus()), object_store_memory=2**27)
            try:
                ray.init(**kw)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                causes, cause = [], exc  # Ray names a refused token only inside a cause's message
                while cause is not None and len(causes) < 10:
                    causes.append(f"{type(cause).__name__}: {cause}")
                    cause = cause.__cause__ or cause.__context__
                auth = any("Authentication" in c or "AuthToken" in c for c in causes)
                raise SpecError(f"--executor ray: cannot reach a Ray cluster at {self.address or 'this host'}: {exc}"
                                + ("; the cluster asks for a token (`ray start` turns token authentication on): set "
                                   "RAY_AUTH_MODE=token here, with the cluster's token in ~/.ray/auth_token or "
                                   "RAY_AUTH_TOKEN" if auth else "")) from None
        return [n["Resources"] for n in ray.nodes() if n.get("Alive")]

    def reach(self, timeout_s: float = 10.0) -> None:
        """An address that answers no TCP connection, or not as a Ray cluster, is refused at once
        (Ray itself retries for minutes); ``auto`` and no address are left to Ray."""
        if self.address is None or self.address == "auto":
            return
        host, _, port = self.address.rpartition(":")
        if not host or not port.isdigit():
            raise SpecError(f"--ray-address {self.address!r}: give HOST:PORT (the head node's GCS port, 6379 by "
                            f"default), or auto")
        try:
            conn = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s)
        except OSError as exc:
            raise SpecError(f"--executor ray: nothing answers at {self.address} ({exc}); start the cluster first "
                            f"(`ray start --head --port {port}` on the head node)") from None
        with conn:
            if not speaks_grpc(conn, min(timeout_s, GRPC_ANSWER_S)):
                raise SpecError(f"--executor ray: {self.address} accepts a connection but does not answer as a Ray "
                                f"cluster (its GCS speaks gRPC; this port did not within {GRPC_ANSWER_S:g} s): give "
                                f"the head node's GCS port (`ray start --head` prints it; 6379 by default)")

    def check(self, specs):
        """Reach the cluster before anything is written, and refuse cells it has no device for."""
        nodes = self._connect()
        if any(s.device == "cuda" for s in specs) and not any(r.get("GPU") for r in nodes):
            raise SpecError(f"--executor ray: cuda cells, but no node of the Ray cluster at "
                            f"{self.address or 'this host'} has a GPU")
        return nodes

    def run(self, specs, measure, on_start=None):
        import ray

        specs = list(specs)
        nodes = self.check(specs)
        node_cpus = max(int(r.get("CPU", 0)) for r in nodes)
        cpus_per_gpu = min((max(1, int(r.get("CPU", 1) // r["GPU"])) for r in nodes if r.get("GPU")), default=1)
        task = ray.remote(_remote_cell)
        pending: dict[Any, CellSpec] = {}
        try:
            for spec in specs:
                # a GPU cell takes one GPU and its share of the node's cores; a CPU cell every core of
                # the largest node, so no two timed CPU cells ever share a host
                opts = ({"num_gpus": 1, "num_cpus": cpus_per_gpu} if spec.device == "cuda" else
                        {"num_cpus": node_cpus})
                ref = task.options(name="stackwars_cell", max_retries=0, **opts).remote(measure, spec)
                pending[ref] = spec
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    spec = pending.pop(ref)
                    try:
                        yield ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        yield lost(spec, "ray", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        finally:
            for ref in pending:  # stopped: nothing left queued or running
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - already finished or gone
                    pass


class Submitit(Executor):
    """Each cell a job through submitit: on SLURM (``cluster="slurm"``) one job array per kind
    of cell, at most ``max_jobs`` at a time; with ``cluster="local"`` submitit's local executor,
    one job at a time on this host. ``folder``: submitit's job files (pickled cells, logs): on
    SLURM it must be on a filesystem every node sees, and it holds the run's reference cache."""

    def __init__(self, cluster: str, folder: str | None, timeout_s: float, partition: str | None = None,
                 max_jobs: int | None = None):
        self.name = "slurm" if cluster == "slurm" else "submitit-local"
        _needs(self.name)
        if cluster == "slurm" and shutil.which("sbatch") is None:
            raise SpecError("--executor slurm: no sbatch on PATH; submit from a SLURM login node (or use "
                            "--executor submitit-local to run the same jobs on this host)")
        self.cluster, self.folder, self.partition = cluster, folder, partition
        self.max_jobs = max_jobs
        self.local = cluster == "local"
        self.shared_dir = folder
        # submitit's limit on a job: the cell's own timeout (its worker is killed then) and room to
        # start Python and import the frameworks
        self.timeout_min = max(5, math.ceil(timeout_s / 60) + 5)

    def _executor(self, folder: str, gpu: bool):
        import submitit

        ex = submitit.AutoExecutor(folder=folder, cluster=self.cluster)
        params: dict[str, Any] = {"name": "stackwars", "timeout_min": self.timeout_min, "nodes": 1,
                                  "tasks_per_node": 1}
        if self.cluster == "slurm":
            params.update(gpus_per_node=1) if gpu else params.update(slurm_exclusive=True)
            if self.partition:
                params["slurm_partition"] = self.partition
            if self.max_jobs:
                params["slurm_array_parallelism"] = self.max_jobs
        ex.update_parameters(**params)
        return ex

    def run(self, specs, measure, on_start=None):
        import submitit

        specs = list(specs)
        # the jobs' files: the shared folder given, or (local) a folder of this run, removed after it
        folder = self.folder or tmp.mkdtemp("submitit")
        os.makedirs(folder, exist_ok=True)
        failures = (submitit.core.utils.UncompletedJobError, submitit.core.utils.FailedJobError)

        def result(job, spec):
            try:
                return job.result()
            except failures as exc:
                return lost(spec, self.name, f"job {job.job_id}: {type(exc).__name__}: {exc}")

        jobs: dict[Any, CellSpec] = {}
        try:
            if self.local:  # one host: one timed cell at a time
                for spec in specs:
                    if on_start:
                        on_start(spec)
                    with _stderr_into(os.path.join(folder, "controller.log")):
                        job = self._executor(folder, spec.device == "cuda").submit(_remote_cell, measure, spec)
                    # submitit waits 15 s for a dead job's result file to show on a network filesystem;
                    # a local job's folder is on this host
                    job._results_timeout_s = 1
                    jobs[job] = spec
                    m = result(job, spec)
                    del jobs[job]
                    yield m
                return
            for gpu in (True, False):
                group = [s for s in specs if (s.device == "cuda") == gpu]
                if group:  # one job array: a job per cell
                    array = self._executor(folder, gpu).map_array(_remote_cell, [measure] * len(group), group)
                    jobs.update(zip(array, group))
            while jobs:
                finished = [j for j in jobs if j.done()]
                if not finished:
                    time.sleep(2.0)
                for job in finished:
                    yield result(job, jobs.pop(job))
        finally:
            for job in jobs:  # stopped: nothing left queued or running under our name
                try:
                    job.cancel(check=False)
                except Exception:  # noqa: BLE001 - already finished or gone
                    pass
            if self.folder is None:
                shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _stderr_into(path: str):
    """While submitit starts its local controller (a child that inherits our stderr, and that
    Ctrl-C reaches with the rest of the terminal's group): its stderr is a log in the job folder,
    so a stop prints our clean message and not the controller's KeyboardInterrupt traceback."""
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def visible_gpus() -> list[str]:
    """The GPU indices this process may use: ``CUDA_VISIBLE_DEVICES`` where it is set, else every
    GPU NVML sees; none without NVML."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [g.strip() for g in visible.split(",") if g.strip()]
    return [str(i) for i in range(_nvml_count())]


@dataclass(frozen=True)
class Choice:
    """The executor a command chose and its settings, as data (each field is the option of its
    name: ``--executor``, ``--gpus``, ...): a run's request holds it, ``make`` builds the executor,
    and a command that starts other commands passes it on (``args``)."""

    executor: str = "serial"
    gpus: str | None = None  # comma-separated GPU indices (gpu-pool)
    ray_address: str | None = None
    shared_dir: str | None = None  # resolved: every node's folder for the jobs' files
    slurm_partition: str | None = None
    max_jobs: int | None = None

    def make(self, timeout_s: float, cpus: Sequence[int] = ()) -> "Executor":
        gpus = (comma_list(self.gpus, "--gpus", what="GPU indices") if self.gpus else
                visible_gpus() if self.executor == "gpu-pool" else None)
        return make(self.executor, gpus, cpus, address=self.ray_address, shared_dir=self.shared_dir,
                    timeout_s=timeout_s, partition=self.slurm_partition, max_jobs=self.max_jobs)

    def args(self) -> list[str]:
        """The same choice as command-line arguments."""
        out = [] if self.executor == "serial" else ["--executor", self.executor]
        for flag, value in (("--gpus", self.gpus), ("--ray-address", self.ray_address),
                            ("--shared-dir", self.shared_dir), ("--slurm-partition", self.slurm_partition),
                            ("--max-jobs", self.max_jobs)):
            if value is not None:
                out += [flag, str(value)]
        return out


def make(name: str, gpus: Sequence[str] | None = None, cpus: Sequence[int] = (), *, address: str | None = None,
         shared_dir: str | None = None, timeout_s: float = 600.0, partition: str | None = None,
         max_jobs: int | None = None) -> Executor:
    """The executor ``name`` with its settings; a setting another executor takes is refused."""
    given = {"--gpus": gpus, "--ray-address": address, "--slurm-partition": partition, "--max-jobs": max_jobs}
    takes = {"serial": (), "gpu-pool": ("--gpus",), "ray": ("--ray-address",),
             "slurm": ("--slurm-partition", "--max-jobs"), "submitit-local": ()}
    if name not in takes:
        raise SpecError(f"unknown executor {name!r}; allowed: {', '.join(EXECUTORS)}")
    for flag, value in given.items():
        if value and flag not in takes[name]:
            users = [n for n, t in takes.items() if flag in t]
            raise SpecError(f"{flag} applies to --executor {' or '.join(users)}, not {name}")
    if shared_dir and name in ("serial", "gpu-pool"):
        raise SpecError(f"--shared-dir is for executors whose cells run on other hosts (ray, slurm), not {name}")
    if max_jobs is not None and max_jobs < 1:
        raise SpecError(f"--max-jobs must be at least 1, got {max_jobs}")
    if name == "serial":
        return Serial()
    if name == "gpu-pool":
        return GpuPool(gpus or [], cpus)
    if name == "ray":
        return Ray(address, shared_dir)
    if name == "slurm" and not shared_dir:
        raise SpecError("--executor slurm needs --shared-dir: a folder every node sees, for the jobs' files and "
                        "the run's reference cache")
    return Submitit("slurm" if name == "slurm" else "local", shared_dir, timeout_s, partition, max_jobs)
