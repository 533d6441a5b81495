"""A PyTorch program as StableHLO, parameters lifted to arguments (torch-mlir, optional).

The program is the twin's own ``forward``/``loss`` made a pure function of
(parameters, batch) with ``torch.func.functional_call``; a train step adds
``torch.func.grad_and_value`` and the optimizer update, so the exported function maps
(parameters, batch) to (new parameters, loss) like the JAX train step. ``make_fx``
traces it to ATen (core decompositions; attention through SDPA's math backend, since
torch-mlir cannot lower the fused CPU kernel's backward), and
``torch_mlir.fx.stateless_fx_import`` turns the graph into StableHLO.

Matmul precision is pinned in the text as JAX pins it: every ``dot_general`` gets
``precision = [HIGHEST, HIGHEST]`` (float32) or ``[HIGH, HIGH]`` (tf32); without it XLA
would use its default, TF32 on recent GPUs.

An export can be saved (``<name>.mlir`` + ``<name>.json`` describing arguments and
outputs) and run elsewhere, e.g. exported on a CPU machine and run on a GPU machine
whose image lacks torch-mlir.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from stackwars.errors import SpecError, Unsupported
from stackwars.workloads.base import param_dtype

INSTALL_HINT = ("PyTorch -> StableHLO needs torch-mlir, an optional extra: pip install torch-mlir "
                "(or pip install 'stackwars[mlir]'); alternatively run an exported file with "
                "--stablehlo FILE")
PRECISION = {"float32": "HIGHEST", "tf32": "HIGH"}


def require_torch_mlir():
    try:
        from torch_mlir import fx
    except Exception as exc:  # noqa: BLE001 - absent or broken: the same advice
        raise Unsupported(f"{INSTALL_HINT} ({type(exc).__name__}: {exc})") from None
    return fx


@dataclass
class TorchExport:
    text: str  # the StableHLO module
    arg_names: list[str]  # "param:<module name>" then "batch:<key>"
    arg_shapes: list[list[int]]
    arg_dtypes: list[str]
    out_names: list[str]  # "out", or "param:<module name>"... then "loss"
    meta: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def save(self, directory: Path, name: str) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{name}.mlir"
        path.write_text(self.text)
        side = asdict(self)
        side.pop("text")
        (directory / f"{name}.json").write_text(json.dumps(side, indent=1))
        return path

    @classmethod
    def load(cls, path: str | Path) -> "TorchExport":
        """Read an exported file and its description; anything else is refused with what was
        expected (a random file, a truncated description, a module of another kind)."""
        path = Path(path)
        side = path.with_suffix(".json")
        made_by = "written by `stackwars ir ... --framework torch --stage stablehlo`"
        if not path.is_file() or not side.is_file():
            raise SpecError(f"--stablehlo {path}: expected {path.name} and its description {side.name} ({made_by})")
        try:
            text = path.read_text()
            description = json.loads(side.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise SpecError(f"--stablehlo {path}: not an exported StableHLO program ({made_by}): {exc}") from None
        needed = {"arg_names", "arg_shapes", "arg_dtypes", "out_names", "meta"}
        if not isinstance(description, dict) or not needed <= set(description):
            raise SpecError(f"--stablehlo {side}: a description lists {', '.join(sorted(needed))} ({made_by})")
        if "func.func" not in text or "stablehlo." not in text:
            raise SpecError(f"--stablehlo {path}: no StableHLO function in the file ({made_by})")
        fields = {k: v for k, v in description.items() if k in cls.__dataclass_fields__}
        return cls(text=text, **fields)

    def check_matches(self, expected: dict[str, Any]) -> None:
        """An exported file runs only the cell it was exported for."""
        diffs = [f"{k}: file has {self.meta.get(k)!r}, cell wants {v!r}" for k, v in expected.items()
                 if self.meta.get(k) != v]
        if diffs:
            raise SpecError("the StableHLO file does not match this cell (" + "; ".join(diffs) + ")")


class _ExplicitBatchNorm:
    """While active, BatchNorm modules compute PyTorch's BatchNorm out of place: normalise
    with the biased batch variance, and put the new running statistics (updated with the
    unbiased variance, momentum as PyTorch's) in ``store`` instead of writing them into
    buffers. The in-place updates of the built-in op do not survive torch-mlir's import."""

    def __init__(self, names: dict[Any, str], store: dict[str, Any]):
        self.names, self.store = names, store

    def __enter__(self):
        import torch
        from torch.nn.modules.batchnorm import _BatchNorm

        names, store = self.names, self.store

        def forward(bn, x):
            shape = [1, -1] + [1] * (x.dim() - 2)
            axes = [0] + list(range(2, x.dim()))
            if bn.training:
                mean, var = x.mean(axes), x.var(axes, unbiased=False)
                n = x.numel() // x.shape[1]
                m = bn.momentum
                store[f"{names[bn]}.running_mean"] = (1 - m) * bn.running_mean + m * mean
                store[f"{names[bn]}.running_var"] = (1 - m) * bn.running_var + m * var * n / (n - 1)
            else:
                mean, var = bn.running_mean, bn.running_var
            y = (x - mean.view(shape)) * torch.rsqrt(var.view(shape) + bn.eps)
            return y * bn.weight.view(shape) + bn.bias.view(shape)

        self.saved = _BatchNorm.forward
        _BatchNorm.forward = forward
        return self

    def __exit__(self, *exc):
        from torch.nn.modules.batchnorm import _BatchNorm
        _BatchNorm.forward = self.saved


class _Functional:
    """Stands in for the module inside the twin's forward/loss: calls it with given tensors."""

    def __init__(self, module, tensors):
        self.module, self.tensors = module, tensors

    def __call__(self, *args, **kwargs):
        import torch
        return torch.func.functional_call(self.module, self.tensors, args, kwargs)


def state_buffers(model, canonical: dict[str, Any]) -> list[str]:
    """Names of the buffers that are part of the canonical layout (BatchNorm's running
    statistics): state a functional program takes and returns beside the parameters."""
    return [k for k, _ in model.named_buffers() if k in canonical]


def functional_program(workload, cfg, phase: str, params: dict[str, np.ndarray], batch: dict[str, np.ndarray],
                       dtype: str) -> tuple[Callable, tuple, list[str], list[str], Any]:
    """(fn, example_args, arg_names, out_names, model) for the cell's phase.

    Arguments: parameters, buffers (BatchNorm statistics), for AdamW its moments and step
    count, then the batch; a train step returns the new value of every state argument, in
    the same order, then the loss, so a runtime can feed its outputs back as inputs."""
    import torch

    from stackwars.backends.torch_common import TORCH_DTYPES, to_tensor

    twin = workload.twin("torch")
    pdtype = param_dtype(dtype, phase)
    model = twin.build(cfg, {k: to_tensor(v, pdtype, "cpu") for k, v in params.items()})
    model.train(phase == "train-step")
    names = [n for n, _ in model.named_parameters()]
    canonical = twin.canonical(model)
    bnames = state_buffers(model, canonical)
    counters = {k: v for k, v in model.named_buffers() if k.endswith("num_batches_tracked")}
    bkeys = sorted(batch)
    state = [p.detach() for _, p in model.named_parameters()] + [canonical[k].detach() for k in bnames]
    state_names = [f"param:{n}" for n in names] + [f"buffer:{k}" for k in bnames]
    P, NB = len(names), len(bnames)
    from torch.nn.modules.batchnorm import _BatchNorm
    bn_names = {m: n for n, m in model.named_modules() if isinstance(m, _BatchNorm)}

    def split(flat):
        p = dict(zip(names, flat[:P]))
        work = dict(zip(bnames, flat[P:P + NB]))  # read only: _ExplicitBatchNorm returns the new statistics
        return p, work

    # BatchNorm's step counter matters only with momentum=None (never here); set to None,
    # BatchNorm skips an integer in-place increment that torch-mlir cannot lower
    no_counters = {k: None for k in counters}

    def batch_args():  # integers as int32 (what a JAX runtime holds), widened inside the program
        return tuple(torch.from_numpy(np.ascontiguousarray(batch[k], dtype=np.int32))
                     if np.issubdtype(batch[k].dtype, np.integer) else to_tensor(batch[k], dtype, "cpu")
                     for k in bkeys)

    def widen(b):
        return {k: v.long() if not v.is_floating_point() else v for k, v in b.items()}

    if phase == "forward":
        def forward(*flat):
            p, work = split(flat)
            with _ExplicitBatchNorm(bn_names, {}):
                return twin.forward(_Functional(model, {**p, **work, **no_counters}),
                                    widen(dict(zip(bkeys, flat[P + NB:]))))

        args = tuple(state) + batch_args()
        return forward, args, state_names + [f"batch:{k}" for k in bkeys], ["out"], model

    spec = workload.optimizer(cfg)
    if spec.name not in ("sgd", "adamw"):
        raise Unsupported(f"the exported train step implements SGD and AdamW, not {spec.name}")
    adam = spec.name == "adamw"
    compute = TORCH_DTYPES[dtype]
    mixed = pdtype != dtype
    b1, b2, eps = 0.9, 0.999, 1e-8  # torch.optim.AdamW's and optax.adamw's defaults
    n_opt = 2 * P + 1 if adam else 0

    def train_step(*flat):
        p, work = split(flat)
        opt = flat[P + NB:P + NB + n_opt]
        b = widen(dict(zip(bkeys, flat[P + NB + n_opt:])))

        def loss(p):
            if mixed:  # float32 master weights, bfloat16 compute (as the JAX step does)
                p = {k: v.to(compute) for k, v in p.items()}
            store: dict[str, Any] = {}
            with _ExplicitBatchNorm(bn_names, store):
                value = twin.loss(_Functional(model, {**p, **work, **no_counters}), b)
            return value, store  # the new running statistics come out as values

        grads, (value, store) = torch.func.grad_and_value(loss, has_aux=True)(p)
        work = {**work, **store}
        if not adam:
            new = [p[n] - spec.lr * grads[n] for n in names]
            return (*new, *(work[k] for k in bnames), value)
        m, v, step = list(opt[:P]), list(opt[P:2 * P]), opt[-1] + 1
        new, new_m, new_v = [], [], []
        for i, n in enumerate(names):  # torch.optim.AdamW, written out
            g = grads[n]
            mi = b1 * m[i] + (1 - b1) * g
            vi = b2 * v[i] + (1 - b2) * g * g
            denom = (vi / (1 - b2 ** step)).sqrt() + eps
            new.append(p[n] * (1 - spec.lr * spec.weight_decay) - spec.lr / (1 - b1 ** step) * mi / denom)
            new_m.append(mi)
            new_v.append(vi)
        return (*new, *(work[k] for k in bnames), *new_m, *new_v, step, value)

    opt_state, opt_names = [], []
    if adam:
        opt_state = [torch.zeros_like(t) for t in state[:P]] * 2 + [torch.zeros((), dtype=torch.float32)]
        opt_names = [f"adam_m:{n}" for n in names] + [f"adam_v:{n}" for n in names] + ["adam_step"]
    args = tuple(state) + tuple(opt_state) + batch_args()
    arg_names = state_names + opt_names + [f"batch:{k}" for k in bkeys]
    return train_step, args, arg_names, state_names + opt_names + ["loss"], model


def inline_resources(text: str) -> str:
    """torch-mlir prints large constants as ``dense_resource<name>`` with the bytes in a
    trailing resource section, which XLA's parser rejects; write them inline as hex
    ``dense<"0x...">`` (the blob's first 4 bytes are its alignment, not data)."""
    blobs = dict(re.findall(r"(torch_tensor_[\w.]+|__elided__\w*|\w+): \"0x([0-9A-Fa-f]+)\"", text))
    if not blobs:
        return text
    body = re.sub(r"\{-#\s*dialect_resources:.*?#-\}", "", text, flags=re.S)
    return re.sub(r"dense_resource<([\w.]+)>", lambda m: f'dense<"0x{blobs[m.group(1)][8:]}">', body)


def pin_matmul_precision(text: str, matmul_precision: str) -> str:
    level = PRECISION[matmul_precision]
    return re.sub(r"(stablehlo\.dot_general [^:\n]*?contracting_dims = \[[^\]]*\] x \[[^\]]*\])(?!, precision)",
                  rf"\1, precision = [{level}, {level}]", text)


def to_fx(fn: Callable, args: tuple):
    import torch
    from torch._decomp import core_aten_decompositions
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.nn.attention import SDPBackend, sdpa_kernel

    # functionalize: any in-place op left becomes a value; BatchNorm's fused ops, should a
    # program reach them outside _ExplicitBatchNorm, are decomposed to arithmetic (torch-mlir
    # cannot lower them)
    from torch._decomp import get_decompositions

    def squeeze_dims(x, dims):  # torch-mlir has no lowering for squeeze.dims: a reshape
        dims = {d % x.dim() for d in dims} if x.dim() else set()
        return torch.ops.aten.reshape.default(x, [n for i, n in enumerate(x.shape) if not (i in dims and n == 1)])

    def empty_permuted(size, physical_layout, dtype=None, layout=None, device=None, pin_memory=None):
        return torch.ops.aten.empty.memory_format(size, dtype=dtype, device=device)  # the layout is XLA's to choose

    table = {**core_aten_decompositions(), torch.ops.aten.empty_permuted.default: empty_permuted,
             **get_decompositions([
        torch.ops.aten._native_batch_norm_legit_no_training, torch.ops.aten._native_batch_norm_legit,
        torch.ops.aten._native_batch_norm_legit_functional, torch.ops.aten.native_batch_norm,
        torch.ops.aten.max_pool2d_with_indices_backward]),  # no StableHLO lowering of its own
        torch.ops.aten.squeeze.dims: squeeze_dims}
    with sdpa_kernel([SDPBackend.MATH]):
        return make_fx(torch.func.functionalize(fn), decomposition_table=table)(*args)


def export(workload, cfg, phase: str, params: dict[str, np.ndarray], batch: dict[str, np.ndarray], dtype: str,
           matmul_precision: str, meta: dict[str, Any]) -> tuple[TorchExport, Any]:
    """Trace and import; returns the export and the model (for mapping parameters back)."""
    import torch

    fx = require_torch_mlir()
    fn, args, arg_names, out_names, model = functional_program(workload, cfg, phase, params, batch, dtype)
    t0 = time.perf_counter()
    gm = to_fx(fn, args)
    t1 = time.perf_counter()
    text = pin_matmul_precision(inline_resources(str(fx.stateless_fx_import(gm, output_type="stablehlo"))),
                                matmul_precision)
    t2 = time.perf_counter()
    import importlib.metadata
    meta = {**meta, "phase": phase, "dtype": dtype, "matmul_precision": matmul_precision,
            "torch": torch.__version__, "torch_mlir": importlib.metadata.version("torch-mlir")}
    return TorchExport(text, arg_names, [list(a.shape) for a in args], [str(a.dtype).replace("torch.", "")
                                                                          for a in args], out_names, meta,
                       {"torch_trace_s": t1 - t0, "mlir_import_s": t2 - t1}), model
