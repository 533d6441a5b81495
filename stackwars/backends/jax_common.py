"""What every JAX backend shares: settings, conversion, phases, sync, memory, compile events.

Subclasses change one thing, ``wrap(fn, donate)``: eager returns ``fn`` (every primitive
is dispatched, and compiled on first use, one at a time), jit compiles the whole step.

* forward: ``twin.forward(static, params, batch)``;
* train-step: ``jax.value_and_grad`` of ``twin.loss`` (parameters cast to the compute
  dtype inside the differentiated function when training bfloat16 on float32 master
  weights), then an optax update. The state (params, optimizer state) is threaded
  through the calls; under jit it is donated, as JAX's training loops do.

Compile activity is counted from JAX's own monitoring events
(``/jax/core/compile/backend_compile_duration`` and friends), not inferred from timings.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from stackwars.backends.base import WARM_GEMM, Backend, Prepared
from stackwars.backends.jax_spec import COMMAND_BUFFER_DEFAULT
from stackwars.harness import digest
from stackwars.workloads import attention
from stackwars.workloads.base import initial_values, param_dtype, update_of

JAX_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}
TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
LOWER_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
EXACT_IN_FLOAT32 = (np.dtype(jnp.bfloat16), np.dtype(np.float16), np.dtype(np.float32))
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"
CACHE_MISS_EVENT = "/jax/compilation_cache/cache_misses"


class CompileEvents:
    """Counts and times JAX's compile events; ``mark()`` splits first call from the rest.
    Also counts persistent-cache hits and misses (evidence of a warm or cold cache)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, float]] = []
        self.names: list[str | None] = []  # the function each event compiled (fun_name)
        self.cache = {"hits": 0, "misses": 0}
        self._mark = 0
        self.paused = False  # the harness's own programs compiling (``quiet``): not the cell's events
        jax.monitoring.register_event_duration_secs_listener(self._on_duration)
        jax.monitoring.register_event_listener(self._on_event)

    def _on_duration(self, event: str, duration: float, **kwargs: Any) -> None:
        if self.paused:
            return
        if event in (TRACE_EVENT, LOWER_EVENT, COMPILE_EVENT):
            self.events.append((event, duration))
            self.names.append(kwargs.get("fun_name"))

    def _on_event(self, event: str, **kwargs: Any) -> None:
        if self.paused:
            return
        if event == CACHE_HIT_EVENT:
            self.cache["hits"] += 1
        elif event == CACHE_MISS_EVENT:
            self.cache["misses"] += 1

    def mark(self) -> None:
        self._mark = len(self.events)

    def quiet(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` with its compile and cache events left out: a program of the harness's
        own (the output's digest), whose compile is no recompile of the cell's and whose cache
        hit or miss says nothing of the cell's cache."""
        self.paused = True
        try:
            return fn(*args)
        finally:
            self.paused = False

    def first(self, event: str) -> tuple[int, float]:
        hits = [d for e, d in self.events[: self._mark] if e == event]
        return len(hits), float(sum(hits))

    def after_first(self, event: str) -> int:
        return sum(1 for e, _ in self.events[self._mark:] if e == event)


def to_device_array(x: np.ndarray, dtype: str, device) -> jax.Array:
    """Floats: float32 -> bfloat16 on the host with ml_dtypes, round to nearest even, as the
    reference; integers (token ids, labels) as int32, JAX's default integer."""
    if np.issubdtype(np.asarray(x).dtype, np.integer):
        return jax.device_put(np.ascontiguousarray(x, dtype=np.int32), device)
    return jax.device_put(np.ascontiguousarray(x, dtype=np.float32).astype(JAX_DTYPES[dtype]), device)


def build_twin(twin: Any, cfg: Any, params: Mapping[str, np.ndarray], place: Callable[[np.ndarray], Any]) -> tuple:
    """A JAX twin's (static, tree) from the host's canonical arrays, each put on its device by
    ``place``; a twin that can (``PLACES_ON_BUILD``: the models) changes an array's layout on
    the host first. Transposed on the device, each kernel shape compiled a program of its
    own (21 for resnet50): in a process with empty caches on the 2-core VM, resnet50 small's
    jax-jit ``prepare`` took 3.5-4.0 s with them and 1.6-2.1 s without."""
    if getattr(twin, "PLACES_ON_BUILD", False):
        return twin.build(cfg, dict(params), place=place)
    return twin.build(cfg, {k: place(v) for k, v in params.items()})


def _floats_to(tree: Any, dtype: Any) -> Any:
    return jax.tree.map(lambda p: p.astype(dtype) if jnp.issubdtype(p.dtype, jnp.floating) else p, tree)


def to_numpy(x: Any) -> np.ndarray:
    """An output on the host for the parity check: bfloat16, float16 and float32 as the device
    holds them (numpy computes with ml_dtypes' bfloat16; the comparison widens each slice to
    float64 as it subtracts, parity.compare), float64 otherwise. Widened whole, a GPT-2 paper
    forward's 412 million logits took 3.5 s to float64 and 0.3-2.6 s to float32 on the 2-core
    AMD VM (most of it page faults in a fresh process), on top of the comparison's 0.8 s; the
    H100 run's JAX gpt2 processes spent 1.9-2.0 s copying them for parity, the H200's 1.3-1.7 s
    (PyTorch's 0.6-0.75 s, which converted on the device). PyTorch's copies are made the same
    way (torch_common.to_numpy)."""
    host = np.asarray(jax.device_get(x))
    return host if host.dtype in EXACT_IN_FLOAT32 else np.asarray(host, dtype=np.float64)


FOLD_CHUNK = 2  # blocks folded a step: at most 2 x 2^16 words in flight (512 KiB as uint32)


@jax.jit
def _fold(x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """harness/digest.py's fold of the whole blocks on the device, in uint32 (whose arithmetic
    wraps: the sums modulo 2^32), ``FOLD_CHUNK`` blocks a step of a loop that slices the output
    where it lies: no temporary of the output's size. A fold of the whole output at once let XLA
    make a uint16 copy of it (65.7 MB for a 64 MiB bfloat16 output on the H100, 2026-11-27), which
    entered the peak of a cell whose allocator cannot be reset. Also the words after the blocks.
    (XLA's CPU compiler converts a bfloat16 output to float32 before slicing it: a whole-size
    temporary there, on the host, where only STACKWARS_DIGEST_ON_HOST=1 folds.)"""
    # the output sliced where it lies, a step's blocks at a time, each slice's bytes then read as
    # 16-bit words: a bitcast of the whole output first is a copy of it in XLA (measured on this
    # CPU: 65.7 MiB for a 64 MiB bfloat16 output, 128 MiB for a float32 one; the H100's 65.7 MB)
    flat = x.reshape(-1)
    per_block = digest.BLOCK * 2 // x.dtype.itemsize  # elements a block of 16-bit words
    blocks = flat.size // per_block
    weights = jnp.arange(1, digest.BLOCK + 1, dtype=jnp.uint32)

    def fold(elements: jax.Array) -> tuple[jax.Array, jax.Array]:
        words = jax.lax.bitcast_convert_type(elements, jnp.uint16).reshape(-1, digest.BLOCK).astype(jnp.uint32)
        return words.sum(1, dtype=jnp.uint32), (words * weights).sum(1, dtype=jnp.uint32)

    def step(i, acc):
        sums, weighted = acc
        a, b = fold(jax.lax.dynamic_slice(flat, (i * FOLD_CHUNK * per_block,), (FOLD_CHUNK * per_block,)))
        return (jax.lax.dynamic_update_slice(sums, a, (i * FOLD_CHUNK,)),
                jax.lax.dynamic_update_slice(weighted, b, (i * FOLD_CHUNK,)))

    steps = blocks // FOLD_CHUNK
    sums, weighted = jnp.zeros(blocks, jnp.uint32), jnp.zeros(blocks, jnp.uint32)
    if steps:
        sums, weighted = jax.lax.fori_loop(0, steps, step, (sums, weighted))
    if blocks > steps * FOLD_CHUNK:  # the last blocks, fewer than a step's
        a, b = fold(flat[steps * FOLD_CHUNK * per_block:blocks * per_block])
        sums, weighted = sums.at[steps * FOLD_CHUNK:].set(a), weighted.at[steps * FOLD_CHUNK:].set(b)
    return sums, weighted, jax.lax.bitcast_convert_type(flat[blocks * per_block:], jnp.uint16).reshape(-1)


def output_digest(x: Any, events: CompileEvents | None = None) -> str | None:
    """The digest of a first call's output (harness/digest.py), folded on its device: only the
    block sums, 8 bytes a block of 2^16 words, cross to the host. Its program is compiled with the
    cell's compile and cache events left out (``CompileEvents.quiet``; its executable does join
    the cell's persistent cache, one entry more). None for an output too small, not
    floating-point or in host memory (``digest.wanted``): it is copied and compared as always."""
    if not isinstance(x, jax.Array) or not digest.wanted(
            x.size, x.dtype.itemsize, bool(jnp.issubdtype(x.dtype, jnp.floating)),
            all(d.platform == "cpu" for d in x.devices())):
        return None
    sums, weighted, tail = events.quiet(_fold, x) if events is not None else _fold(x)
    return digest.finish_parts(x.dtype, x.shape, (jax.device_get(sums), jax.device_get(weighted)),
                               np.asarray(jax.device_get(tail)))


def make_optimizer(spec: Any) -> optax.GradientTransformation:
    if spec.name == "sgd":
        return optax.sgd(spec.lr)
    if spec.name == "adamw":
        return optax.adamw(spec.lr, weight_decay=spec.weight_decay)
    raise ValueError(f"unknown optimizer {spec.name!r}")


# XLA's defaults for the GPU flags that decide a comparison, as openxla's debug_options_flags.cc
# (DefaultDebugOptionsIgnoringFlags) set them when this was written. jaxlib has no API that reads
# them back (its DebugOptions binding exposes a few CPU and dump fields; XLA_FLAGS=--help aborts the
# process and its list is cut short), so the record says where each value came from: XLA_FLAGS, or
# this table, named with the jaxlib it was recorded under. What decides a comparison is also read
# from the compiled program where it can be: jax-jit counts the command buffers XLA formed.
XLA_GPU_DEFAULTS = {
    "xla_gpu_autotune_level": "4",
    "xla_gpu_enable_command_buffer": COMMAND_BUFFER_DEFAULT,
    "xla_gpu_graph_min_graph_size": "5",
    "xla_enable_command_buffers_during_profiling": "false",
}


def xla_flags_in_effect(flags: str) -> dict[str, dict[str, str]]:
    """The GPU flags above as XLA will apply them: each with its value and whether it was set
    in XLA_FLAGS or is XLA's default."""
    given = {}
    for item in flags.split():
        name, eq, value = item.lstrip("-").partition("=")
        given[name] = value if eq else "true"  # --flag= is an empty value (an empty list), not true
    import jaxlib

    assumed = f"XLA default as recorded from openxla's source (not readable from jaxlib {jaxlib.__version__})"
    return {name: {"value": given.get(name, default), "source": "XLA_FLAGS" if name in given else assumed}
            for name, default in XLA_GPU_DEFAULTS.items()}


def _reset_compilation_cache() -> None:
    """JAX opens its persistent cache once per process, at the first compile, and keeps writing
    to that folder whatever the option says later: a process that measures several cells
    (``--inline``) must reset it for the next cell's folder to take effect."""
    try:
        from jax._src import compilation_cache
    except ImportError:  # a JAX without it: a new folder is read at its first use anyway
        return
    if compilation_cache.is_initialized():
        compilation_cache.reset_cache()


def _removed_cell_folder(folder: str | None) -> bool:
    """``folder`` is a compile-cache folder stackwars made (harness/tmp.py names it) and has
    removed since; a folder the user chose is left as it is."""
    import tempfile

    from stackwars.harness.tmp import PREFIX

    return bool(folder) and folder.startswith(os.path.join(tempfile.gettempdir(), PREFIX)) \
        and not os.path.isdir(folder)


# what configure_jax sets of the persistent cache, and the values the process had before its first cell
CACHE_OPTIONS = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
                 "jax_persistent_cache_min_entry_size_bytes", "jax_persistent_cache_enable_xla_caches")
_PROCESS_CACHE: dict[str, Any] = {}


def restore_process_cache() -> None:
    """The process's own persistent-cache options again, after a cell measured in it (``--inline``)
    pointed them at the cell's folder: else every later compile of the process (a test's own, in
    the suite) was written into that folder, removed with its run (a warning each, nothing kept),
    and nothing was read from the process's own folder."""
    if not _PROCESS_CACHE or all(getattr(jax.config, k) == v for k, v in _PROCESS_CACHE.items()):
        return
    if jax.config.jax_compilation_cache_dir != _PROCESS_CACHE["jax_compilation_cache_dir"]:
        _reset_compilation_cache()
    for name, value in _PROCESS_CACHE.items():
        jax.config.update(name, value)


def configure_jax(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Matmul precision and the persistent compile cache, applied and reported."""
    precision = settings.get("matmul_precision", "float32")
    # 'float32' = Precision.HIGHEST; 'tensorfloat32' = Precision.HIGH (TF32 on GPU).
    # JAX's own default on Ampere/Hopper GPUs is TF32 while PyTorch's is full fp32.
    jax.config.update("jax_default_matmul_precision", "float32" if precision == "float32" else "tensorfloat32")
    cache = settings.get("cache_dir")
    if not _PROCESS_CACHE:
        _PROCESS_CACHE.update({name: getattr(jax.config, name) for name in CACHE_OPTIONS})
    if cache:
        folder = os.path.join(cache, "jax")
        if jax.config.jax_compilation_cache_dir not in (None, folder):
            _reset_compilation_cache()  # --inline: one process, many cells, each with its own folder
        jax.config.update("jax_compilation_cache_dir", folder)
        # cache every executable, however small or fast to compile, so warm means warm
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        # XLA's per-fusion GPU autotuning results live in the same directory (JAX's default,
        # set explicitly so the record says it): a warm cache skips autotuning too
        jax.config.update("jax_persistent_cache_enable_xla_caches", "xla_gpu_per_fusion_autotune_cache_dir")
    elif _removed_cell_folder(jax.config.jax_compilation_cache_dir):
        # --inline: an earlier cell's folder, removed with its run; this cell has none, and JAX
        # would go on writing every executable into the missing folder (a warning each). Back to
        # the process's own folder (JAX_COMPILATION_CACHE_DIR, which JAX read at import), or none
        own = os.environ.get("JAX_COMPILATION_CACHE_DIR") or None
        _reset_compilation_cache()
        jax.config.update("jax_compilation_cache_dir", None if _removed_cell_folder(own) else own)
    return {
        "jax_version": jax.__version__,
        "jax_default_matmul_precision": jax.config.jax_default_matmul_precision,
        "jax_compilation_cache_dir": jax.config.jax_compilation_cache_dir,
        "jax_persistent_cache_enable_xla_caches": jax.config.jax_persistent_cache_enable_xla_caches,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "jax_platforms": jax.config.jax_platforms,  # as JAX read it (at import: a fork server's, the cell's own)
        # on a GPU: autotuning and command buffers (XLA's CUDA graphs); no effect on the CPU
        "xla_gpu_flags": xla_flags_in_effect(os.environ.get("XLA_FLAGS", "")),
        "xla_python_client_preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"),
        "xla_python_client_mem_fraction": os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION"),
        # what the process's environment says (the key above is what JAX itself read at import)
        "jax_platforms_env": os.environ.get("JAX_PLATFORMS"),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
    }


# XLA options for the initialisation's own programs (the GEMMs and the convolution below):
# compiled, so the compiler pipeline's first use stays out of the first call, but not
# autotuned. On the H200 a cold process spent 2.1-2.6 s compiling the float32 GEMM, 0.5 s the
# bfloat16 one and 1.0 s the convolution, where a warm one read them back from its cache in
# 0.04, 0.01 and 0.19 s, most of it presumably XLA trying GEMM configurations and cuDNN
# algorithms for programs nobody measures (results/gpu-h200-2026-11-26b; the next GPU run's
# cold processes say how much this saves). Executed, they still make the
# cuBLAS, cuBLASLt and cuDNN handles PyTorch's initialisation makes too. The measured
# program's first call autotunes its own fusions, as a user's first call does.
INIT_COMPILE_OPTIONS = {"xla_gpu_autotune_level": 0}


def _init_run(fn: Callable, *args: Any, options: Mapping[str, Any]) -> Any:
    """``fn`` jitted, compiled with ``options`` and run once, synchronised."""
    compiled = jax.jit(fn).lower(*args).compile(compiler_options=dict(options))
    return jax.block_until_ready(compiled(*args))


def init_jax_device(device: str) -> dict[str, Any]:
    """JAX's client for the platform, then a GEMM compiled and executed on it (the compiler
    pipeline's and the BLAS library's first use), synchronised. On a GPU, what PyTorch's
    initialisation warms too: GEMMs in float32 and bfloat16 (cuBLAS and cuBLASLt handles and
    workspaces) and a small convolution (the cuDNN handle), so that neither framework's first
    call pays a library's start-up the other's initialisation took. These programs are not
    autotuned (``INIT_COMPILE_OPTIONS``; an XLA that does not know the option compiles them
    as it would, and the record says why); their inputs are made on the host, so nothing
    else is compiled."""
    import time

    t0 = time.perf_counter()
    dev = jax.devices("gpu" if device == "cuda" else "cpu")[0]
    steps: dict[str, Any] = {"client_s": time.perf_counter() - t0}
    options = dict(INIT_COMPILE_OPTIONS)
    n = WARM_GEMM if device == "cuda" else 8
    for dtype in ((np.float32, jnp.bfloat16) if device == "cuda" else (np.float32,)):
        t0 = time.perf_counter()
        x = jax.device_put(np.ones((n, n), dtype), dev)
        try:
            _init_run(jnp.matmul, x, x, options=options)
        except Exception as exc:  # noqa: BLE001 - only an option XLA refuses is let through
            if not options or "compile option" not in str(exc):
                raise
            steps["compile_options_refused"] = f"{type(exc).__name__}: {exc}"[:500]
            options = {}
            _init_run(jnp.matmul, x, x, options=options)
        steps["gemm_s" if dtype is np.float32 else "gemm_bf16_s"] = time.perf_counter() - t0
    if device == "cuda":
        t0 = time.perf_counter()
        img = jax.device_put(np.ones((1, 1, 8, 8), np.float32), dev)
        kernel = jax.device_put(np.ones((1, 1, 3, 3), np.float32), dev)
        _init_run(lambda a, k: jax.lax.conv(a, k, (1, 1), "SAME"), img, kernel, options=options)
        steps["conv_s"] = time.perf_counter() - t0
    steps["compile_options"] = options
    return steps


@dataclass
class JaxProgram:
    fn: Callable  # pure: forward(tree, batch) or train_step(params, opt_state, batch)
    args: tuple  # the first call's arguments
    donate: tuple[int, ...]  # argument positions a jitted step donates
    static: Any  # the twin's static part (config, NNX graphdef)
    twin: Any
    phase: str
    notes: dict[str, Any]


def trace_jax(prepared: Prepared, steps: int, path: str, cuda: bool) -> dict[str, Any]:
    """``steps`` steps under jax.profiler, each in a ``stackwars.step`` StepTraceAnnotation,
    its Perfetto (Chrome JSON) trace copied to ``path``. On a GPU, XLA turns command buffers
    (its CUDA graphs) off while profiling unless --xla_enable_command_buffers_during_profiling
    is set: the profiled step then launches kernels one by one where the timed one replayed
    graphs. The record says which held."""
    import glob
    import shutil
    import tempfile

    where = tempfile.mkdtemp(prefix="stackwars-jax-trace-")
    try:
        with jax.profiler.trace(where, create_perfetto_trace=True):
            for i in range(steps):
                with jax.profiler.StepTraceAnnotation("stackwars.step", step_num=i):
                    prepared.sync([prepared.call()])
        found = sorted(glob.glob(os.path.join(where, "**", "perfetto_trace.json.gz"), recursive=True))
        if not found:
            raise RuntimeError(f"jax.profiler wrote no perfetto_trace.json.gz under {where}")
        shutil.copyfile(found[-1], path)
    finally:
        shutil.rmtree(where, ignore_errors=True)
    info: dict[str, Any] = {"profiler": "jax.profiler (perfetto trace)", "format": "jax", "jax": jax.__version__}
    if cuda:
        flag = xla_flags_in_effect(os.environ.get("XLA_FLAGS", ""))["xla_enable_command_buffers_during_profiling"]
        info["command_buffers_while_profiling"] = flag["value"] == "true"
        info["note"] = ("XLA disabled command buffers (CUDA graphs) for the profiled steps: their launch gaps are "
                        "larger than the timed steps'" if flag["value"] != "true" else
                        "command buffers stayed on while profiling (XLA_FLAGS)")
    return info


def jax_cache_flusher(backend: Backend, device: str) -> tuple[Callable[[], None], dict[str, Any]]:
    """On a GPU: a 256 MiB device buffer rewritten by a donated jitted increment, synchronised;
    on the CPU: harness/flush.py's host buffer."""
    if device != "cuda":
        return Backend.cache_flusher(backend, device)
    from stackwars.harness.flush import GPU_FLUSH_BYTES

    buf = [jax.device_put(np.zeros(GPU_FLUSH_BYTES // 4, np.int32), backend.device)]
    bump = jax.jit(lambda b: b + 1, donate_argnums=0)

    def flush() -> None:
        buf[0] = bump(buf[0])
        buf[0].block_until_ready()

    return flush, {"bytes": GPU_FLUSH_BYTES, "cache_bytes": None, "cache": "L2 (size not exposed by JAX)",
                   "how": "a donated jitted increment of a 256 MiB device buffer before every timed call, "
                          "synchronised (triton.testing.do_bench's size)"}


GPU_ANATOMY_MARGIN = 0.10  # the compiled plan vs the allocator's peak (other live buffers, fragmentation)


def jax_anatomy(state: Sequence[Any], batch: Any, analysis: Mapping[str, int], device_peak: int | None) -> dict[str, Any]:
    """The train step's memory by part: parameters, BatchNorm-style state, optimizer state and
    inputs measured from the live arrays. With a compiled program (jit), XLA's memory
    analysis of it adds the temporaries (activations, gradients and workspace, as XLA's
    buffer assignment packs them: it need not hold every gradient at once, so they are not
    split out) and the outputs not written into donated buffers; the arguments are checked
    against the live arrays. Their sum is XLA's plan for the step; on a GPU the allocator's
    peak is set beside it. Eager JAX materialises every gradient (analytical here)."""
    from stackwars.harness import anatomy as an

    live = "live arrays after the timed steps"
    leaves = [jax.tree.leaves(x) for x in (state[0], state[1], state[2], batch)]
    params, rest, opt_state, inputs = (an.nbytes(x) for x in leaves)
    parts = {"parameters": an.part(params, an.MEASURED, live), "optimizer_state": an.part(opt_state, an.MEASURED, live),
             "inputs": an.part(inputs, an.MEASURED, live)}
    if rest:
        parts["state"] = an.part(rest, an.MEASURED, live)
    if not analysis:
        parts["gradients"] = an.part(params, an.ANALYTICAL, "one per parameter, all returned by value_and_grad")
        return an.assemble(parts, "live arrays; no compiled program (eager dispatches op by op)",
                           not_measured=["activations", "temporaries"])
    xla = "XLA memory_analysis() of the compiled step"
    args, temp = analysis["argument_size_in_bytes"], analysis["temp_size_in_bytes"]
    fresh_out = analysis["output_size_in_bytes"] - analysis.get("alias_size_in_bytes", 0)
    parts["temporaries"] = an.part(temp, an.MEASURED, f"{xla}: activations, gradients and workspace")
    parts["outputs"] = an.part(fresh_out, an.MEASURED, f"{xla}: outputs not aliased to donated arguments")
    out = an.assemble(parts, f"{live} and {xla}", device_peak,
                      "jax Device.memory_stats()['peak_bytes_in_use'] since worker start" if device_peak else None,
                      GPU_ANATOMY_MARGIN if device_peak else None)
    out["compiled"] = {"arguments": args, "arguments_from_parts": params + rest + opt_state + inputs,
                       "plan_bytes": args + temp + fresh_out, "temporaries": temp,
                       "full_gradients_bytes": params}  # analytical: what holding every gradient would take
    return out


class JaxBackend(Backend):
    framework = "jax"

    def configure(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        self.events = CompileEvents()
        return configure_jax(settings)

    def wrap(self, fn: Callable, donate: tuple[int, ...] = ()) -> Callable:
        return fn

    def init_device(self, device: str) -> dict[str, Any]:
        return init_jax_device(device)

    def program(self, workload, cfg, phase, params, batch, device, dtype) -> "JaxProgram":
        """The pure function a step runs and its first arguments: what jit compiles, what
        eager dispatches op by op, and what the IR dumps show.

        Twins may split their state into trainable parameters and the rest (BatchNorm's
        running statistics): ``partition``/``combine``, with ``loss_and_state`` returning
        the loss and the new rest; may reshape inputs on the host (``host_batch``); and may
        change their weights' layout on the host (``build_twin``)."""
        self.device = jax.devices("gpu" if device == "cuda" else "cpu")[0]
        twin = workload.twin("jax")
        pdtype = param_dtype(dtype, phase)
        cfg, choice = attention.resolve(workload, cfg, "jax", device, dtype,
                                        getattr(self.device, "compute_capability", None))
        if hasattr(twin, "host_batch"):
            batch = twin.host_batch(cfg, batch)
        static, tree = build_twin(twin, cfg, params, lambda v: to_device_array(v, pdtype, self.device))
        jbatch = {k: to_device_array(v, dtype, self.device) for k, v in batch.items()}
        notes: dict[str, Any] = {"param_dtype": pdtype, "compute_dtype": dtype}
        if choice is not None:
            notes["attention"] = choice.as_dict()
        if phase == "forward":
            return JaxProgram(partial(twin.forward, static), (tree, jbatch), (), static, twin, phase, notes)

        spec = workload.optimizer(cfg)
        tx = make_optimizer(spec)
        compute = JAX_DTYPES[dtype]
        mixed = pdtype != dtype
        partition = getattr(twin, "partition", lambda static, tree: (tree, None))
        loss_and_state = getattr(twin, "loss_and_state",
                                 lambda static, params, rest, batch: (twin.loss(static, params, batch), rest))

        def train_step(params, rest, opt_state, batch):
            def loss_of(p, r):
                if mixed:  # float32 master weights, computed in the cell's dtype
                    p = _floats_to(p, compute)
                return loss_and_state(static, p, r, batch)

            # the state (BatchNorm statistics) is an argument of the differentiated function too, so
            # that Flax NNX may update it at that trace level; its gradient is zero and discarded (float0 for an
            # integer, nnx.Dropout's RNG count: allow_int)
            (loss, rest), (grads, _) = jax.value_and_grad(loss_of, argnums=(0, 1), has_aux=True,
                                                          allow_int=True)(params, rest)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), rest, opt_state, loss

        params_tree, rest = partition(static, tree)
        notes.update(optimizer=f"optax.{spec.name}(lr={spec.lr}" + (f", weight_decay={spec.weight_decay})"
                                                                     if spec.name == "adamw" else ")"),
                     mixed_precision="params cast to compute dtype inside the loss" if mixed else None)
        return JaxProgram(train_step, (params_tree, rest, tx.init(params_tree), jbatch), (0, 1, 2), static, twin,
                          phase, notes)

    def program_text(self, prog: JaxProgram) -> tuple[str, str]:
        """The module whose custom calls say what ran, and what it is. Eager dispatches the
        step's primitives one by one; the step lowered as a whole holds the same ones."""
        abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), prog.args)
        return jax.jit(prog.fn).lower(*abstract).as_text(), "the step's lowered StableHLO (custom calls)"

    def observer(self, prog: JaxProgram):
        choice = prog.notes.get("attention")

        def observe() -> dict[str, Any]:
            if choice is None:
                return {}
            text, source = self.program_text(prog)
            return {"attention": {"ran": attention.jax_ran(text, choice["implementation"]), "observed_from": source}}

        return observe

    def prepare(self, workload, cfg, phase, params, batch, device, dtype) -> Prepared:
        prog = self.program(workload, cfg, phase, params, batch, device, dtype)
        step = self.wrap(prog.fn, prog.donate)
        twin, static = prog.twin, prog.static
        observe = self.observer(prog)

        if phase == "forward":
            tree, jbatch = prog.args

            def call():
                return step(tree, jbatch)

            def parity(out):
                return {"out": to_numpy(out)}

            return Prepared(call, parity, self.sync_all, after_first_call=self.events.mark, observe=observe,
                            notes=prog.notes, digest=lambda out: output_digest(out, self.events))

        combine = getattr(twin, "combine", lambda static, params, rest: params)
        params_tree, rest, opt_state, jbatch = prog.args
        state = [params_tree, rest, opt_state]
        initial = initial_values(params, twin.canonical(static, combine(static, params_tree, rest)),
                                 lambda v: np.asarray(jax.device_get(v), dtype=np.float32))

        def call():
            out = step(state[0], state[1], state[2], jbatch)
            state[0], state[1], state[2] = out[0], out[1], out[2]
            return out

        align = getattr(twin, "align", None)  # a user's model: Flax's running variance in PyTorch's definition

        def parity(out):
            params, rest, _, loss = out
            result = {"loss": to_numpy(loss)}
            after = {k: np.asarray(jax.device_get(v), dtype=np.float32)
                     for k, v in twin.canonical(static, combine(static, params, rest)).items()}
            for k, v in (align(static, after, initial) if align else after).items():
                result[f"update.{k}"] = update_of(v, initial[k])
            return result

        compared = getattr(twin, "buffers_compared", lambda cfg: [])(cfg)
        if compared:  # the running statistics each side started from (equal: the float64 check), then compared
            prog.notes["buffers_compared"] = compared
            prog.notes["buffers_start"] = "as each side builds them, found equal by the float64 twin check"

        prepared = Prepared(call, parity, self.sync_latest, after_first_call=self.events.mark, observe=observe,
                            notes=prog.notes)
        prepared.anatomy = lambda profile_step: jax_anatomy(state, jbatch, prepared.memory_analysis(),
                                                            self.device_peak_memory(device)[0])
        return prepared

    @staticmethod
    def sync_all(outs: Sequence[Any]) -> None:
        """Independent calls (forward): wait for every output."""
        jax.block_until_ready(outs)

    @staticmethod
    def sync_latest(outs: Sequence[Any]) -> None:
        """Chained calls (train-step): each step consumes (and may donate) the previous
        state, so the newest state depends on every earlier step; waiting on it waits on all."""
        jax.block_until_ready(outs[-1])

    def profile(self, prepared: Prepared, steps: int, path: str) -> dict[str, Any]:
        return trace_jax(prepared, steps, path, self.device.platform == "gpu")

    def cache_flusher(self, device: str) -> tuple[Callable[[], None], dict[str, Any]]:
        return jax_cache_flusher(self, device)

    def device_peak_memory(self, device: str, window=None, compiled=None) -> tuple[int | None, str | None]:
        stats = self.device.memory_stats() if device == "cuda" else None
        if not stats or "peak_bytes_in_use" not in stats:
            return None, None
        return steady_peak(window or {}, int(stats["peak_bytes_in_use"]), compiled or {})

    def start_memory_window(self, device: str) -> dict[str, Any]:
        stats = self.device.memory_stats() if device == "cuda" else None
        if not stats or "peak_bytes_in_use" not in stats:
            return {}
        return {"phase": "memory", "peak_before_bytes": int(stats["peak_bytes_in_use"]), "resets": False,
                "resident_bytes": int(stats["bytes_in_use"]),
                "how": "no reset in XLA's allocator: the bytes in use right before the memory phase's call, and the "
                       "peak until then"}


def steady_peak(window: Mapping[str, Any], peak_now: int, compiled: Mapping[str, int]) -> tuple[int | None, str]:
    """XLA's peak over one call of a compiled program, as PyTorch's allocator reports it after a
    reset. XLA's allocator has no reset, so its peak reading holds whatever came before the
    call: a cold process's compile and autotuning scratch (gpt2 paper bf16 jax-jit on an H100:
    2100 MiB in its cold process, 1163-1299 MiB in its warm ones) and the harness's digest.
    Where the program is one compiled executable, its peak over a call is what was resident
    before it (parameters, inputs, the program's state) plus what XLA's buffer assignment adds
    for the call: its temporaries and its outputs, less the outputs that reuse donated inputs
    (``memory_analysis``); the same in a cold process as in a warm one. Without an analysis (a
    program run op by op), the reading is the call's only where the call raised it; else no
    figure, and the counter says why."""
    resident = window.get("resident_bytes")
    if resident is not None and "temp_size_in_bytes" in compiled and "output_size_in_bytes" in compiled:
        extra = (compiled["temp_size_in_bytes"] + compiled["output_size_in_bytes"]
                 - compiled.get("alias_size_in_bytes", 0))
        return (int(resident + max(0, extra)),
                "XLA: bytes in use before the memory phase's call (parameters, inputs, state) + the compiled "
                "program's temporaries and outputs less its aliased outputs (memory_analysis); its allocator's "
                "peak, which cannot be reset and holds compile and autotuning scratch, is kept apart "
                f"({peak_now} bytes)")
    before = window.get("peak_before_bytes")
    if before is not None and peak_now > before:
        return peak_now, ("jax Device.memory_stats()['peak_bytes_in_use'], raised by the memory phase's call above "
                          "everything before it (compile, autotuning, the harness): the call's own peak")
    return None, ("no figure: XLA's allocator cannot reset its peak, the memory phase's call did not raise it above "
                  "what came before (compile, autotuning, the harness), and the program is no single executable "
                  "whose memory analysis would give it")
