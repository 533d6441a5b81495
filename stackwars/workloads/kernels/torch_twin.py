"""softmax and layernorm in PyTorch: the framework's operator, or the Triton kernels
(``triton_kernels.py``) launched one program per row."""

import importlib
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

_KERNELS = {}


def kernels(device_type: str):
    """The Triton kernel module. For CPU tensors Triton must interpret, and it decides that
    when it is imported (its own tl.max and tl.sum are kernels too): the worker starts with
    TRITON_INTERPRET=1 (``Workload.process_env``); a process that imported Triton without
    it cannot interpret and is told so."""
    if device_type not in _KERNELS:
        if device_type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
            if "triton" in sys.modules:
                raise RuntimeError("Triton was imported without TRITON_INTERPRET=1, so it cannot run on the CPU; "
                                   "measure the cell in a worker (the default, not --inline) or start the process "
                                   "with TRITON_INTERPRET=1")
            os.environ["TRITON_INTERPRET"] = "1"
        _KERNELS[device_type] = importlib.import_module("stackwars.workloads.kernels.triton_kernels")
    return _KERNELS[device_type]


class RowOp(nn.Module):
    def __init__(self, cfg, params):
        super().__init__()
        self.cfg = cfg
        self.layernorm = "w" in params
        if self.layernorm:
            self.weight = nn.Parameter(params["w"])  # [cols]
            self.bias = nn.Parameter(params["b"])  # [cols]

    def forward(self, x):  # x: [rows, cols]
        if self.cfg.impl == "custom":
            return self.kernel(x)
        if self.layernorm:
            return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.cfg.eps)
        return torch.softmax(x, dim=-1)

    def kernel(self, x):
        k = kernels(x.device.type)
        x = x.contiguous()
        y = torch.empty_like(x)  # [rows, cols]
        rows, cols = x.shape
        block = k.next_power_of_2(cols)
        if self.layernorm:
            k.layernorm_rows[(rows,)](x, self.weight, self.bias, y, cols, x.stride(0), self.cfg.eps, BLOCK=block)
        else:
            k.softmax_rows[(rows,)](x, y, cols, x.stride(0), BLOCK=block)
        return y


def build(cfg, params):
    return RowOp(cfg, params)


def canonical(model):
    return {"w": model.weight, "b": model.bias} if model.layernorm else {}


def forward(model, batch):
    return model(batch["x"])


def loss(model, batch):  # pragma: no cover - forward-only workloads
    raise NotImplementedError("softmax and layernorm are forward-only")
