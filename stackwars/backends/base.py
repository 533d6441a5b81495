"""The fixed face of a backend (a framework plus an execution mode).

A backend is one registry line, a ``BackendSpec`` (name, framework, devices, options,
implementation path), and one implementation module that imports its framework and is
loaded only inside workers. The harness uses it like this:

    backend = spec.load(options)
    applied = backend.configure(settings)      # threads, matmul precision, caches
    backend.init_device(device)                # context/client and library handles, timed apart
    prepared = backend.prepare(workload, cfg, phase, params, batch, device, dtype)
    out = prepared.call()                      # one step; first call includes compile
    prepared.sync([out, ...])                  # block until every output is computed
    prepared.after_first_call()                # compile timers, outside the timed region
    prepared.digest(out)                       # a large output's digest: compared already in this run?
    prepared.parity_outputs(out)               # numpy outputs comparable to the reference
    prepared.compile_stats()                   # read at the end: recompiles count too
    prepared.not_as_named()                    # None, or why it did not run as named (no CUDA graphs)
    prepared.observe()                         # untimed, after the steady state: what actually ran
    prepared.anatomy(profile_step)             # train steps: memory by part (untimed)
    backend.profile(prepared, steps, path)     # untimed, after everything timed: a trace of N steps
    backend.start_memory_window(device) / device_peak_memory(device, window, compiled)
    backend.device_events(device)              # the device's clock for the steady window's samples

``spec.availability(probe, device)`` says, from a probe of the machine, whether the
backend can run that device here and why not; such cells are recorded as ``unsupported``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from stackwars.errors import SpecError, Unsupported
from stackwars.records import CompileStats


# the GEMM both frameworks' device initialisation runs on a GPU: large enough that XLA hands the
# dot to cuBLAS/cuBLASLt (or autotunes against it), as PyTorch's matmul always does
WARM_GEMM = 256


@dataclass
class Prepared:
    call: Callable[[], Any]  # one step; returns what ``sync`` must wait for
    parity_outputs: Callable[[Any], dict[str, np.ndarray]]  # first-call output -> numpy outputs
    sync: Callable[[Sequence[Any]], None]  # blocks until the listed outputs are computed
    after_first_call: Callable[[], None] = lambda: None  # read compile timers (untimed)
    compile_stats: Callable[[], CompileStats | None] = lambda: None  # read at the end of the cell
    memory_analysis: Callable[[], dict[str, int]] = dict
    observe: Callable[[], dict[str, Any]] = dict  # after the timed calls: what actually ran (untimed)
    # train steps: memory by part (harness/anatomy.py); True = one more step may be profiled to measure it
    anatomy: Callable[[bool], dict[str, Any]] = lambda profile_step: {}
    # CUDA: capture one call into a CUDA graph and return its replay (None: this cell cannot be replayed)
    graph_replay: Callable[[], Callable[[], Any]] | None = None
    # after the timed calls: why the cell did not run as its backend's name says (torch-cudagraphs
    # whose graphs Inductor skipped), or None; such a cell is recorded as unsupported, timings kept
    not_as_named: Callable[[], str | None] = lambda: None
    notes: dict[str, Any] = field(default_factory=dict)  # what ran, recorded with the cell
    # first-call output -> its digest (harness/digest.py), or None where it is not folded: an
    # output the run already compared is not copied and compared again
    digest: Callable[[Any], str | None] = lambda out: None


# a framework's modules every cell-process of its backends imports, or would import later
# while the harness (not the measured program) works: the compiler stack torch.compile
# imports on its first call (Triton on CUDA; "?": where installed), the profiler the observation
# step uses, the measuring harness
PRELOAD = {
    # torch._dynamo too: the eager train step's optimizer imports it on construction (1.1 s a process)
    "torch": ("stackwars.harness.measure", "torch", "torch.profiler", "torch._dynamo"),
    "jax": ("stackwars.harness.measure", "jax", "jax.numpy", "optax", "stackwars.backends.jax_eager",
            "stackwars.backends.jax_jit"),  # both modes light: one server serves both
}
# Inductor, imported on torch.compile's first call: preloaded for the backends that compile
# (an eager cell's server is not made to pay for it, nor its processes to hold it)
TORCH_COMPILER = ("torch._inductor.compile_fx", "?triton")


@dataclass(frozen=True)
class BackendSpec:
    """What the parent knows about a backend without importing its framework."""

    name: str
    framework: str
    impl: str  # "module:Class", imported only inside workers
    description: str = ""
    default: bool = True  # part of "all available backends"
    devices: tuple[str, ...] = ("cpu", "cuda")
    option_defaults: Mapping[str, Any] = field(default_factory=dict)
    option_choices: Mapping[str, tuple] = field(default_factory=dict)  # absent: any value
    # an analysis path, not a way the framework's users run their code (torch-mlir-xla: PyTorch's
    # program handed to XLA): the verdict's "best PyTorch" is a native mode where one was measured
    analysis: bool = False
    preload_extra: tuple[str, ...] = ()  # modules its cells import later anyway (TORCH_COMPILER)

    @property
    def preload(self) -> tuple[str, ...]:
        """What a fork server imports before it forks this backend's cell-processes
        (harness/forkserver.py): the framework, the harness, the backend's own module and
        what it would import later anyway (``preload_extra``). A plugin's own module is never
        preloaded (it is read fresh in each cell, like a user's model file)."""
        mine = (self.impl.split(":")[0],) if self.impl.startswith("stackwars.") else ()
        return tuple(dict.fromkeys((*PRELOAD.get(self.framework, ()), *self.preload_extra, *mine)))

    def resolve_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(options) - set(self.option_defaults))
        if unknown:
            allowed = ", ".join(sorted(self.option_defaults)) or "none"
            raise SpecError(f"backend {self.name!r} has no option(s) {', '.join(unknown)}; allowed: {allowed}")
        out = dict(self.option_defaults)
        for k, v in options.items():
            allowed = self.option_choices.get(k)
            if allowed is not None and v not in allowed:
                raise SpecError(f"backend {self.name!r}: {k}={v!r} is not allowed; choose one of "
                                f"{', '.join(map(str, allowed))}")
            out[k] = v
        return out

    def availability(self, probe: Mapping[str, Any], device: str,
                     options: Mapping[str, Any] | None = None) -> tuple[bool, str]:
        """Whether this backend can run ``device`` (with these options) on the probed machine, and why not."""
        fw = probe.get(self.framework) or {}
        if not fw.get("importable"):
            return False, f"{self.framework} is not installed ({fw.get('error', 'import failed')})"
        if device not in self.devices:
            return False, f"{self.name} runs on {', '.join(self.devices)}, not {device}"
        if device == "cuda" and not fw.get("cuda"):
            return False, f"{self.framework} sees no CUDA device ({fw.get('cuda_reason', 'none found')})"
        return True, ""

    def process_env(self, options: Mapping[str, Any], device: str) -> dict[str, str]:
        """Environment the worker sets before importing the framework (e.g. XLA_FLAGS)."""
        return {}

    def load(self, options: Mapping[str, Any] | None = None) -> "Backend":
        module, cls = self.impl.split(":")
        return getattr(importlib.import_module(module), cls)(self, self.resolve_options(options or {}))


class Backend:
    """Implementation side, instantiated inside a worker by ``BackendSpec.load``."""

    def __init__(self, spec: BackendSpec, options: Mapping[str, Any]):
        self.spec = spec
        self.options = dict(options)

    @property
    def name(self) -> str:
        return self.spec.name

    def configure(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def init_device(self, device: str) -> dict[str, Any]:
        """Bring up the device before anything is timed: the CUDA context or the framework's
        client, and the libraries' handles (one tiny GEMM; on CUDA also a tiny convolution),
        so the first call of the cell is trace + compile + execute. Returns seconds per step."""
        return {}

    def prepare(self, workload: Any, cfg: Any, phase: str, params: Mapping[str, np.ndarray],
                batch: Mapping[str, np.ndarray], device: str, dtype: str) -> Prepared:
        raise NotImplementedError

    def device_peak_memory(self, device: str, window: Mapping[str, Any] | None = None,
                           compiled: Mapping[str, int] | None = None) -> tuple[int | None, str | None]:
        """The device's peak over the memory phase (``window``: what ``start_memory_window``
        returned; ``compiled``: XLA's memory analysis where the cell has one), and the counter
        it was read from, or (None, None) where the device has no allocator of its own (the host's
        RSS is the figure)."""
        return None, None

    def start_memory_window(self, device: str) -> dict[str, Any]:
        """Called right before the memory phase's call (harness/measure.py): the device peak
        that ``device_peak_memory`` then reports covers that call alone in every framework,
        with the program compiled and the harness's copies and digests behind it. Returns what
        the record should keep about the window."""
        return {}

    def device_events(self, device: str) -> tuple[Callable[[], Any] | None, str | None]:
        """The device's own clock for the steady window's samples (harness/window.py): a maker
        of one sample's events (``start()`` recorded before its clock starts, ``end()`` after its
        last call and before its synchronisation, ``seconds()`` read after it), or None and why
        a framework has no such clock."""
        if device != "cuda":
            return None, "host device: the wall clock is the device's clock"
        return None, (f"{self.name} has no device-event API: `--profile N` gives the kernels' busy time per step "
                      "from the profiler instead")

    def cache_flusher(self, device: str) -> tuple[Callable[[], None], dict[str, Any]]:
        """What ``--flush-l2`` runs before every timed call (harness/flush.py), and its record."""
        if device == "cpu":
            from stackwars.harness.flush import cpu_flusher
            return cpu_flusher()
        raise Unsupported(f"{self.name} cannot flush the caches of {device}")

    def profile(self, prepared: Prepared, steps: int, path: str) -> dict[str, Any]:
        """Run ``steps`` more steps under the framework's profiler, each wrapped in a
        ``stackwars.step`` annotation and synchronised inside it; write the Chrome trace to
        ``path`` (gzipped JSON). Returns what profiled it (harness/profile.py summarises)."""
        raise Unsupported(f"{self.name} has no profiler hook")
