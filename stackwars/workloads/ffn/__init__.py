"""ffn: the transformer MLP block, Linear(d, h) -> GELU -> Linear(h, d), with biases.

train-step: loss = squared error summed over features, averaged over tokens, gradients for all four parameters, SGD.
FLOPs (N = batch * seq tokens): forward 4Ndh; train-step 10Ndh (forward 4Ndh; backward
dW2, dH, dW1 = 6Ndh; the input needs no gradient). Elementwise work is not counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stackwars.registry import register_workload
from stackwars.workloads.base import as_float64, Arrays, Config, Workload, choices, gelu, sq_error, normal


@dataclass(frozen=True)
class FfnConfig(Config):
    batch: int
    seq: int
    d_model: int
    d_ff: int
    activation: str = choices("gelu-tanh", "gelu", default="gelu-tanh")  # GPT-2 uses the tanh form
    # bsd: the MLP applied to [batch, seq, d] as it comes; flat: reshaped to [batch*seq, d]
    # first (same function; a different program for the compilers, see the README)
    layout: str = choices("bsd", "flat", default="bsd")

    @property
    def tokens(self) -> int:
        return self.batch * self.seq


class Ffn(Workload):
    name = "ffn"
    description = "transformer MLP: Linear -> GELU -> Linear, with bias"
    config_cls = FfnConfig
    presets = {
        "tiny": FfnConfig(batch=2, seq=8, d_model=32, d_ff=128),
        "small": FfnConfig(batch=4, seq=128, d_model=512, d_ff=2048),
        "paper": FfnConfig(batch=8, seq=1024, d_model=768, d_ff=3072),
    }
    twin_modules = {"torch": "stackwars.workloads.ffn.torch_twin",
                    "jax": "stackwars.workloads.ffn.jax_twin"}
    shape_params = ("batch", "seq", "d_model", "d_ff")
    flops_formula = "N = batch*seq; forward 4*N*d_model*d_ff; train-step 10*N*d_model*d_ff"

    def shapes(self, cfg: FfnConfig):
        d, h = cfg.d_model, cfg.d_ff
        act = (cfg.batch, cfg.seq, d)
        return {"w1": (d, h), "b1": (h,), "w2": (h, d), "b2": (d,)}, {"x": act, "target": act}

    def pad_exact(self, cfg, key, phase):
        return phase == "forward" and key in ("batch", "seq")  # token-wise

    def init(self, cfg: FfnConfig, seed: int) -> tuple[Arrays, Arrays]:
        rng = np.random.default_rng(seed)
        d, h = cfg.d_model, cfg.d_ff
        params = {"w1": normal(rng, (d, h), d ** -0.5), "b1": normal(rng, (h,), 0.1),
                  "w2": normal(rng, (h, d), h ** -0.5), "b2": normal(rng, (d,), 0.1)}
        act = (cfg.batch, cfg.seq, d)
        return params, {"x": normal(rng, act), "target": normal(rng, act)}

    def reference(self, cfg: FfnConfig, phase: str, params: Arrays, batch: Arrays) -> Arrays:
        params, batch = as_float64(params), as_float64(batch)
        kind = "tanh" if cfg.activation == "gelu-tanh" else "erf"
        x = batch["x"].reshape(-1, cfg.d_model)  # [N, d]
        h = x @ params["w1"] + params["b1"]  # [N, h]
        a, da = gelu(h, kind)
        y = a @ params["w2"] + params["b2"]  # [N, d]
        if phase == "forward":
            return {"out": y.reshape(batch["x"].shape)}
        loss, dy = sq_error(y, batch["target"].reshape(y.shape))
        dh = (dy @ params["w2"].T) * da
        lr = self.optimizer(cfg).lr
        grads = {"w1": x.T @ dh, "b1": dh.sum(0), "w2": a.T @ dy, "b2": dy.sum(0)}
        return {"loss": np.asarray(loss), **{f"update.{k}": -lr * g for k, g in grads.items()}}

    def working_elements(self, cfg: FfnConfig, phase: str) -> int:
        n = cfg.batch * cfg.seq
        return n * (2 * cfg.d_ff + cfg.d_model) * (1 if phase == "forward" else 2)  # pre/post GELU, output

    def flops(self, cfg: FfnConfig, phase: str) -> int:
        return (4 if phase == "forward" else 10) * cfg.tokens * cfg.d_model * cfg.d_ff

    def bytes_moved(self, cfg: FfnConfig, phase: str, itemsize: int, param_itemsize: int) -> int:
        d, h = cfg.d_model, cfg.d_ff
        nparams = 2 * d * h + h + d
        activations = 2 * cfg.tokens * d * itemsize  # x in; out (forward) or target (train) 
        return activations + (1 if phase == "forward" else 2) * nparams * param_itemsize


register_workload(Ffn())
