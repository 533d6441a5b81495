"""mha in PyTorch: nanoGPT-style self-attention block."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from stackwars.workloads.torch_util import linear, linear_canonical, sdpa, sq_error


class SelfAttention(nn.Module):
    def __init__(self, cfg, params):
        super().__init__()
        self.heads, self.causal, self.attention = cfg.heads, cfg.causal, cfg.attention
        self.q_proj = linear(params["wq"], params["bq"])
        self.k_proj = linear(params["wk"], params["bk"])
        self.v_proj = linear(params["wv"], params["bv"])
        self.out_proj = linear(params["wo"], params["bo"])

    def forward(self, x):  # x: [B, T, C]
        B, T, C = x.shape
        H = self.heads
        q = self.q_proj(x).view(B, T, H, C // H).transpose(1, 2)  # [B, H, T, hd]
        k = self.k_proj(x).view(B, T, H, C // H).transpose(1, 2)  # [B, H, T, hd]
        v = self.v_proj(x).view(B, T, H, C // H).transpose(1, 2)  # [B, H, T, hd]
        if self.attention != "naive":  # fused: the kernel chosen for this cell, or PyTorch's dispatch
            y = sdpa(q, k, v, self.attention, is_causal=self.causal)  # [B, H, T, hd]
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # [B, H, T, T]
            if self.causal:
                mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
                att = att.masked_fill(~mask, float("-inf"))
            y = F.softmax(att, dim=-1) @ v  # [B, H, T, hd]
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # [B, T, C]
        return self.out_proj(y)


def build(cfg, params):
    return SelfAttention(cfg, params)


def canonical(model):
    out = {}
    for p, layer in (("q", model.q_proj), ("k", model.k_proj), ("v", model.v_proj), ("o", model.out_proj)):
        out.update(linear_canonical(layer, f"w{p}", f"b{p}"))
    return out


def forward(model, batch):
    return model(batch["x"])


def loss(model, batch):
    return sq_error(model(batch["x"]), batch["target"])
