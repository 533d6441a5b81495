"""Plain records that cross process and storage boundaries.

Frozen dataclasses only; this module imports neither torch nor jax, so the parent
process, the store and the report can use it without loading a framework. A
``Measurement`` holds raw samples; every statistic is derived (``to_row``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from stackwars import stats

SCHEMA_VERSION = 1  # version of the record layout inside record_json

STATUSES = ("ok", "oom", "error", "timeout", "unsupported", "parity_fail")
PHASES = ("forward", "train-step")
DTYPES = ("float32", "bfloat16")
DEVICES = ("cpu", "cuda")
MATMUL_PRECISIONS = ("float32", "tf32")

# the GPU clock reasons a record stores (``gpu_clock_reasons``), here where the harness that reads
# them from NVML (harness/issue.py) and the report that reads them from the record (verdict/spread.py)
# both find them without the report importing the harness
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
# how a steady state is timed (harness/timer.py): the run's, so that both sides of every comparison
# are timed alike; throughput: blocks of 2+ back-to-back calls, one sync a block; latency: one call a sync
TIMING_MODES = ("throughput", "latency")

# Keys every exported cell row carries (issue 2); missing values are None, never invented.
ROW_KEYS = (
    "workload", "preset", "phase", "backend", "framework", "device", "dtype", "status",
    "first_call_s", "second_call_s", "steady_median_s", "steady_iqr_s", "steady_samples",
    "compile_s", "peak_memory_bytes", "parity_max_rel_err", "flops", "error",
)


def _items(mapping: Mapping[str, Any] | tuple) -> tuple[tuple[str, Any], ...]:
    if isinstance(mapping, tuple):
        return tuple(sorted((str(k), v) for k, v in mapping))
    return tuple(sorted((str(k), v) for k, v in mapping.items()))


@dataclass(frozen=True)
class CellSpec:
    """One cell: workload x preset x phase x backend x device x dtype (+ overrides, options)."""

    workload: str
    preset: str
    phase: str
    backend: str
    device: str = "cpu"
    dtype: str = "float32"
    overrides: tuple[tuple[str, Any], ...] = ()  # --set key=value on top of the preset
    options: tuple[tuple[str, Any], ...] = ()  # backend options (compile mode, fullgraph, ...)
    repeat: int = 0  # which of the cell's worker processes (--repeat N measures N of them)

    def __post_init__(self) -> None:
        object.__setattr__(self, "overrides", _items(self.overrides))
        object.__setattr__(self, "options", _items(self.options))

    @property
    def key(self) -> str:
        """Stable identity of the cell inside a run (used by --resume)."""
        parts = [self.workload, self.preset, self.phase, self.backend, self.device, self.dtype]
        if self.overrides:
            parts.append(",".join(f"{k}={v}" for k, v in self.overrides))
        if self.options:
            parts.append(",".join(f"{k}={v}" for k, v in self.options))
        key = "/".join(parts)
        return f"{key}#r{self.repeat}" if self.repeat else key

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["overrides"] = dict(self.overrides)
        d["options"] = dict(self.options)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CellSpec":
        d = dict(d)
        d["overrides"] = _items(d.get("overrides") or {})
        d["options"] = _items(d.get("options") or {})
        return cls(**d)


@dataclass(frozen=True)
class MeasureConfig:
    """How cells are measured; identical for every cell of a run and stored with it."""

    warmup: int = 3  # untimed calls after the second call
    # steady state stops once both min_samples and min_time_s are met. Five samples a process, as pyperf takes a few
    # values from each of many processes: a verdict's unit is the process (its median), and the spread between
    # processes, not within one, sets its interval
    min_samples: int = 5
    min_time_s: float = 1.0  # per process: `run --min-time` is the cell's, spread over its processes
    max_samples: int = 100_000
    min_block_s: float = 1e-3  # throughput mode: a block lasts at least this (and holds 2+ calls)
    # TIMING_MODES: every process of every cell of the run timed this way; None: throughput, or latency where
    # the caches are flushed before every call (``timing_mode``)
    timing: str | None = None
    timeout_s: float = 600.0  # wall clock per cell, worker start to result
    threads: int | None = None  # CPU thread budget for both frameworks; None = all CPUs of the run
    matmul_precision: str = "float32"  # float32: exact fp32 matmuls in both; tf32: TF32 allowed in both
    cache_dir: str | None = None  # None: the run's own caches, per cell (see cold_every_process)
    # False: a cell's first process starts from empty compile caches, its later ones from what the
    # earlier left (warm; each record says which); True: every process starts cold
    cold_every_process: bool = False
    noise_threshold: float = stats.NOISE_THRESHOLD  # IQR/median above this flags the cell as noisy
    seed: int = 0
    memory_limit_bytes: int | None = None  # RSS watchdog on the worker; None = no limit
    parity_mode: str = "auto"  # auto: float64 reference where it fits, else a peer; reference; peer
    profile_steps: int = 0  # > 0: after everything timed, this many steps under the framework's profiler
    profile_dir: str | None = None  # where the traces go (a folder per run)
    flush_cache: bool = False  # write a buffer larger than the last-level cache before every timed call
    cuda_graph_replay: bool = False  # CUDA: time the steady state as replays of one captured call (torch forward)
    processes: int = 1  # fresh worker processes per cell (run --processes); the verdict needs several
    # a verdict that has not decided may add rounds up to this (its looks: --processes, then every stats.LOOK_STEP
    # more, up to this; verdict/sequential.py); None: one look
    max_processes: int | None = None
    budget_s: float | None = None  # wall seconds a run may take: no look of more processes starts past it
    margin: float = stats.MARGIN  # "same speed" within +-margin, declared before the run (two one-sided tests)
    energy: bool = True  # after the steady state, a window on the device's energy counter where it has one
    # with processes > 1: every cell's first process first (it chooses each row's two bests), then more
    # only for the cells that can still change a verdict (verdict/choose.screen); False: every cell in all
    # its processes
    screen: bool = True
    # an A/A check of the deciding design: each chosen cell's processes after the choice come in back-to-back
    # pairs, twice as many (``verdict --aa`` reads each pair as a round of the cell against itself)
    aa: bool = False

    @property
    def screens(self) -> bool:
        """Whether the run screens: it asks for more processes than one, and for screening."""
        return self.screen and self.processes > 1

    @property
    def timing_mode(self) -> str:
        """The mode every cell of the run is timed in: the one asked for, else throughput, or
        latency with a flush before every call (a flush cannot sit inside a block)."""
        return self.timing or ("latency" if self.flush_cache else "throughput")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "MeasureConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass(frozen=True)
class CompileStats:
    """Compilation cost, split as finely as the framework reports it."""

    total_s: float | None = None
    breakdown: Mapping[str, float] = field(default_factory=dict)  # e.g. trace_s/lower_s/compile_s
    graphs: int | None = None
    graph_breaks: int | None = None
    recompiles: int | None = None
    break_reasons: tuple[str, ...] = ()
    source: str = ""  # which framework signal the numbers come from
    extra: Mapping[str, Any] = field(default_factory=dict)  # e.g. XLA cost analysis


@dataclass(frozen=True)
class MemoryStats:
    """Memory peaks; each number names the counter it was read from."""

    peak_device_bytes: int | None = None
    device_counter: str | None = None
    peak_rss_bytes: int | None = None  # over the measured calls (first call to last sample)
    peak_rss_first_call_bytes: int | None = None  # over the first call alone (compile included)
    peak_rss_steady_bytes: int | None = None  # over the memory phase's call (before: from the second call on)
    baseline_rss_bytes: int | None = None  # just before the first call, inputs already resident
    rss_counter: str | None = None
    compiled: Mapping[str, int] = field(default_factory=dict)  # XLA memory_analysis()
    # what the harness itself held through the memory phase, which no figure counts (figures.added_memory):
    # the host copies of the outputs kept for the parity check, a flush buffer (host or device)
    harness_host_bytes: int = 0
    harness_device_bytes: int = 0


def _max_of(values) -> float | None:
    vs = [v for v in values if v is not None]
    return max(vs) if vs else None


def parity_ok(err: float | None, tolerance: float | None) -> bool | None:
    """The one rule: None when nothing was compared; else a finite error within a finite
    tolerance (a stored row is judged by it too)."""
    if err is None or tolerance is None:
        return None
    return bool(math.isfinite(err) and math.isfinite(tolerance) and err <= tolerance)


@dataclass(frozen=True)
class Parity:
    """Output agreement of one cell with the workload's float64 reference."""

    max_rel_err: float | None
    tolerance: float
    per_output: Mapping[str, float] = field(default_factory=dict)
    metric: str = "max|out-ref| / max|ref| per output, max over outputs"
    reference: str = "float64 numpy"
    excluded: Mapping[str, float] = field(default_factory=dict)  # fraction of each output left out
    rule: str = ""  # how the tolerance was set (fixed for the dtype, or from the reference's own float32 error)
    failure: str = ""  # what failed outright: NaN or infinity in an output or the reference, a shape, a name
    # each output's own tolerance, where the rule gives one a tensor (harness/reference.tensor_tolerances);
    # then max_rel_err and tolerance are those of ``binding``, the output nearest its own tolerance
    tolerances: Mapping[str, float] = field(default_factory=dict)
    binding: str = ""

    @property
    def ok(self) -> bool:
        """Agreement: a finite error within a finite tolerance. NaN or infinity anywhere (an
        output, the reference, the tolerance) is a failure, never inf <= inf."""
        return bool(parity_ok(self.max_rel_err, self.tolerance))

    @property
    def checked(self) -> bool:
        """False when nothing was compared (a peer comparison's first cell)."""
        return self.max_rel_err is not None


def _peak_before_first_call(mem: Any, window: Mapping[str, Any] | None) -> bool:
    """Whether a device peak read after the steady state had already been reached before the
    first call, in an allocator whose peak cannot be reset (``resets`` False; records made
    before that key say "no reset" in ``how``)."""
    window = window or {}
    resets = window.get("resets", "no reset" not in str(window.get("how", "")))
    before = window.get("peak_before_first_call_bytes")
    peak = mem.peak_device_bytes if mem is not None else None
    return bool(not resets and before is not None and peak is not None and before >= peak)


@dataclass(frozen=True)
class Measurement:
    """Everything one cell produced. Raw samples only; statistics are derived."""

    spec: CellSpec
    status: str
    framework: str | None = None
    first_call_s: float | None = None
    second_call_s: float | None = None
    warmup_s: tuple[float, ...] = ()
    samples: tuple[float, ...] = ()  # seconds per call, one per timed block
    number: int = 1  # calls per timed block
    compile: CompileStats | None = None
    memory: MemoryStats | None = None
    parity: Parity | None = None
    flops: int | None = None
    bytes_moved: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)  # resolved workload config
    settings: Mapping[str, Any] = field(default_factory=dict)  # threads, precision, caches, options
    peak: Mapping[str, Any] = field(default_factory=dict)  # device roofline used for fractions
    error: str | None = None
    noise_threshold: float = stats.NOISE_THRESHOLD
    wall_s: float | None = None  # the worker's whole life, from the parent's clock
    init_s: float | None = None  # framework import + device/client init + library handles, before the first call
    timeline: Mapping[str, Any] = field(default_factory=dict)  # where the worker's seconds went (measure.py)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; allowed: {', '.join(STATUSES)}")

    # ---- serialisation -------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["spec"] = self.spec.to_dict()
        d["record_version"] = SCHEMA_VERSION
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, default=_json_default)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Measurement":
        d = dict(d)
        d.pop("record_version", None)
        d["spec"] = CellSpec.from_dict(d["spec"])
        for key, sub in (("compile", CompileStats), ("memory", MemoryStats), ("parity", Parity)):
            if d.get(key) is not None:
                sd = dict(d[key])
                if "break_reasons" in sd:
                    sd["break_reasons"] = tuple(sd["break_reasons"])
                d[key] = sub(**sd)
        d["samples"] = tuple(d.get("samples") or ())
        d["warmup_s"] = tuple(d.get("warmup_s") or ())
        _check_times(d)
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    # ---- derived view ----------------------------------------------------------------
    @property
    def measured_s(self) -> float | None:
        """Seconds inside the measured windows: first and second call, warm-up, the steady window
        (every readout's calls are its calls) and the memory phase's call."""
        if self.first_call_s is None:
            return None
        t = self.timeline or {}
        steady = t.get("steady_s", sum(self.samples) * self.number)
        # the memory phase's call; and, in records made before every readout came from the steady
        # window, the windows of their own that followed it (device clock, issue time, energy)
        return (self.first_call_s + (self.second_call_s or 0.0) + sum(self.warmup_s) + steady + t.get("memory_s", 0.0)
                + t.get("device_time_s", 0.0) + t.get("issue_s", 0.0) + t.get("energy_s", 0.0))

    @property
    def overhead_s(self) -> float | None:
        """The harness's own cost of the cell: the worker's wall time minus the measured windows
        and the float64 reference computed for it (process start, imports, device init,
        preparation, parity copies and comparison, observation, result transfer)."""
        if self.wall_s is None or self.measured_s is None:
            return None
        return max(0.0, self.wall_s - self.measured_s - float((self.timeline or {}).get("reference_s", 0.0)))

    @property
    def attention_ran(self) -> str | None:
        """The attention implementation that ran (observed), else the one chosen."""
        settings = self.settings or {}
        observed = ((settings.get("observed") or {}).get("attention") or {}).get("ran")
        chosen = ((settings.get("backend") or {}).get("attention") or {}).get("implementation")
        return observed or chosen

    def to_row(self) -> dict[str, Any]:
        """Flat row: the ROW_KEYS of issue 2 plus derived statistics and roofline fractions, built
        in named parts (the keys keep their order: exports and golden tables read it)."""
        summary = stats.summarize(self.samples, noise_threshold=self.noise_threshold) if self.samples else None
        median = summary.median if summary else None
        row = {**self._row_required(summary), **self._row_steady(summary), **self._row_machine(),
               **self._row_memory(), **self._row_cost(), **self._row_reference(), **self._row_conditions(),
               **self._row_servers(), **self._row_device()}
        row.update(roofline(self.flops, self.bytes_moved, median, self.peak))
        return row

    def _peak_memory(self) -> tuple[int | None, str | None]:
        """The cell's peak memory and the counter it came from: the device's where read, else the host's RSS."""
        mem = self.memory
        if mem is not None and mem.peak_device_bytes is not None:
            return mem.peak_device_bytes, mem.device_counter
        if mem is not None and mem.peak_rss_bytes is not None:
            return mem.peak_rss_bytes, mem.rss_counter
        return None, None

    def _row_required(self, summary: stats.Summary | None) -> dict[str, Any]:
        """The required keys: the cell, its status and its headline figures."""
        return {
            "workload": self.spec.workload, "preset": self.spec.preset, "phase": self.spec.phase,
            "backend": self.spec.backend,
            "framework": self.framework, "device": self.spec.device, "dtype": self.spec.dtype, "status": self.status,
            "first_call_s": self.first_call_s, "second_call_s": self.second_call_s,
            "steady_median_s": summary.median if summary else None,
            "steady_iqr_s": summary.iqr if summary else None,
            "steady_samples": list(self.samples),
            "compile_s": self.compile.total_s if self.compile else None,
            "peak_memory_bytes": self._peak_memory()[0],
            "parity_max_rel_err": self.parity.max_rel_err if self.parity else None,
            "flops": self.flops,
            "error": self.error,
        }

    def _row_steady(self, summary: stats.Summary | None) -> dict[str, Any]:
        """Beyond the required keys: the cell's key, and its steady state's statistics, timing mode and noise."""
        return {
            "cell_key": self.spec.key,
            "repeat": self.spec.repeat,
            "overrides": dict(self.spec.overrides), "options": dict(self.spec.options),
            "steady_mean_s": summary.mean if summary else None,
            "steady_ci_low_s": summary.ci_low if summary else None,
            "steady_ci_high_s": summary.ci_high if summary else None,
            "steady_n": summary.n if summary else 0,
            "calls_per_sample": self.number,
            # how the steady state was timed: the run's mode (latency or throughput); a record made before
            # the run chose one was timed in blocks where a call was short and alone where it was long
            "timing_mode": timing_mode(self.settings, self.number),
            "noisy": summary.noisy if summary else None,
        }

    def _row_machine(self) -> dict[str, Any]:
        """What else ran meanwhile: other processes' share of the cell's CPUs, and the machine's canary."""
        return {
            # other processes (or the hypervisor) took this much of the cell's CPUs while it ran
            "contention": (self.settings or {}).get("contention", {}).get("fraction"),
            "contended": (self.settings or {}).get("contention", {}).get("contended"),
            "contention_window_s": (self.settings or {}).get("contention", {}).get("window_s"),
            # the cell's own child processes' share of its CPUs meanwhile (Inductor's compile pool)
            "descendants_share": (self.settings or {}).get("contention", {}).get("descendants_fraction"),
            # the machine's canary before and after the cell (stackwars/canary.py); judged per run by canary.judge
            "canary_before_s": (((self.settings or {}).get("canary") or {}).get("before") or {}).get("s"),
            "canary_after_s": (((self.settings or {}).get("canary") or {}).get("after") or {}).get("s"),
            "canary_spread": _max_of((((self.settings or {}).get("canary") or {}).get(k) or {}).get("spread")
                                     for k in ("before", "after")),
        }

    def _row_memory(self) -> dict[str, Any]:
        """Memory: the counter read, its peaks by phase, and what the harness added."""
        mem = self.memory
        return {
            "peak_memory_counter": self._peak_memory()[1],
            "baseline_rss_bytes": mem.baseline_rss_bytes if mem else None,
            "peak_rss_bytes": mem.peak_rss_bytes if mem else None,
            "peak_rss_first_call_bytes": mem.peak_rss_first_call_bytes if mem else None,
            "peak_rss_steady_bytes": mem.peak_rss_steady_bytes if mem else None,
            "peak_device_bytes": mem.peak_device_bytes if mem else None,
            # a GPU cell without a device figure says why (XLA's peak unreadable for the call): never the host's RSS
            "device_memory_why": (mem.device_counter if mem and mem.peak_device_bytes is None and self.spec.device == "cuda"
                                  else None),
            "harness_host_bytes": mem.harness_host_bytes if mem else 0,
            "harness_device_bytes": mem.harness_device_bytes if mem else 0,
            # an allocator peak that cannot be reset (XLA's) and was already reached before the
            # first call is the preparation's, not the program's: no memory figure (added_memory)
            "device_peak_before_first_call": _peak_before_first_call(mem, (self.settings or {}).get("memory_window")),
        }

    def _row_cost(self) -> dict[str, Any]:
        """Parity, compile statistics, and where the worker's time went."""
        return {
            "parity_tolerance": self.parity.tolerance if self.parity else None,
            "parity_rule": self.parity.rule if self.parity else None,
            "graphs": self.compile.graphs if self.compile else None,
            "graph_breaks": self.compile.graph_breaks if self.compile else None,
            "recompiles": self.compile.recompiles if self.compile else None,
            "bytes_moved": self.bytes_moved,
            "cache": self.settings.get("cache", {}).get("mode") if self.settings else None,
            "init_s": self.init_s,
            "overhead_s": self.overhead_s,
            "wall_s": self.wall_s,
            "attention": self.attention_ran,
            "parity_reference": self.parity.reference if self.parity else None,
            "measured_s": self.measured_s,
        }

    def _row_reference(self) -> dict[str, Any]:
        """The cell's float64 reference: computed here, read, or computed in a worker of its own."""
        return {
            "reference_computed_s": (self.timeline or {}).get("reference_s"),
            "reference_source": ((self.settings or {}).get("reference") or {}).get("source"),
            # a CUDA cell's reference computed in a worker of its own before the cell's: that worker's wall time
            "reference_worker_s": ((self.settings or {}).get("reference_worker") or {}).get("wall_s")
            if ((self.settings or {}).get("reference_worker") or {}).get("source") == "computed" else None,
            # of it, what no other account holds: all of it, or (computed while the fork servers started,
            # runner.start_servers_ahead) what it took beyond them
            "reference_worker_extra_s": _reference_extra((self.settings or {}).get("reference_worker") or {}),
        }

    def _row_conditions(self) -> dict[str, Any]:
        """The conditions a comparison holds under, and where the cell came from and ran."""
        return {
            # how the steady state was timed: caches flushed before each call, CUDA graph replays
            "flushed": bool((self.settings or {}).get("flush")),
            # the conditions a comparison holds under: matmul precision, what PyTorch's optimizer ran
            "matmul_precision": (self.settings or {}).get("matmul_precision"),
            "optimizer_impl": ((self.settings or {}).get("backend") or {}).get("optimizer_impl"),
            "workload_origin": ((self.settings or {}).get("origin") or {}).get("workload"),
            "backend_origin": ((self.settings or {}).get("origin") or {}).get("backend"),
            "host": ((self.settings or {}).get("placement") or {}).get("host"),
            "placed_on": ((self.settings or {}).get("placement") or {}).get("device"),
            "lost": ((self.settings or {}).get("lost") or {}).get("executor"),
        }

    def _row_servers(self) -> dict[str, Any]:
        """The fork servers its worker and its reference's worker came from (harness/forkserver.py)."""
        return {
            # a fork server's start: what this task waited for, or the batch it was started in ahead
            # of its first cell (harness/forkserver.py; that time is in no worker's wall)
            "server_start_s": _origin(self.settings).get("server_start_s"),
            "server_ahead_batch": (_origin(self.settings).get("server_started_ahead") or {}).get("batch"),
            "server_ahead_s": (_origin(self.settings).get("server_started_ahead") or {}).get("seconds"),
            # what the run did meanwhile: a batch started while the machine probe ran
            "server_ahead_during": (_origin(self.settings).get("server_started_ahead") or {}).get("during"),
            # the same for the server of the cell's reference worker (runner.reference_first)
            "reference_server_ahead_batch": (_reference_origin(self.settings).get("server_started_ahead") or {}
                                             ).get("batch"),
            "reference_server_ahead_s": (_reference_origin(self.settings).get("server_started_ahead") or {}
                                         ).get("seconds"),
            "reference_server_ahead_during": (_reference_origin(self.settings).get("server_started_ahead") or {}
                                              ).get("during"),
        }

    def _row_device(self) -> dict[str, Any]:
        """The program on the device: graph replay, device time, issue time, clocks, profile, energy."""
        return {
            "graph_replayed": bool(((self.settings or {}).get("graph_replay") or {}).get("replayed")),
            # whether the steady state replayed CUDA graphs (PyTorch's, or XLA's command buffers): on CUDA
            # the verdict sets programs of one kind against each other; None on a host device
            "replays_graphs": replays_graphs(self.spec, self.settings, self.compile),
            # the same calls on the device's own clock (CUDA events), after the steady state
            # the compiled program's fingerprint (jax-jit: optimized HLO; torch-compile: Inductor's code)
            "program_sha": ((self.compile.extra or {}).get("program_sha") if self.compile else None),
            "cpu_steal_s": (self.settings or {}).get("cpu_steal_s"),
            "device_time_median_s": _median(((self.settings or {}).get("device_time") or {}).get("samples")),
            # the window each of these readouts came from: "steady" (the timed calls themselves)
            "readout_windows": readout_windows(self.settings),
            # the host's time to issue a call, and the GPU's clocks while it ran (harness/issue.py)
            **_issue_row((self.settings or {}).get("issue")),
            # the profiled steps' median (run --profile N), for why a cell's processes disagree (verdict/spread.py)
            **_profile_row(((self.settings or {}).get("profile") or {}).get("summary")),
            # joules per call from the device's energy counter (harness/energy.py), None where there is none
            # (why: energy_why) or where another process on the GPU voided it (energy_voided)
            **_energy_row((self.settings or {}).get("energy")),
        }


GRAPH_MODES = ("reduce-overhead", "max-autotune")  # torch.compile modes that replay CUDA graphs
# the backends that run one program compiled by XLA, and their command buffers where none are asked for
XLA_PROGRAMS = {"jax-jit": "on", "jax-jit-no-graphs": "off", "torch-mlir-xla": "on"}


def replays_graphs(spec: CellSpec, settings: Mapping[str, Any] | None, compile: CompileStats | None) -> bool | None:
    """Whether a CUDA cell's steady state replayed CUDA graphs: a call captured into one
    (``--cuda-graph-replay``), torch.compile in a mode with CUDA graphs (its options as the
    worker resolved them), or XLA's command buffers where jax-jit's compiled program formed any
    (counted from the program; where not counted, XLA's default: on unless turned off). None on a
    host device, where nothing replays graphs."""
    if spec.device != "cuda":
        return None
    settings = settings or {}
    if (settings.get("graph_replay") or {}).get("replayed"):
        return True
    options = {**dict(spec.options), **(((settings.get("backend") or {}).get("options")) or {})}
    if spec.backend == "torch-cudagraphs" or options.get("mode") in GRAPH_MODES:
        return True
    if spec.backend == "jax-eager":  # op by op: no program long enough for a command buffer
        return False
    formed = ((compile.extra or {}) if compile else {}).get("xla_command_buffers")
    if formed is not None:  # counted from the compiled program itself
        return formed > 0
    if "xla_command_buffers" in options or spec.backend in XLA_PROGRAMS:  # a whole program compiled by XLA
        asked = options.get("xla_command_buffers") or XLA_PROGRAMS.get(spec.backend)
        return asked != "off"
    return False


def timing_mode(settings: Mapping[str, Any] | None, number: int) -> str:
    """The mode a process's steady state was timed in: its window's record; a record from before
    windows were recorded read from its calls a sample (one: latency, more: throughput)."""
    mode = ((settings or {}).get("window") or {}).get("mode")
    return mode or ("latency" if number == 1 else "throughput")


def readout_windows(settings: Mapping[str, Any] | None) -> dict[str, str | None]:
    """Which window each readout of a process came from: "steady" (its timed calls) or, in a
    record made before they were read there, "own" (calls of its own after the steady window)."""
    out: dict[str, str | None] = {}
    for name in ("device_time", "issue", "energy"):
        r = (settings or {}).get(name)
        if r and (r.get("samples") or r.get("joules_per_call") is not None):
            out[name] = r.get("window") or "own"
    return out


def _issue_row(issue: Mapping[str, Any] | None) -> dict[str, Any]:
    clocks = (issue or {}).get("clocks") or {}
    return {"issue_median_s": _median((issue or {}).get("samples")), "gpu_sm_mhz": clocks.get("sm_mhz"),
            "gpu_sm_max_mhz": clocks.get("sm_max_mhz"), "gpu_clock_reasons": clocks.get("reasons"),
            # the SM clock's lowest and highest NVML read through the window (a single reading: both the same)
            "gpu_sm_mhz_range": clocks.get("sm_mhz_range") or ([clocks["sm_mhz"]] * 2 if clocks.get("sm_mhz") else None)}


MAX_SECONDS = 1e6  # about 12 days: no call a cell times is longer; a stored time beyond it was not measured


def _check_times(d: Mapping[str, Any]) -> None:
    """Every time a record holds is a number a clock could have read: each steady-state sample
    above 0 (a median of 0 or below, NaN or 1e300 once decided "PyTorch faster, nan (nan-nan)" or
    crashed a reader), first and second call, warm-up and wall time at 0 or above, all finite and
    under ``MAX_SECONDS``; calls per block a positive integer. ValueError naming the field: the
    reader names the record and skips it (store/results.py)."""
    def bad(x, low_ok: bool) -> bool:
        return (isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x)
                or x < 0 or (x == 0 and not low_ok) or x > MAX_SECONDS)

    for i, x in enumerate(d.get("samples") or ()):
        if bad(x, low_ok=False):
            raise ValueError(f"steady-state sample {i} is {x!r}: a time per call must be above 0 and under "
                             f"{MAX_SECONDS:g} s")
    for key in ("first_call_s", "second_call_s", "wall_s", "init_s"):
        if d.get(key) is not None and bad(d[key], low_ok=True):
            raise ValueError(f"{key} is {d[key]!r}: a time must be 0 or more and under {MAX_SECONDS:g} s")
    for i, x in enumerate(d.get("warmup_s") or ()):
        if bad(x, low_ok=True):
            raise ValueError(f"warm-up call {i} took {x!r}: a time must be 0 or more and under {MAX_SECONDS:g} s")
    number = d.get("number", 1)
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ValueError(f"number (calls per timed block) is {number!r}: a positive integer")


def _origin(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    return ((settings or {}).get("process") or {}).get("origin") or {}


def _reference_origin(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    return ((settings or {}).get("reference_worker") or {}).get("origin") or {}


def _profile_row(summary: Mapping[str, Any] | None) -> dict[str, Any]:
    med = (summary or {}).get("median") or {}
    return {"profile_wall_s": med.get("wall_s"), "profile_busy_s": med.get("busy_s"),
            "profile_gap_s": med.get("gap_s"), "profile_kernels": med.get("kernels"),
            "profile_distinct_kernels": (summary or {}).get("distinct_kernels"),
            "profile_kernel_mix_sha": (summary or {}).get("kernel_mix_sha"),
            "profile_kernel_mix": (summary or {}).get("kernel_mix")}


def _energy_row(e: Mapping[str, Any] | None) -> dict[str, Any]:
    e = e or {}
    voided = e.get("voided")
    return {"energy_j_per_call": None if voided else e.get("joules_per_call"),
            "energy_power_w": None if voided else e.get("mean_power_w"),
            "energy_window_s": e.get("window_s"), "energy_source": e.get("source"),
            "energy_started_unix": e.get("started_unix"), "energy_ended_unix": e.get("ended_unix"),
            # the window's marks (harness/energy.py): its slowest and fastest call rate, the SM clock's range
            "energy_calls_per_s": (e.get("trace") or {}).get("calls_per_s"),
            "energy_sm_mhz": (e.get("trace") or {}).get("sm_mhz_range"),
            "energy_why": voided or e.get("why") or (None if e else "not measured (--no-energy, or an older record)")}


def _reference_extra(worker: Mapping[str, Any]) -> float | None:
    if worker.get("source") != "computed":
        return None
    return worker["after_servers_s"] if "after_servers_s" in worker else worker.get("wall_s")


def _median(samples: Sequence[float] | None) -> float | None:
    return float(statistics.median(samples)) if samples else None


def roofline(flops: int | None, nbytes: int | None, seconds: float | None,
             peak: Mapping[str, Any] | None) -> dict[str, float | None]:
    """Achieved rates and the fraction of the device roofline the cell reached.

    The roofline time is max(flops / peak FLOP/s, bytes / peak bandwidth); the fraction
    is that floor divided by the measured median (1.0 = at the roofline).
    """
    out: dict[str, float | None] = {
        "achieved_flops_per_s": None, "achieved_bytes_per_s": None, "roofline_fraction": None,
    }
    if not seconds or seconds <= 0:
        return out
    if flops:
        out["achieved_flops_per_s"] = flops / seconds
    if nbytes:
        out["achieved_bytes_per_s"] = nbytes / seconds
    if peak and flops and nbytes and peak.get("flops_per_s") and peak.get("bytes_per_s"):
        floor = max(flops / peak["flops_per_s"], nbytes / peak["bytes_per_s"])
        out["roofline_fraction"] = floor / seconds
    return out


def same_cpu_kind(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two machines' CPUs are of one kind (harness/env.py's ``cpu_kind``: family, model,
    instruction sets), where both recorded it: a record from before the kind was kept is judged
    by its model name alone."""
    return not (a.get("cpu_kind") and b.get("cpu_kind")) or a["cpu_kind"] == b["cpu_kind"]


@dataclass(frozen=True)
class Env:
    """Environment fingerprint of a run."""

    data: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)

    def machine(self, ran_on: Mapping[str, Any] | None = None) -> str:
        """The machine a result comes from, as a reader needs it to place a number: the CPU
        (model, logical CPUs), the GPUs, and the framework versions. Two runs with the same
        label are comparable; the report never mixes labels in one table or verdict.
        ``ran_on``: the kind of machine a cell's executor placed it on (``Placement.kind``);
        where that is not the run's own machine (a Ray or SLURM node of another kind), the
        cell is labelled by where it ran, so its verdict stays apart."""
        d = self.data
        if not d:
            return "unknown machine (no environment recorded)"
        if ran_on and not self.same_kind(ran_on):
            d = {**d, "cpu_model": ran_on.get("cpu_model"), "cpu_kind": ran_on.get("cpu_kind"),
                 "cpu_count_logical": ran_on.get("cpu_count_logical"),
                 "gpus": [{"name": ran_on["gpu"]}] if ran_on.get("gpu") else [],
                 "versions": {**(d.get("versions") or {}), **(ran_on.get("versions") or {})}}
        # the CPU's kind where recorded: one model name can stand for hosts generations apart
        kind = f"{d['cpu_kind']}; " if d.get("cpu_kind") else ""
        parts = [f"{d.get('cpu_model') or '?'} ({kind}{d.get('cpu_count_logical') or '?'} CPUs)"]
        gpus = [g.get("name") for g in d.get("gpus") or ()]
        if gpus:
            parts.append(f"{len(gpus)}x {gpus[0]}" if len(set(gpus)) == 1 else ", ".join(gpus))
        vers = d.get("versions") or {}
        parts += [f"{k} {vers[k]}" for k in ("torch", "jax") if vers.get(k)]
        return " · ".join(parts)

    def same_kind(self, ran_on: Mapping[str, Any]) -> bool:
        """Whether a cell placed on ``ran_on`` ran on a machine of this run's kind."""
        d = self.data
        gpus = {g.get("name") for g in d.get("gpus") or ()}
        versions = d.get("versions") or {}
        return (ran_on.get("cpu_model") == d.get("cpu_model")
                and same_cpu_kind(ran_on, d)
                and ran_on.get("cpu_count_logical") == d.get("cpu_count_logical")
                and (ran_on.get("gpu") is None or ran_on.get("gpu") in gpus)
                and all(versions.get(k) == v for k, v in (ran_on.get("versions") or {}).items()))

    def summary(self) -> str:
        d = self.data
        threads = d.get("thread_budget")
        kind = f"{d['cpu_kind']}; " if d.get("cpu_kind") else ""
        parts = [
            f"device: {d.get('cpu_model', '?')} ({kind}{d.get('cpu_count_logical', '?')} logical CPUs)",
        ]
        if d.get("gpus"):
            g = d["gpus"][0]
            parts.append(f"GPU: {g.get('name')} x{len(d['gpus'])}, driver {d.get('nvidia_driver')}")
        vers = d.get("versions", {})
        parts.append(", ".join(f"{k} {v}" for k, v in vers.items() if k in
                               ("python", "torch", "jax", "jaxlib", "flax") and v))
        if threads:
            parts.append(f"threads: {threads} per framework")
        probed = (d.get("probe") or {}).get("probed") or {}
        if probed.get("from_cache"):  # harness/probe.py: the answer kept from an earlier command
            parts.append(f"machine probe kept from {probed.get('at')}")
        if d.get("git_revision"):
            parts.append(f"stackwars {d['git_revision'][:10]}{'+dirty' if d.get('git_dirty') else ''}")
        elif (d.get("versions") or {}).get("stackwars"):  # not a git checkout of its own: the package's version
            parts.append(f"stackwars {d['versions']['stackwars']} (no git checkout)")
        return " | ".join(parts)


def _json_default(o: Any) -> Any:
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    if hasattr(o, "item"):  # numpy scalar
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
