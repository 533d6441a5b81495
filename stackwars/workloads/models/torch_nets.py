"""The model suite in PyTorch: a generic transformer (BERT, GPT-2, ViT, GPT-Neo and
Llama 3 are configurations of it) and a torchvision-style ResNet.

Their ``state_dict`` (parameters and BatchNorm running statistics) is the canonical
parameter layout of every model: names and shapes as here, Linear weights [out, in],
convolutions [out, in, kh, kw].
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from stackwars.workloads.models.config import ResNetConfig, TransformerConfig, rope_inv_freq
from stackwars.workloads.torch_util import sdpa


def _wide(t: torch.Tensor) -> torch.Tensor:
    """At least float32: where the published code upcasts (norm statistics, the loss) to
    float32 from bfloat16, without narrowing the float64 reference."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


class RMSNorm(nn.Module):
    """Llama's RMSNorm as its reference implementation writes it: statistics in float32."""

    def __init__(self, d: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        h = _wide(x)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def _norm(cfg: TransformerConfig) -> nn.Module:
    if cfg.norm == "rmsnorm":
        return RMSNorm(cfg.d_model, eps=cfg.norm_eps)
    return nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)


def _rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg: TransformerConfig, local: bool):
        super().__init__()
        d, H, K, hd = cfg.d_model, cfg.n_heads, cfg.kv_heads, cfg.d_head
        self.q = nn.Linear(d, H * hd, bias=cfg.qkv_bias)
        self.k = nn.Linear(d, K * hd, bias=cfg.qkv_bias)
        self.v = nn.Linear(d, K * hd, bias=cfg.qkv_bias)
        self.o = nn.Linear(H * hd, d, bias=cfg.bias)
        self.cfg, self.window = cfg, cfg.local_window if local else None

    def forward(self, x, rope=None):  # x: [B, T, d]
        cfg = self.cfg
        B, T, _ = x.shape
        H, K, hd = cfg.n_heads, cfg.kv_heads, cfg.d_head
        q = self.q(x).view(B, T, H, hd).transpose(1, 2)  # [B, H, T, hd]
        k = self.k(x).view(B, T, K, hd).transpose(1, 2)  # [B, K, T, hd]
        v = self.v(x).view(B, T, K, hd).transpose(1, 2)  # [B, K, T, hd]
        if rope is not None:
            cos, sin = rope  # [T, hd]
            q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        causal = cfg.kind == "lm"
        scale = 1.0 / math.sqrt(hd) if cfg.attn_scale else 1.0
        mask = None
        if causal and self.window is not None:  # GPT-Neo local layer: causal, within the window
            i = torch.arange(T, device=x.device)
            mask = (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] < self.window)  # [T, T]
        if cfg.attention != "naive":  # fused: the kernel chosen for this cell, or PyTorch's dispatch
            y = sdpa(q, k, v, cfg.attention, attn_mask=mask, is_causal=causal and mask is None, scale=scale,
                     enable_gqa=K != H)  # [B, H, T, hd]
        else:
            if K != H:
                k, v = k.repeat_interleave(H // K, dim=1), v.repeat_interleave(H // K, dim=1)
            att = (q @ k.transpose(-2, -1)) * scale  # [B, H, T, T]
            if causal:
                keep = mask if mask is not None else torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
                att = att.masked_fill(~keep, float("-inf"))
            y = F.softmax(att, dim=-1) @ v  # [B, H, T, hd]
        return self.o(y.transpose(1, 2).reshape(B, T, H * hd))


class Mlp(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.swiglu = cfg.mlp == "swiglu"
        if self.swiglu:
            self.gate = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
            self.up = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
            self.down = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)
        else:
            self.fc = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)
            self.proj = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias)
            self.approximate = "tanh" if cfg.gelu == "tanh" else "none"

    def forward(self, x):
        if self.swiglu:
            return self.down(F.silu(self.gate(x)) * self.up(x))
        return self.proj(F.gelu(self.fc(x), approximate=self.approximate))


class Block(nn.Module):
    def __init__(self, cfg: TransformerConfig, local: bool):
        super().__init__()
        self.norm1, self.attn, self.norm2, self.mlp = _norm(cfg), Attention(cfg, local), _norm(cfg), Mlp(cfg)
        self.prenorm = cfg.prenorm

    def forward(self, x, rope=None):
        if self.prenorm:
            x = x + self.attn(self.norm1(x), rope)
            return x + self.mlp(self.norm2(x))
        x = self.norm1(x + self.attn(x, rope))  # BERT: post-LN
        return self.norm2(x + self.mlp(x))


class Transformer(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        if cfg.kind == "vit":
            self.patch = nn.Conv2d(cfg.channels, d, cfg.patch, stride=cfg.patch)
            self.cls = nn.Parameter(torch.zeros(1, 1, d))
            self.pos = nn.Parameter(torch.zeros(1, cfg.tokens, d))
        else:
            # BERT: the padding token's row gets no gradient from the lookup (HF's padding_idx)
            self.tok_emb = nn.Embedding(cfg.vocab, d, padding_idx=cfg.pad_id)
            if cfg.positions == "learned":
                self.pos_emb = nn.Embedding(cfg.max_pos, d)
            else:  # RoPE's frequencies, on the model's device (build fills them): no host copy inside the step,
                # which would keep torch-cudagraphs from capturing it; float64, cast where used
                self.register_buffer("rope_inv", torch.empty(cfg.d_head // 2, dtype=torch.float64), persistent=False)
            if cfg.type_vocab:
                self.type_emb = nn.Embedding(cfg.type_vocab, d)
        if not cfg.prenorm:
            self.emb_norm = _norm(cfg)
        self.blocks = nn.ModuleList(Block(cfg, cfg.layer_is_local(i)) for i in range(cfg.n_layers))
        if cfg.final_norm:
            self.final_norm = _norm(cfg)
        if cfg.kind == "lm" and not cfg.tie_embeddings:
            self.lm_head = nn.Linear(d, cfg.vocab, bias=False)
        if cfg.kind == "vit":
            self.head = nn.Linear(d, cfg.classes)
        if cfg.kind == "encoder":  # BertModel's pooler, and the pre-training heads the loss uses
            self.pooler = nn.Linear(d, d)
            self.mlm_bias = nn.Parameter(torch.zeros(cfg.vocab))  # MLM decoder: tied to tok_emb
            self.nsp = nn.Linear(d, 2)

    def hidden(self, batch):  # -> [B, T, d]
        cfg = self.cfg
        if cfg.kind == "vit":
            x = self.patch(batch["images"]).flatten(2).transpose(1, 2)  # [B, N, d]
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        else:
            ids = batch["ids"]  # [B, T]
            T = ids.shape[1]
            x = self.tok_emb(ids)
            if cfg.positions == "learned":
                x = x + self.pos_emb(torch.arange(T, device=ids.device))
            if cfg.type_vocab:
                x = x + self.type_emb(batch["types"])
        if not cfg.prenorm:
            x = self.emb_norm(x)
        rope = None
        if cfg.positions == "rope":
            wide = torch.promote_types(x.dtype, torch.float32)  # angles in float32 (float64 in the reference)
            inv = self.rope_inv.to(wide)
            freqs = torch.arange(x.shape[1], device=x.device, dtype=wide)[:, None] * inv[None, :]
            emb = torch.cat((freqs, freqs), dim=-1)  # [T, hd]
            rope = (emb.cos().to(x.dtype), emb.sin().to(x.dtype))
        for block in self.blocks:
            x = block(x, rope)
        return self.final_norm(x) if self.cfg.final_norm else x

    def forward(self, batch, loss: bool = False):
        cfg = self.cfg
        h = self.hidden(batch)
        if cfg.kind == "vit":
            logits = self.head(h[:, 0])  # [B, classes]
            return F.cross_entropy(_wide(logits), batch["labels"]) if loss else logits
        if cfg.kind == "lm":
            weight = self.tok_emb.weight if cfg.tie_embeddings else self.lm_head.weight
            logits = h @ weight.T  # [B, T, vocab]
            if not loss:
                return logits
            return F.cross_entropy(_wide(logits[:, :-1]).reshape(-1, cfg.vocab), batch["ids"][:, 1:].reshape(-1))
        if not loss:  # encoder: the last hidden states
            return h
        mlm = h @ self.tok_emb.weight.T + self.mlm_bias  # [B, T, vocab]
        nsp = self.nsp(torch.tanh(self.pooler(h[:, 0])))  # [B, 2]
        return (F.cross_entropy(_wide(mlm).reshape(-1, cfg.vocab), batch["labels"].reshape(-1))
                + F.cross_entropy(_wide(nsp), batch["nsp"]))


class Bottleneck(nn.Module):
    def __init__(self, cfg: ResNetConfig, inplanes: int, planes: int, stride: int):
        super().__init__()
        bn = lambda c: nn.BatchNorm2d(c, eps=cfg.bn_eps, momentum=cfg.bn_momentum)  # noqa: E731
        self.conv1, self.bn1 = nn.Conv2d(inplanes, planes, 1, bias=False), bn(planes)
        self.conv2, self.bn2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False), bn(planes)
        self.conv3, self.bn3 = nn.Conv2d(planes, planes * 4, 1, bias=False), bn(planes * 4)
        self.downsample = None
        if stride != 1 or inplanes != planes * 4:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes * 4, 1, stride=stride, bias=False),
                                            bn(planes * 4))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (self.downsample(x) if self.downsample is not None else x))


class ResNet(nn.Module):
    """torchvision's ResNet (v1.5: the stride on the 3x3 convolution), NCHW."""

    def __init__(self, cfg: ResNetConfig):
        super().__init__()
        w = cfg.width
        self.conv1 = nn.Conv2d(3, w, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(w, eps=cfg.bn_eps, momentum=cfg.bn_momentum)
        inplanes = w
        for i, (n, stride) in enumerate(zip(cfg.blocks, (1, 2, 2, 2))):
            planes = w * 2 ** i
            layers = []
            for j in range(int(n)):
                layers.append(Bottleneck(cfg, inplanes, planes, stride if j == 0 else 1))
                inplanes = planes * 4
            setattr(self, f"layer{i + 1}", nn.Sequential(*layers))
        self.fc = nn.Linear(inplanes, cfg.classes)

    def forward(self, batch, loss: bool = False):
        x = F.relu(self.bn1(self.conv1(batch["images"])))  # [B, w, H/2, W/2]
        x = F.max_pool2d(x, 3, stride=2, padding=1)
        for i in range(1, 5):
            x = getattr(self, f"layer{i}")(x)
        logits = self.fc(x.mean(dim=(2, 3)))  # global average pool -> [B, classes]
        return F.cross_entropy(_wide(logits), batch["labels"]) if loss else logits


def build_meta(cfg):
    with torch.device("meta"):
        return (ResNet if isinstance(cfg, ResNetConfig) else Transformer)(cfg)


def canonical_shapes(cfg) -> tuple[dict[str, tuple[int, ...]], int]:
    """Canonical tensors' shapes and the parameter count (buffers excluded), allocating nothing."""
    model = build_meta(cfg)
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
    return shapes, sum(p.numel() for p in model.parameters())


# ---- the twin interface -------------------------------------------------------------------

def build(cfg, params: dict[str, torch.Tensor]) -> nn.Module:
    """The model holding the given canonical tensors (nothing else is allocated)."""
    model = build_meta(cfg)
    model.load_state_dict(params, strict=False, assign=True)
    device = next(iter(params.values())).device
    if getattr(model, "rope_inv", None) is not None:
        model.rope_inv = torch.as_tensor(rope_inv_freq(model.cfg), dtype=torch.float64, device=device)
    for module in model.modules():  # BatchNorm's step counters are not canonical: start them at zero
        if getattr(module, "num_batches_tracked", None) is not None and module.num_batches_tracked.is_meta:
            module.num_batches_tracked = torch.zeros((), dtype=torch.long, device=device)
    return model


def canonical(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}


def forward(model, batch):
    return model(batch)


def loss(model, batch):
    return model(batch, loss=True)
