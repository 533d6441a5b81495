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


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, implementation: str, **kwargs) -> torch.Tensor:
    """F.scaled_dot_product_attention with the kernel ``implementation`` names (flash,
    efficient, cudnn, math), or PyTorch's own dispatch (sdpa, or an unresolved best)."""
    import torch.nn.functional as F

    backend = _SDPA_BACKENDS.get(implementation)
    if backend is None:
        return F.scaled_dot_product_attention(q, k, v, **kwargs)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(getattr(SDPBackend, backend)):
        return F.scaled_dot_product_attention(q, k, v, **kwargs)


_SDPA_BACKENDS = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION",
                  "math": "MATH"}
