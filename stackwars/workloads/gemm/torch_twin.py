"""gemm in PyTorch."""

import torch
from torch import nn

from stackwars.workloads.torch_util import sq_error


class Gemm(nn.Module):
    def __init__(self, b: torch.Tensor):
        super().__init__()
        self.b = nn.Parameter(b)  # [k, n]

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return a @ self.b  # [m, k] @ [k, n] -> [m, n]


def build(cfg, params):
    return Gemm(params["b"])


def canonical(model):
    return {"b": model.b}


def forward(model, batch):
    return model(batch["a"])


def loss(model, batch):
    return sq_error(model(batch["a"]), batch["target"])
