"""Per-example operations batched four ways (study S5, done right): a Python loop over the
examples, the framework's ``vmap``, the hand-batched operator, and (through the backend)
their compiled forms.

* ``vmap-dot``: x_i . y_i for each example (vectors of ``d``): one scalar per example.
* ``vmap-attention``: one head of attention per example, softmax(q k^T / sqrt(d)) v on
  [seq, d] inputs: [seq, d] per example.

``impl``: ``loop`` (a Python loop, results stacked), ``vmap`` (``torch.func.vmap`` /
``jax.vmap`` of the per-example function), ``batched`` (written for the batch by hand).
The backend decides the execution mode, so the study's rows read: PyTorch loop / vmap /
batched (``torch-eager``), ``torch.compile(vmap)`` (``torch-compile``), JAX loop / vmap
without jit (``jax-eager``), ``jit(vmap)`` and jit of the others (``jax-jit``). Forward
only; the reference is numpy in float64.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stackwars.registry import register_workload
from stackwars.workloads.base import Config, Workload, as_float64, choices

IMPLS = ("loop", "vmap", "batched")


@dataclass(frozen=True)
class VmapConfig(Config):
    batch: int = 8
    d: int = 64
    seq: int = 16  # attention: positions per example
    impl: str = choices(*IMPLS, default="vmap")


class PerExample(Workload):
    config_cls = VmapConfig
    phases = ("forward",)
    twin_modules = {"torch": "stackwars.workloads.vmapped.torch_twin", "jax": "stackwars.workloads.vmapped.jax_twin"}
    shape_params = ("batch",)
    op: str = ""

    def optimizer(self, cfg):  # pragma: no cover - forward only
        raise NotImplementedError

    def bytes_moved(self, cfg, phase, itemsize, param_itemsize):
        return sum(int(np.prod(s)) for s in self.shapes(cfg)[1].values()) * itemsize

    def pad_exact(self, cfg, key, phase):
        return key == "batch"  # examples are independent


class VmapDot(PerExample):
    name = "vmap-dot"
    op = "dot"
    description = "per-example dot product x_i . y_i: Python loop, vmap, batched (study S5)"
    presets = {"tiny": VmapConfig(batch=4, d=8), "small": VmapConfig(batch=256, d=512),
               "paper": VmapConfig(batch=4096, d=1024)}
    flops_formula = "2 * batch * d"

    def shapes(self, cfg):
        return {}, {"x": (cfg.batch, cfg.d), "y": (cfg.batch, cfg.d)}

    def init(self, cfg, seed):
        rng = np.random.default_rng(seed)
        return {}, {"x": rng.standard_normal((cfg.batch, cfg.d)), "y": rng.standard_normal((cfg.batch, cfg.d))}

    def reference(self, cfg, phase, params, batch):
        b = as_float64(batch)
        return {"out": np.einsum("bd,bd->b", b["x"], b["y"])}

    def flops(self, cfg, phase):
        return 2 * cfg.batch * cfg.d

    def working_elements(self, cfg, phase):
        return cfg.batch


class VmapAttention(PerExample):
    name = "vmap-attention"
    op = "attention"
    description = "per-example single-head attention softmax(q k^T/sqrt(d)) v: loop, vmap, batched (study S5)"
    presets = {"tiny": VmapConfig(batch=4, d=8, seq=6), "small": VmapConfig(batch=64, d=64, seq=128),
               "paper": VmapConfig(batch=512, d=128, seq=512)}
    flops_formula = "4 * batch * seq^2 * d"

    def shapes(self, cfg):
        s = (cfg.batch, cfg.seq, cfg.d)
        return {}, {"q": s, "k": s, "v": s}

    def init(self, cfg, seed):
        rng = np.random.default_rng(seed)
        s = (cfg.batch, cfg.seq, cfg.d)
        return {}, {k: rng.standard_normal(s) for k in ("q", "k", "v")}

    def reference(self, cfg, phase, params, batch):
        b = as_float64(batch)
        s = np.einsum("btd,bsd->bts", b["q"], b["k"]) / np.sqrt(cfg.d)
        s = np.exp(s - s.max(-1, keepdims=True))
        return {"out": np.einsum("bts,bsd->btd", s / s.sum(-1, keepdims=True), b["v"])}

    def flops(self, cfg, phase):
        return 4 * cfg.batch * cfg.seq * cfg.seq * cfg.d

    def working_elements(self, cfg, phase):
        return 2 * cfg.batch * cfg.seq * cfg.seq + cfg.batch * cfg.seq * cfg.d


register_workload(VmapDot())
register_workload(VmapAttention())
