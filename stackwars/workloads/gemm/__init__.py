"""gemm: C = A @ B, with B the parameter and A the input batch.

train-step: loss = mean over rows of sum over columns of (A @ B - T)^2, gradient with respect to B, SGD update.
FLOPs: forward 2mnk; train-step 4mnk (forward + dB = A^T dC; A needs no gradient).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stackwars.registry import register_workload
from stackwars.workloads.base import as_float64, Arrays, Config, Workload, sq_error, normal


@dataclass(frozen=True)
class GemmConfig(Config):
    m: int
    n: int
    k: int


class Gemm(Workload):
    name = "gemm"
    description = "C = A @ B (B is the parameter)"
    config_cls = GemmConfig
    presets = {
        "tiny": GemmConfig(m=64, n=48, k=32),
        "small": GemmConfig(m=1024, n=1024, k=1024),
        "paper": GemmConfig(m=4096, n=4096, k=4096),
    }
    twin_modules = {"torch": "stackwars.workloads.gemm.torch_twin",
                    "jax": "stackwars.workloads.gemm.jax_twin"}
    shape_params = ("m", "n", "k")
    flops_formula = "forward 2mnk; train-step 4mnk"

    def shapes(self, cfg: GemmConfig):
        return {"b": (cfg.k, cfg.n)}, {"a": (cfg.m, cfg.k), "target": (cfg.m, cfg.n)}

    def pad_exact(self, cfg, key, phase):
        return phase == "forward" and key == "m"  # rows of A are independent

    def init(self, cfg: GemmConfig, seed: int) -> tuple[Arrays, Arrays]:
        rng = np.random.default_rng(seed)
        params = {"b": normal(rng, (cfg.k, cfg.n), cfg.k ** -0.5)}
        batch = {"a": normal(rng, (cfg.m, cfg.k)), "target": normal(rng, (cfg.m, cfg.n))}
        return params, batch

    def reference(self, cfg: GemmConfig, phase: str, params: Arrays, batch: Arrays) -> Arrays:
        params, batch = as_float64(params), as_float64(batch)
        a, b = batch["a"], params["b"]
        c = a @ b
        if phase == "forward":
            return {"out": c}
        loss, dc = sq_error(c, batch["target"])
        lr = self.optimizer(cfg).lr
        return {"loss": np.asarray(loss), "update.b": -lr * (a.T @ dc)}

    def working_elements(self, cfg: GemmConfig, phase: str) -> int:
        return cfg.m * cfg.n * (1 if phase == "forward" else 2)  # C (and dC)

    def flops(self, cfg: GemmConfig, phase: str) -> int:
        return (2 if phase == "forward" else 4) * cfg.m * cfg.n * cfg.k

    def bytes_moved(self, cfg: GemmConfig, phase: str, itemsize: int, param_itemsize: int) -> int:
        if phase == "forward":
            return (cfg.m * cfg.k + cfg.m * cfg.n) * itemsize + cfg.k * cfg.n * param_itemsize
        return (cfg.m * cfg.k + cfg.m * cfg.n) * itemsize + 2 * cfg.k * cfg.n * param_itemsize


register_workload(Gemm())
