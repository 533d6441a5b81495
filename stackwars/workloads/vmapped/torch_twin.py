"""Per-example operations in PyTorch: a Python loop, torch.func.vmap, or the batched form."""

from __future__ import annotations

import math

import torch
from torch import nn


def dot(x, y):  # one example: [d], [d] -> []
    return torch.dot(x, y)


def attention(q, k, v):  # one example: [T, d] each -> [T, d]
    s = q @ k.T / math.sqrt(q.shape[-1])
    return torch.softmax(s, dim=-1) @ v


class PerExample(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg

    def forward(self, batch):
        impl = self.cfg.impl
        if "q" in batch:
            args, one = (batch["q"], batch["k"], batch["v"]), attention
            batched = lambda q, k, v: torch.softmax(q @ k.transpose(1, 2) / math.sqrt(q.shape[-1]), -1) @ v  # noqa: E731
        else:
            args, one = (batch["x"], batch["y"]), dot
            batched = lambda x, y: (x * y).sum(-1)  # noqa: E731
        if impl == "loop":
            return torch.stack([one(*(a[i] for a in args)) for i in range(args[0].shape[0])])
        if impl == "vmap":
            return torch.func.vmap(one)(*args)
        return batched(*args)


def build(cfg, params):
    return PerExample(cfg)


def canonical(model):
    return {}


def forward(model, batch):
    return model(batch)


def loss(model, batch):  # pragma: no cover - the per-example workloads are forward only
    raise NotImplementedError("forward only")
