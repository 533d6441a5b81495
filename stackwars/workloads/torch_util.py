"""Helpers for PyTorch twins: build idiomatic layers from canonical [in, out] weights."""

import torch
from torch import nn


def linear(w: torch.Tensor, b: torch.Tensor | None) -> nn.Linear:
    """nn.Linear holding ``w`` ([in, out], canonical) as its [out, in] weight, no random init."""
    layer = nn.Linear(w.shape[0], w.shape[1], bias=b is not None, device="meta")
    layer.weight = nn.Parameter(w.T.contiguous())
    if b is not None:
        layer.bias = nn.Parameter(b)
    return layer


def linear_canonical(layer: nn.Linear, w: str, b: str | None) -> dict[str, torch.Tensor]:
    out = {w: layer.weight.T}
    if b is not None:
        out[b] = layer.bias
    return out


def sq_error(y: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-example squared error (summed over features, averaged over rows), in float32;
    the twin of ``workloads.base.sq_error``."""
    return ((y.float() - target.float()) ** 2).sum(-1).mean()
