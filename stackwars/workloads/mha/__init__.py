"""mha: multi-head self-attention with Q/K/V/output projections (with biases).

Fused attention (``attention=best``, the default, and the explicit implementations of
``workloads/attention.py``) uses each framework's entry point
(torch.nn.functional.scaled_dot_product_attention on [B, heads, T, d_head];
jax.nn.dot_product_attention on [B, T, heads, d_head], its documented layout);
``naive`` spells out softmax(QK^T / sqrt(d_head) + mask) V in the same [B, heads, T,
d_head] layout in both twins, so the two programs have the same structure.
``causal`` masks the future.

FLOPs (N = batch*seq tokens, c = 1/2 if causal else 1: masked work is not useful work):
forward 8*N*d^2 + 4*c*batch*seq^2*d; train-step 18*N*d^2 + 12*c*batch*seq^2*d
(backward: dW and dX for the output projection, dW for Q/K/V, four attention matmuls).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stackwars.errors import SpecError
from stackwars.registry import register_workload
from stackwars.workloads.attention import CHOICES as ATTENTION, Geometry
from stackwars.workloads.base import as_float64, Arrays, Config, Workload, choices, sq_error, normal

PROJ = ("q", "k", "v", "o")


@dataclass(frozen=True)
class MhaConfig(Config):
    batch: int
    seq: int
    d_model: int
    heads: int
    causal: bool = True
    attention: str = choices(*ATTENTION, default="best")  # see workloads/attention.py

    @property
    def d_head(self) -> int:
        return self.d_model // self.heads

    def validate(self) -> None:
        super().validate()
        if self.d_model % self.heads:
            raise SpecError(f"heads={self.heads} must divide d_model={self.d_model}")


class Mha(Workload):
    name = "mha"
    description = "multi-head self-attention with Q/K/V/O projections, optional causal mask"
    config_cls = MhaConfig
    presets = {
        "tiny": MhaConfig(batch=2, seq=16, d_model=32, heads=4),
        "small": MhaConfig(batch=4, seq=256, d_model=512, heads=8),
        "paper": MhaConfig(batch=8, seq=1024, d_model=768, heads=12),
    }
    twin_modules = {"torch": "stackwars.workloads.mha.torch_twin",
                    "jax": "stackwars.workloads.mha.jax_twin"}
    shape_params = ("batch", "seq", "d_model")
    flops_formula = ("N = batch*seq, c = 0.5 if causal else 1; forward 8*N*d^2 + 4*c*batch*seq^2*d; "
                     "train-step 18*N*d^2 + 12*c*batch*seq^2*d")

    def shapes(self, cfg: MhaConfig):
        d = cfg.d_model
        params = {}
        for p in PROJ:
            params[f"w{p}"] = (d, d)
            params[f"b{p}"] = (d,)
        act = (cfg.batch, cfg.seq, d)
        return params, {"x": act, "target": act}

    def attention_geometry(self, cfg: MhaConfig) -> list[Geometry]:
        return [Geometry(head_dim=cfg.d_head, causal=cfg.causal)]

    def pad_exact(self, cfg, key, phase):
        # causal attention: padded positions at the end are never attended to by earlier ones
        return phase == "forward" and (key == "batch" or (key == "seq" and cfg.causal))

    def init(self, cfg: MhaConfig, seed: int) -> tuple[Arrays, Arrays]:
        rng = np.random.default_rng(seed)
        d = cfg.d_model
        params = {}
        for p in PROJ:
            params[f"w{p}"] = normal(rng, (d, d), d ** -0.5)
            params[f"b{p}"] = normal(rng, (d,), 0.1)
        act = (cfg.batch, cfg.seq, d)
        return params, {"x": normal(rng, act), "target": normal(rng, act)}

    def reference(self, cfg: MhaConfig, phase: str, params: Arrays, batch: Arrays) -> Arrays:
        params, batch = as_float64(params), as_float64(batch)
        x = batch["x"]
        B, T, d = x.shape
        H, dh = cfg.heads, cfg.d_head
        x2 = x.reshape(B * T, d)

        def heads(t):  # [B*T, d] -> [B, H, T, dh]
            return t.reshape(B, T, H, dh).transpose(0, 2, 1, 3)

        def merge(t):  # [B, H, T, dh] -> [B*T, d]
            return t.transpose(0, 2, 1, 3).reshape(B * T, d)

        q, k, v = (heads(x2 @ params[f"w{p}"] + params[f"b{p}"]) for p in "qkv")
        scale = 1.0 / np.sqrt(dh)
        s = (q @ k.transpose(0, 1, 3, 2)) * scale  # [B, H, T, T]
        if cfg.causal:
            s = np.where(np.tril(np.ones((T, T), dtype=bool)), s, -np.inf)
        s = s - s.max(-1, keepdims=True)
        e = np.exp(s)
        prob = e / e.sum(-1, keepdims=True)
        o = merge(prob @ v)  # [B*T, d]
        out = o @ params["wo"] + params["bo"]
        if phase == "forward":
            return {"out": out.reshape(B, T, d)}

        loss, dout = sq_error(out, batch["target"].reshape(out.shape))
        grads = {"wo": o.T @ dout, "bo": dout.sum(0)}
        do = heads(dout @ params["wo"].T)
        dprob = do @ v.transpose(0, 1, 3, 2)
        dv = prob.transpose(0, 1, 3, 2) @ do
        ds = prob * (dprob - (dprob * prob).sum(-1, keepdims=True)) * scale
        dq, dk = ds @ k, ds.transpose(0, 1, 3, 2) @ q
        for p, g in (("q", dq), ("k", dk), ("v", dv)):
            gm = merge(g)
            grads[f"w{p}"], grads[f"b{p}"] = x2.T @ gm, gm.sum(0)
        lr = self.optimizer(cfg).lr
        return {"loss": np.asarray(loss), **{f"update.{n}": -lr * g for n, g in sorted(grads.items())}}

    def working_elements(self, cfg: MhaConfig, phase: str) -> int:
        n, scores = cfg.batch * cfg.seq, cfg.batch * cfg.heads * cfg.seq * cfg.seq
        # Q, K, V, attention output, output; the scores and probabilities (the reference and the
        # naive program hold them; fused kernels do not, so this overestimates them)
        return (5 * n * cfg.d_model + 2 * scores) * (1 if phase == "forward" else 2)

    def flops(self, cfg: MhaConfig, phase: str) -> int:
        n, d, t = cfg.batch * cfg.seq, cfg.d_model, cfg.seq
        attn = cfg.batch * t * t * d // (2 if cfg.causal else 1)
        if phase == "forward":
            return 8 * n * d * d + 4 * attn
        return 18 * n * d * d + 12 * attn

    def bytes_moved(self, cfg: MhaConfig, phase: str, itemsize: int, param_itemsize: int) -> int:
        d = cfg.d_model
        nparams = 4 * d * d + 4 * d
        activations = 2 * cfg.batch * cfg.seq * d * itemsize
        return activations + (1 if phase == "forward" else 2) * nparams * param_itemsize


register_workload(Mha())
