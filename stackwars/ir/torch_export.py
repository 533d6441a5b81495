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
        path = Path(path)
        side = path.with_suffix(".json")
        if not path.is_file() or not side.is_file():
            raise SpecError(f"--stablehlo {path}: expected {path.name} and its description {side.name} "
                            f"(written by `stackwars ir ... --framework torch --stage stablehlo`)")
        return cls(text=path.read_text(), **json.loads(side.read_text()))

    def check_matches(self, expected: dict[str, Any]) -> None:
        """An exported file runs only the cell it was exported for."""
        diffs = [f"{k}: file has {self.meta.get(k)!r}, cell wants {v!r}" for k, v in expected.items()
                 if self.meta.get(k) != v]
        if diffs:
            raise SpecError("the StableHLO file does not match this cell (" + "; ".join(diffs) + ")")


class _Functional:
    """Stands in for the module inside the twin's forward/loss: calls it with given parameters."""

    def __init__(self, module, params):
        self.module, self.params = module, params

    def __call__(self, *args):
        import torch
        return torch.func.functional_call(self.module, self.params, args)


def functional_program(workload, cfg, phase: str, params: dict[str, np.ndarray], batch: dict[str, np.ndarray],
                       dtype: str) -> tuple[Callable, tuple, list[str], list[str], Any]:
    """(fn, example_args, arg_names, out_names, model) for the cell's phase."""
    import torch

    from stackwars.backends.torch_common import TORCH_DTYPES, to_tensor

    twin = workload.twin("torch")
    pdtype = param_dtype(dtype, phase)
    model = twin.build(cfg, {k: to_tensor(v, pdtype, "cpu") for k, v in params.items()})
    model.train(phase == "train-step")
    names = [n for n, _ in model.named_parameters()]
    bkeys = sorted(batch)
    args = tuple(p.detach() for _, p in model.named_parameters()) + tuple(to_tensor(batch[k], dtype, "cpu")
                                                                         for k in bkeys)
    arg_names = [f"param:{n}" for n in names] + [f"batch:{k}" for k in bkeys]
    P = len(names)

    if phase == "forward":
        def forward(*flat):
            return twin.forward(_Functional(model, dict(zip(names, flat[:P]))), dict(zip(bkeys, flat[P:])))

        return forward, args, arg_names, ["out"], model

    spec = workload.optimizer(cfg)
    if spec.name != "sgd":
        raise Unsupported(f"the exported train step implements SGD; {spec.name} is not exported yet")
    compute = TORCH_DTYPES[dtype]
    mixed = pdtype != dtype

    def train_step(*flat):
        p, b = dict(zip(names, flat[:P])), dict(zip(bkeys, flat[P:]))

        def loss(p):
            if mixed:  # float32 master weights, bfloat16 compute (as the JAX step does)
                p = {k: v.to(compute) for k, v in p.items()}
            return twin.loss(_Functional(model, p), b)

        grads, value = torch.func.grad_and_value(loss)(p)
        return (*(p[n] - spec.lr * grads[n] for n in names), value)

    return train_step, args, arg_names, [f"param:{n}" for n in names] + ["loss"], model


def pin_matmul_precision(text: str, matmul_precision: str) -> str:
    level = PRECISION[matmul_precision]
    return re.sub(r"(stablehlo\.dot_general [^:\n]*?contracting_dims = \[[^\]]*\] x \[[^\]]*\])(?!, precision)",
                  rf"\1, precision = [{level}, {level}]", text)


def to_fx(fn: Callable, args: tuple):
    import torch
    from torch._decomp import core_aten_decompositions
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.MATH]):
        return make_fx(fn, decomposition_table=core_aten_decompositions())(*args)


def export(workload, cfg, phase: str, params: dict[str, np.ndarray], batch: dict[str, np.ndarray], dtype: str,
           matmul_precision: str, meta: dict[str, Any]) -> tuple[TorchExport, Any]:
    """Trace and import; returns the export and the model (for mapping parameters back)."""
    import torch

    fx = require_torch_mlir()
    fn, args, arg_names, out_names, model = functional_program(workload, cfg, phase, params, batch, dtype)
    t0 = time.perf_counter()
    gm = to_fx(fn, args)
    t1 = time.perf_counter()
    text = pin_matmul_precision(str(fx.stateless_fx_import(gm, output_type="stablehlo")), matmul_precision)
    t2 = time.perf_counter()
    import importlib.metadata
    meta = {**meta, "phase": phase, "dtype": dtype, "matmul_precision": matmul_precision,
            "torch": torch.__version__, "torch_mlir": importlib.metadata.version("torch-mlir")}
    return TorchExport(text, arg_names, [list(a.shape) for a in args], [str(a.dtype).replace("torch.", "")
                                                                          for a in args], out_names, meta,
                       {"torch_trace_s": t1 - t0, "mlir_import_s": t2 - t1}), model
