"""What every PyTorch backend shares: settings, conversion, phases, sync, memory.

Subclasses change one thing, ``wrap(fn)``: eager returns ``fn``, torch.compile
returns the compiled function. The phases are built here, once:

* forward: ``twin.forward(model, batch)`` under ``torch.inference_mode()``;
* train-step: ``twin.loss`` (under ``torch.autocast`` when training bfloat16 on float32
  master weights), ``loss.backward()``, ``optimizer.step()``, ``zero_grad``.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from stackwars.backends.base import WARM_GEMM, Backend, Prepared
from stackwars.errors import Unsupported
from stackwars.harness import digest
from stackwars.workloads import attention
from stackwars.workloads.base import initial_values, param_dtype, update_of

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def to_tensor(x: np.ndarray, dtype: str, device) -> torch.Tensor:
    """Floats in the cell's dtype (via float32, so bfloat16 rounds exactly as the reference's
    inputs did); integers (token ids, labels) as int64, as embeddings and losses want them.
    Always a copy: a tensor sharing the caller's array would let an in-place optimizer step
    change the inputs the reference is computed from."""
    if np.issubdtype(np.asarray(x).dtype, np.integer):
        return torch.from_numpy(np.ascontiguousarray(x, dtype=np.int64)).to(device=device, copy=True)
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(device=device, dtype=TORCH_DTYPES[dtype],
                                                                          copy=True)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor on the host for the parity check: bfloat16, float16 and float32 as the device
    holds them (the comparison widens each slice to float64 as it subtracts, parity.compare),
    float64 otherwise; as JAX's (jax_common.to_numpy). bfloat16 crosses as its bits (PyTorch's
    ``numpy()`` has none) and is read back as ml_dtypes' bfloat16, exactly: half the bytes
    a float32 copy of a model's logits moved and allocated in a fresh process."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.cpu().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    if t.dtype in (torch.float16, torch.float32):
        return t.cpu().numpy()
    return t.to(device="cpu", dtype=torch.float64).numpy()


FOLD_BLOCKS = 8  # digest blocks folded at once: 4 MiB of int64, the most the fold adds to the device's peak


def output_digest(t: Any) -> str | None:
    """The digest of a first call's output (harness/digest.py), folded where it lies: on a GPU
    only the block sums, 8 bytes a block of 2^16 words, cross to the host. None for an output
    too small, not floating-point or in host memory (``digest.wanted``): it is copied and
    compared as always."""
    if not isinstance(t, torch.Tensor) or not digest.wanted(t.numel(), t.element_size(), t.is_floating_point(),
                                                            t.device.type == "cpu"):
        return None
    words = t.detach().contiguous().reshape(-1).view(torch.int16)
    whole = words.numel() - words.numel() % digest.BLOCK
    blocks = words[:whole].view(-1, digest.BLOCK)
    weights = torch.arange(1, digest.BLOCK + 1, dtype=torch.int64, device=t.device)
    sums = torch.empty(blocks.shape[0], dtype=torch.int64, device=t.device)
    weighted = torch.empty_like(sums)
    for i in range(0, blocks.shape[0], FOLD_BLOCKS):
        b = blocks[i:i + FOLD_BLOCKS].to(torch.int64).bitwise_and_(0xFFFF)  # the words as unsigned
        torch.sum(b, 1, out=sums[i:i + FOLD_BLOCKS])
        torch.sum(b.mul_(weights), 1, out=weighted[i:i + FOLD_BLOCKS])  # exact: under 2^48
    tail = words[whole:].cpu().numpy().view(np.uint16)
    mod = (sums.cpu().numpy() & 0xFFFFFFFF, weighted.cpu().numpy() & 0xFFFFFFFF)
    return digest.finish_parts(t.dtype, t.shape, mod, tail)


def make_optimizer(spec: Any, parameters, impl: str = "default") -> torch.optim.Optimizer:
    """``impl``: PyTorch's own default (the per-tensor for-loop on the CPU, foreach on CUDA),
    or one of its implementations named: for-loop, foreach (multi-tensor ops), fused (one kernel)."""
    kwargs = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True},
              "default": {}}[impl]
    if spec.name == "sgd":
        return torch.optim.SGD(parameters, lr=spec.lr, **kwargs)
    if spec.name == "adamw":
        return torch.optim.AdamW(parameters, lr=spec.lr, weight_decay=spec.weight_decay, **kwargs)
    raise ValueError(f"unknown optimizer {spec.name!r}")


VEC_ISA_FOLDER = "inductor-vec-isa"  # in stackwars's cache folder (harness/tmp.py: cache_root)


def vec_isa_check_per_machine() -> dict[str, Any]:
    """Inductor picks the CPU's vector instruction set at its first CPU kernel in a process by
    building a test program for each candidate with g++ and loading it
    (``cpu_vec_isa.valid_vec_isa_list``: 3.8 s in an empty cache folder on the 2-core VM, 0.5-0.7 s
    where the programs are built). It keeps the built programs in its cache folder, keyed by
    compiler, flags and PyTorch version (pytorch/pytorch#100378), so a user builds them once a
    machine and each process of theirs only loads them. A cell's first process has an empty
    cache folder of its own, so that its first call is its program's cold compile; the build
    would land in that call every time. Here the check is pointed at one folder for the
    machine instead, when Inductor first asks for it (inside the first call, as in a user's
    process): built once, then only loaded; the cell's own compiles stay in its folder.
    Returns what to record."""
    import os

    from torch._inductor import cpu_vec_isa

    from stackwars.harness.tmp import cache_root

    real = getattr(cpu_vec_isa, "valid_vec_isa_list", None)
    if real is None or not hasattr(real, "cache_info"):  # another PyTorch: Inductor's own way
        return {"checked": "in the cell's cache folder (this PyTorch has no memoised valid_vec_isa_list)"}
    folder = cache_root() / VEC_ISA_FOLDER
    said = {"checked": f"in {folder}, built once a machine, loaded on the first compile that needs it"}
    if getattr(real, "machine_folder", None) == str(folder):  # pointed there earlier in this process
        return said
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return {"checked": f"in the cell's cache folder ({folder}: {exc.strerror})"}
    inner = getattr(real, "__wrapped_list__", real)

    def valid_vec_isa_list() -> list:
        if inner.cache_info().currsize:  # answered in this process: nothing is built or read
            return inner()
        before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)  # read on each use (cache_dir_utils.cache_dir)
        try:
            return inner()
        finally:
            if before is None:
                os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
            else:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = before

    valid_vec_isa_list.cache_info, valid_vec_isa_list.cache_clear = inner.cache_info, inner.cache_clear
    valid_vec_isa_list.__wrapped_list__ = inner
    valid_vec_isa_list.machine_folder = str(folder)
    cpu_vec_isa.valid_vec_isa_list = valid_vec_isa_list  # pick_vec_isa, its one caller, looks it up here
    return said


def optimizer_plan(spec: Any, parameters, choice: str, compiled_backend: bool
                   ) -> tuple[torch.optim.Optimizer, Callable[[], None], str]:
    """The optimizer and its step, as ``choice`` asks: ``fast`` is what PyTorch's own guidance
    gives for speed: the fused implementation (one kernel for all parameters, on every device
    PyTorch has fused kernels for, the CPU included) in eager mode, and under torch.compile the
    step compiled too (PyTorch's "compiling the optimizer" recipe: Inductor fuses the foreach
    implementation's update, as JAX's optax update is inside its jit); ``compiled`` compiles
    the step in any mode; the others construct that implementation with an eager step.
    Returns (optimizer, step, what ran)."""
    parameters = list(parameters)
    compile_step = choice == "compiled" or (choice == "fast" and compiled_backend)
    impl = "foreach" if compile_step else ("fused" if choice == "fast" else choice)
    try:
        opt = make_optimizer(spec, parameters, impl)
    except (RuntimeError, ValueError) as exc:  # no fused kernel for these tensors: the multi-tensor one
        if impl != "fused" or choice != "fast":
            raise
        opt = make_optimizer(spec, parameters, "foreach")
        impl = f"foreach (fused unavailable: {str(exc).splitlines()[0][:120]})"
    ran = optimizer_ran(opt) if not impl.startswith("foreach (") else impl
    if not compile_step:
        return opt, opt.step, ran

    @torch.compile(fullgraph=False)
    def step() -> None:
        opt.step()

    return opt, step, f"{ran}, step compiled (torch.compile)"


def optimizer_ran(opt: torch.optim.Optimizer) -> str:
    """Which implementation the optimizer's step runs: as set, or as PyTorch's default rule
    resolves it for these parameters (torch.optim.optimizer._default_to_fused_or_foreach)."""
    if opt.defaults.get("fused"):
        return "fused"
    if opt.defaults.get("foreach") is not None:
        return "foreach" if opt.defaults["foreach"] else "for-loop"
    try:
        from torch.optim.optimizer import _default_to_fused_or_foreach

        params = [p for g in opt.param_groups for p in g["params"]]
        fused, foreach = _default_to_fused_or_foreach(params, differentiable=False, use_fused=False)
        return "default: " + ("fused" if fused else "foreach" if foreach else "for-loop")
    except Exception:  # noqa: BLE001 - a private helper; the record then says only "default"
        return "default"


def configure_torch(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Thread budget and matmul precision, applied and reported."""
    applied: dict[str, Any] = {"torch_version": torch.__version__}
    threads = settings.get("threads")
    if threads:
        torch.set_num_threads(int(threads))
        with contextlib.suppress(RuntimeError):  # only settable before parallel work starts
            torch.set_num_interop_threads(int(threads))
    applied["torch_num_threads"] = torch.get_num_threads()
    applied["torch_num_interop_threads"] = torch.get_num_interop_threads()
    precision = settings.get("matmul_precision", "float32")
    torch.set_float32_matmul_precision("highest" if precision == "float32" else "high")
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"
    applied["torch_float32_matmul_precision"] = torch.get_float32_matmul_precision()
    applied["torch_cuda_matmul_allow_tf32"] = torch.backends.cuda.matmul.allow_tf32
    applied["torch_cudnn_allow_tf32"] = torch.backends.cudnn.allow_tf32
    return applied


def init_torch_device(device: str) -> dict[str, Any]:
    """CUDA context (or nothing on the CPU), then a GEMM (cuBLAS handle; the CPU's BLAS thread
    pool) and on CUDA a bfloat16 GEMM (cuBLASLt) and a small convolution (cuDNN handle), each
    synchronised: the same warm-up as JAX's (jax_common.init_jax_device)."""
    import time

    dev = torch.device(device)
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    steps: dict[str, Any] = {}
    t0 = time.perf_counter()
    n = WARM_GEMM if dev.type == "cuda" else 8
    x = torch.ones(n, n, device=dev)
    sync()
    steps["context_s"] = time.perf_counter() - t0
    for dtype in ((torch.float32, torch.bfloat16) if dev.type == "cuda" else (torch.float32,)):
        t0 = time.perf_counter()
        y = x.to(dtype)
        (y @ y).sum().item()
        steps["gemm_s" if dtype is torch.float32 else "gemm_bf16_s"] = time.perf_counter() - t0
    if dev.type == "cuda":
        t0 = time.perf_counter()
        torch.nn.functional.conv2d(torch.ones(1, 1, 8, 8, device=dev), torch.ones(1, 1, 3, 3, device=dev),
                                   padding=1).sum().item()
        steps["conv_s"] = time.perf_counter() - t0
    return steps


class CudaEvents:
    """One sample's pair of CUDA events on the current stream: the GPU's own clock from the
    start event (recorded before the sample's clock starts: the device is idle after the last
    synchronisation, so it is stamped at once) to the end event (recorded after the sample's
    last call, inside the timed region: about 2 microseconds of the host's time)."""

    __slots__ = ("a", "b")

    def __init__(self):
        self.a, self.b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def start(self) -> None:
        self.a.record()

    def end(self) -> None:
        self.b.record()

    def seconds(self) -> float:
        return self.a.elapsed_time(self.b) / 1e3  # read after the sample's synchronisation


def trace_torch(prepared: Prepared, steps: int, path: str, cuda: bool) -> dict[str, Any]:
    """``steps`` steps under torch.profiler (CPU operators; on CUDA also CUPTI's kernels and
    copies), each in a ``stackwars.step#i`` record_function, written as gzipped Chrome JSON."""
    import gzip

    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for i in range(steps):
            with record_function(f"stackwars.step#{i}"):
                prepared.sync([prepared.call()])
    with gzip.open(path, "wb") as dst:
        dst.write(chrome_trace(prof))
    return {"profiler": f"torch.profiler ({', '.join(a.name for a in activities)})", "format": "torch",
            "torch": torch.__version__}


def capture_graph(call: Callable[[], Any], device: torch.device) -> Callable[[], Any]:
    """One call captured into a CUDA graph (after three calls on a side stream, as PyTorch's
    CUDA-graph recipe asks), and its replay: the launch cost of every kernel is gone, what
    remains is the kernels' time (triton.testing.do_bench_cudagraph's view of an op)."""
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for _ in range(3):
            call()
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = call()

    def replay() -> Any:
        graph.replay()
        return out

    return replay


# torch.profiler's memory categories -> the anatomy's parts (harness/anatomy.py)
MEMORY_CATEGORIES = {"PARAMETER": "parameters", "GRADIENT": "gradients", "OPTIMIZER_STATE": "optimizer_state",
                     "INPUT": "inputs", "ACTIVATION": "activations", "AUTOGRAD_DETAIL": "activations",
                     "TEMPORARY": "temporaries", None: "unattributed"}
CUDA_ANATOMY_MARGIN = 0.10  # allocator rounding, cuBLAS/cuDNN workspaces: the parts vs the allocator's peak
CPU_ANATOMY_MARGIN = 0.05  # the categorised peak vs the allocator's own count: they should agree closely


def torch_anatomy(prepared: Prepared, model: torch.nn.Module, opt: torch.optim.Optimizer,
                  batch: Mapping[str, torch.Tensor], device: torch.device, profile_step: bool) -> dict[str, Any]:
    """The train step's memory by part. Without ``profile_step``: parameters, optimizer state
    and inputs measured from the live tensors, gradients analytical (set to None between
    steps), activations not measured. With it: one more step under torch.profiler's memory
    profile, every tensor categorised by the profiler, the parts read at the step's peak;
    on CUDA the allocator's peak over that step is set beside their sum."""
    from stackwars.harness import anatomy as an

    live = "live tensors after the timed steps"
    params = an.nbytes(model.parameters())
    opt_state = an.nbytes(t for st in opt.state.values() for t in st.values() if isinstance(t, torch.Tensor))
    if not profile_step:
        return an.assemble({"parameters": an.part(params, an.MEASURED, live),
                            "gradients": an.part(params, an.ANALYTICAL, "one per parameter, in its dtype"),
                            "optimizer_state": an.part(opt_state, an.MEASURED, live),
                            "inputs": an.part(an.nbytes(batch.values()), an.MEASURED, live)},
                           "live tensors; activations need a profiled step (--profile N)",
                           not_measured=["activations", "temporaries"])
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX, MemoryProfileTimeline

    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities, profile_memory=True, record_shapes=True, with_stack=True) as prof:
        prepared.sync([prepared.call()])
    # private API (torch >= 2.1): the profiler's own categorisation of every tensor over the step;
    # its tensors carry an indexed device (cuda:0), which "cuda" alone would not match
    where = torch.device("cuda", torch.cuda.current_device()) if cuda and device.index is None else device
    _, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline(str(where))
    if not sizes:
        raise RuntimeError(f"the memory profile recorded no tensor on {where}")
    at_peak = max(sizes, key=sum)
    parts: dict[str, int] = {}
    for category, index in _CATEGORY_TO_INDEX.items():
        name = MEMORY_CATEGORIES[category.name if category is not None else None]
        parts[name] = parts.get(name, 0) + int(at_peak[index + 1])
    source = "torch.profiler memory profile of one more step, at its peak"
    if cuda:
        peak, how = int(torch.cuda.max_memory_allocated(device)), "torch.cuda.max_memory_allocated over that step"
    else:  # the allocator's own running total (its [memory] events) on top of what existed before the step
        peak = sum(sizes[0]) + allocator_high_water(prof)
        how = ("tensors alive before the step + the CPU allocator's high-water mark during it (the profiler's "
               "[memory] events)")
    return an.assemble({k: an.part(v, an.MEASURED, source) for k, v in parts.items()}, source, peak, how,
                       CUDA_ANATOMY_MARGIN if cuda else CPU_ANATOMY_MARGIN)


def chrome_trace(prof) -> bytes:
    """A finished torch.profiler profile as Chrome trace JSON (torch exports only to a file)."""
    import os
    import tempfile

    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path, "rb") as f:
            return f.read()
    finally:
        os.unlink(path)


def allocator_high_water(prof) -> int:
    """The largest 'Total Allocated' of the CPU allocator's [memory] events in a profile: bytes
    allocated during the profiled region beyond what it started with."""
    import json

    events = json.loads(chrome_trace(prof))["traceEvents"]
    totals = [e["args"].get("Total Allocated", 0) for e in events
              if e.get("name") == "[memory]" and (e.get("args") or {}).get("Device Type") == 0]
    return int(max(totals, default=0))


class TorchBackend(Backend):
    framework = "torch"
    compiles = False  # torch.compile'd modes: their "fast" optimizer step is compiled too

    def configure(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        return configure_torch(settings)

    def wrap(self, fn: Callable) -> Callable:
        return fn

    def device_events(self, device: str):
        if device != "cuda":
            return Backend.device_events(self, device)
        return CudaEvents, None

    def init_device(self, device: str) -> dict[str, Any]:
        return init_torch_device(device)

    def before_call(self) -> None:
        """Hook run at the start of every step (CUDA graphs need a step marker)."""

    def choose_attention(self, workload, cfg, device: str, dtype: str):
        cc = ".".join(map(str, torch.cuda.get_device_capability(self.device))) if device == "cuda" else None
        cfg, choice = attention.resolve(workload, cfg, "torch", device, dtype, cc)
        if choice is not None and choice.implementation == "efficient" and device != "cuda":
            raise Unsupported("attention=efficient: PyTorch has no memory-efficient attention kernel on the CPU")
        return cfg, choice

    def observer(self, choice, call: Callable[[], Any]) -> Callable[[], dict[str, Any]]:
        """One extra call under torch.profiler, after the timed ones: the SDPA kernel that
        PyTorch dispatched, read from the operators (and on CUDA the kernels) that ran. For a
        train step, ``call`` is the step's forward alone: the dispatch happens there, the
        backward runs the chosen kernel's backward, and profiling the whole step cost a GPT-2
        cell a second of the harness's time."""

        def observe() -> dict[str, Any]:
            if choice is None:
                return {}
            from torch.profiler import ProfilerActivity, profile

            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device.type == "cuda" else [])
            with profile(activities=activities) as prof:
                self.sync([call()])
            names = [e.name for e in prof.events()]
            ran = attention.torch_ran(names)
            source = "aten operators of one profiled call (a train step: its forward)"
            if ran is None and choice.implementation != "naive":
                ran = attention.torch_ran_kernels(names)
                source = "CUDA kernel names of one profiled call (no SDPA operator dispatched: a replayed graph)"
            if ran is None:
                ran = "naive" if choice.implementation == "naive" else "not observed"
            found = {"ran": ran, "observed_from": source}
            if hasattr(torch._C, "_get_sdp_priority_order"):
                from torch.nn.attention import SDPBackend
                names = {int(getattr(SDPBackend, n)): n.lower() for n in dir(SDPBackend) if n.isupper()}
                found["sdp_priority_order"] = [names.get(int(i), str(i)) for i in torch._C._get_sdp_priority_order()]
            return {"attention": found}

        return observe

    def prepare(self, workload, cfg, phase, params, batch, device, dtype) -> Prepared:
        self.device = torch.device(device)
        twin = workload.twin("torch")
        pdtype = param_dtype(dtype, phase)
        cfg, choice = self.choose_attention(workload, cfg, device, dtype)
        model = twin.build(cfg, {k: to_tensor(v, pdtype, self.device) for k, v in params.items()})
        tbatch = {k: to_tensor(v, dtype, self.device) for k, v in batch.items()}
        notes: dict[str, Any] = {"param_dtype": pdtype, "compute_dtype": dtype}
        inductor = self.compiles or (phase == "train-step" and self.options.get("optimizer_impl") == "compiled")
        if inductor and self.device.type == "cpu":  # the machine's check built once a machine
            notes["inductor_vec_isa"] = vec_isa_check_per_machine()
        if choice is not None:
            notes["attention"] = choice.as_dict()
        before = self.before_call

        if phase == "forward":
            model.eval()
            fwd = self.wrap(twin.forward)
            notes["grad_mode"] = "torch.inference_mode"

            def call():
                before()
                with torch.inference_mode():
                    return fwd(model, tbatch)

            def parity(out):
                return {"out": to_numpy(out)}

            prepared = Prepared(call, parity, self.sync, observe=self.observer(choice, call), notes=notes,
                                digest=output_digest)
            if self.device.type == "cuda":
                prepared.graph_replay = lambda: capture_graph(call, self.device)
            return prepared

        model.train()
        spec = workload.optimizer(cfg)
        opt_choice = self.options.get("optimizer_impl", "fast")
        opt, opt_step, ran = optimizer_plan(spec, model.parameters(), opt_choice, self.compiles)
        loss_fn = self.wrap(twin.loss)
        mixed = pdtype != dtype
        autocast = (torch.autocast(device_type=self.device.type, dtype=TORCH_DTYPES[dtype])
                    if mixed else contextlib.nullcontext())
        notes.update(optimizer=f"torch.optim.{type(opt).__name__}(lr={spec.lr})", optimizer_impl=ran,
                     optimizer_choice=opt_choice,
                     mixed_precision="torch.autocast" if mixed else None)
        compared = getattr(twin, "buffers_compared", lambda cfg: [])(cfg)
        if compared:  # a user's model's BatchNorm statistics: its update compared with the reference's
            notes["buffers_compared"] = compared
            notes["buffers_start"] = "as each side builds them, found equal by the float64 twin check"
        initial = initial_values(params, {k: v.detach() for k, v in twin.canonical(model).items()},
                                 lambda v: v.to("cpu", copy=True).float().numpy())

        def call():
            before()
            with autocast:
                loss = loss_fn(model, tbatch)
            loss.backward()
            opt_step()
            opt.zero_grad(set_to_none=True)
            return loss

        def parity(loss):
            out = {"loss": to_numpy(loss)}
            for k, v in twin.canonical(model).items():
                out[f"update.{k}"] = update_of(v.detach().to("cpu", torch.float32).numpy(), initial[k])
            return out

        def step_forward():  # where SDPA is dispatched (grad enabled, as in the step); its backward follows
            before()
            with autocast:
                return loss_fn(model, tbatch)

        prepared = Prepared(call, parity, self.sync, observe=self.observer(choice, step_forward), notes=notes)
        prepared.anatomy = lambda profile_step: torch_anatomy(prepared, model, opt, tbatch, self.device, profile_step)
        return prepared

    def sync(self, outs: Sequence[Any]) -> None:
        # CPU tensors are computed when the op returns; CUDA work is queued on streams.
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def profile(self, prepared: Prepared, steps: int, path: str) -> dict[str, Any]:
        return trace_torch(prepared, steps, path, self.device.type == "cuda")

    def cache_flusher(self, device: str) -> tuple[Callable[[], None], dict[str, Any]]:
        if device != "cuda":
            return super().cache_flusher(device)
        from stackwars.harness.flush import GPU_FLUSH_BYTES

        buf = torch.empty(GPU_FLUSH_BYTES // 4, dtype=torch.int32, device=self.device)

        def flush() -> None:
            buf.zero_()
            torch.cuda.synchronize(self.device)

        l2 = torch.cuda.get_device_properties(self.device).L2_cache_size
        return flush, {"bytes": GPU_FLUSH_BYTES, "cache_bytes": l2, "cache": "L2 (torch.cuda.get_device_properties)",
                       "how": "zero_() of a 256 MiB device buffer before every timed call, synchronised "
                              "(triton.testing.do_bench's method)"}

    def device_peak_memory(self, device: str, window=None, compiled=None) -> tuple[int | None, str | None]:
        if device != "cuda":
            return None, None
        return (int(torch.cuda.max_memory_allocated(self.device)),
                "torch.cuda.max_memory_allocated over one call of the memory phase (peak reset just before it; "
                "parameters, inputs and the program's state resident; compile and autotuning behind it)")

    def start_memory_window(self, device: str) -> dict[str, Any]:
        if device != "cuda":
            return {}
        before = int(torch.cuda.max_memory_allocated(self.device))
        torch.cuda.reset_peak_memory_stats(self.device)
        return {"phase": "memory", "peak_before_bytes": before, "resets": True,
                "resident_bytes": int(torch.cuda.memory_allocated(self.device)),
                "how": "torch.cuda.reset_peak_memory_stats right before the memory phase's call"}
