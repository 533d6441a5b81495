"""softmax and layernorm: a row-wise op written once as a custom kernel in each framework's
kernel language -- Triton for PyTorch, Pallas for JAX -- beside each framework's own
operator (``impl=framework``: ``torch.softmax`` / ``F.layer_norm``, ``jax.nn.softmax`` /
the jnp layer norm flax uses) eager and compiled (S2's Triton vs Pallas point).

Both kernels are the same algorithm: one program per row, the whole row in one block
(``cols`` a power of two), statistics in float32. On the CPU they run in interpret mode
(``TRITON_INTERPRET=1``; ``pallas_call(..., interpret=True)``): parity is real, timings
are the interpreters'. On CUDA they compile for real.

Run both implementations into one table: ``stackwars run softmax layernorm --set
impl=framework,custom``. FLOPs: softmax 5*rows*cols (max, subtract, exp, sum, divide);
layernorm 8*rows*cols (mean, subtract, square, sum, scale by rstd, weight, bias).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from stackwars.errors import SpecError
from stackwars.registry import register_workload
from stackwars.workloads.base import Arrays, Config, Workload, as_float64, bounded, choices, normal

KERNEL_LANGUAGE = {"torch": "triton kernel", "jax": "pallas kernel"}
MAX_COLS = 16384  # one row per block: beyond this a row no longer fits a GPU block's registers


@dataclass(frozen=True)
class RowConfig(Config):
    rows: int
    cols: int
    impl: str = choices("framework", "custom", default="framework")  # custom: the Triton / Pallas kernel
    eps: float = bounded(1e-5, low=0, why="layernorm's epsilon")  # layernorm only

    def validate(self) -> None:
        super().validate()
        if self.cols & (self.cols - 1) or self.cols > MAX_COLS:
            raise SpecError(f"cols={self.cols}: the kernels hold a whole row in one block, so cols must be a power "
                            f"of two up to {MAX_COLS}")


class RowOp(Workload):
    config_cls = RowConfig
    phases = ("forward",)  # the kernels have no backward
    presets = {
        "tiny": RowConfig(rows=64, cols=128),
        "small": RowConfig(rows=1024, cols=1024),
        "paper": RowConfig(rows=16384, cols=4096),  # 256 MiB in float32: memory-bound, as Triton's tutorial
    }
    twin_modules = {"torch": "stackwars.workloads.kernels.torch_twin", "jax": "stackwars.workloads.kernels.jax_twin"}
    shape_params = ("rows",)
    variant_params = ("impl",)
    flops_per_element = 0

    def variant_label(self, overrides: Mapping[str, Any], framework: str | None, device: str = "cpu") -> str | None:
        if overrides.get("impl") != "custom" or framework not in KERNEL_LANGUAGE:
            return None
        # on the CPU the kernel runs in its language's interpreter: the row's time is the interpreter's
        return KERNEL_LANGUAGE[framework] + (" (interpreted)" if device == "cpu" else "")

    def unsupported(self, cfg: RowConfig, framework: str, backend: str, phase: str) -> str | None:
        if cfg.impl != "custom":
            return None
        if backend == "torch-mlir-xla":
            return "impl=custom: a Triton kernel cannot be exported to StableHLO"
        if framework == "torch" and backend != "torch-eager":
            return ("impl=custom: the Triton kernel is one launch, timed as launched (torch-eager); compiling the "
                    "call around it adds nothing to measure")
        if framework == "torch" and importlib.util.find_spec("triton") is None:
            return "impl=custom needs Triton (pip install triton; TRITON_INTERPRET=1 runs it on the CPU)"
        return None

    def process_env(self, cfg: RowConfig, device: str) -> dict[str, str]:
        # Triton decides at import which of its functions (tl.max, tl.sum, ours) are
        # interpreted: the worker must start with the interpreter on
        return {"TRITON_INTERPRET": "1"} if cfg.impl == "custom" and device == "cpu" else {}

    def pad_exact(self, cfg, key, phase):
        return key == "rows"  # rows are independent

    def flops(self, cfg: RowConfig, phase: str) -> int:
        return self.flops_per_element * cfg.rows * cfg.cols

    def working_elements(self, cfg: RowConfig, phase: str) -> int:
        return cfg.rows * cfg.cols  # the output


class Softmax(RowOp):
    name = "softmax"
    description = "row-wise softmax: framework operator or a custom kernel (Triton / Pallas)"
    flops_per_element = 5
    flops_formula = "5*rows*cols"

    def shapes(self, cfg: RowConfig):
        return {}, {"x": (cfg.rows, cfg.cols)}

    def init(self, cfg: RowConfig, seed: int) -> tuple[Arrays, Arrays]:
        rng = np.random.default_rng(seed)
        return {}, {"x": normal(rng, (cfg.rows, cfg.cols), 3.0)}  # scale 3: rows with a clear maximum

    def reference(self, cfg: RowConfig, phase: str, params: Arrays, batch: Arrays) -> Arrays:
        x = as_float64(batch)["x"]
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return {"out": e / e.sum(axis=-1, keepdims=True)}

    def bytes_moved(self, cfg: RowConfig, phase: str, itemsize: int, param_itemsize: int) -> int:
        return 2 * cfg.rows * cfg.cols * itemsize


class LayerNorm(RowOp):
    name = "layernorm"
    description = "row-wise layer norm with weight and bias: framework operator or a custom kernel (Triton / Pallas)"
    flops_per_element = 8
    flops_formula = "8*rows*cols"

    def shapes(self, cfg: RowConfig):
        return {"w": (cfg.cols,), "b": (cfg.cols,)}, {"x": (cfg.rows, cfg.cols)}

    def init(self, cfg: RowConfig, seed: int) -> tuple[Arrays, Arrays]:
        rng = np.random.default_rng(seed)
        params = {"w": 1.0 + normal(rng, (cfg.cols,), 0.1), "b": normal(rng, (cfg.cols,), 0.1)}
        return params, {"x": 2.0 + normal(rng, (cfg.rows, cfg.cols), 3.0)}  # an offset: the mean matters

    def reference(self, cfg: RowConfig, phase: str, params: Arrays, batch: Arrays) -> Arrays:
        p, x = as_float64(params), as_float64(batch)["x"]
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return {"out": (x - mean) / np.sqrt(var + cfg.eps) * p["w"] + p["b"]}

    def bytes_moved(self, cfg: RowConfig, phase: str, itemsize: int, param_itemsize: int) -> int:
        return 2 * cfg.rows * cfg.cols * itemsize + 2 * cfg.cols * param_itemsize


register_workload(Softmax())
register_workload(LayerNorm())
