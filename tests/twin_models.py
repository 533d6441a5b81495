"""Two model files a user would write from docs/tutorials/your-own-model.md, as templates whose
knobs make one twin compute another function (tests/test_user_model.py, issue 63): a CNN with
BatchNorm, and a decoder-only LM with a head tied to its embedding, each in torch.nn and flax.nnx."""

CNN = '''
import jax
import torch
from flax import nnx
import stackwars

MOMENTUM = {momentum}  # Flax's; PyTorch's default 0.1 is Flax's 0.9
SECOND_BN = {second_bn}  # False: the JAX twin skips its second BatchNorm


class T(torch.nn.Module):
    def __init__(self, size):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.bn2 = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 10)

    def forward(self, x):  # x: [batch, 1, side, side]
        h = torch.relu(self.bn1(self.conv1(x)))
        h = torch.relu(self.bn2(self.conv2(h)))
        return self.fc(h.mean((2, 3)))


class J(nnx.Module):
    def __init__(self, size, rngs):
        self.conv1 = nnx.Conv(1, 8, (3, 3), padding="SAME", rngs=rngs)
        self.bn1 = nnx.BatchNorm(8, momentum=MOMENTUM, epsilon=1e-5, rngs=rngs)
        self.conv2 = nnx.Conv(8, 8, (3, 3), padding="SAME", rngs=rngs)
        self.bn2 = nnx.BatchNorm(8, momentum=0.9, epsilon=1e-5, rngs=rngs)
        self.fc = nnx.Linear(8, 10, rngs=rngs)

    def __call__(self, x):
        h = nnx.relu(self.bn1(self.conv1(x.transpose(0, 2, 3, 1))))  # NCHW in, Flax's NHWC inside
        h = self.conv2(h)
        h = nnx.relu(self.bn2(h) if SECOND_BN else h)
        return self.fc(h.mean((1, 2)))


net = stackwars.Model(
    name="{name}",
    presets={{"tiny": {{"batch": 8, "side": 6}}}},
    batch=lambda size, rng: {{"x": rng.standard_normal((size.batch, 1, size.side, size.side)) * 2 + 1,
                             "target": rng.integers(0, 10, size.batch)}},
    torch=T,
    jax=J,
)
'''
CNN_RIGHT = {"momentum": 0.9, "second_bn": True}

LM = '''
import math

import jax
import jax.numpy as jnp
import torch
from flax import nnx
import stackwars

EPSILON = {epsilon}  # the JAX twin's first LayerNorm
EXTRA = {extra}  # attention scaled by 1/sqrt(head size + EXTRA) in JAX
APPROXIMATE = {approximate}  # jax.nn.gelu's tanh approximation (PyTorch's GELU is the exact one)
PROJ_BIAS = {proj_bias}  # the JAX twin's attention projection with a bias or without


class T(torch.nn.Module):
    def __init__(self, size):
        super().__init__()
        d, self.heads = size.dim, size.heads
        self.emb = torch.nn.Embedding(size.vocab, d)
        self.ln1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.fc1 = torch.nn.Linear(d, 4 * d)
        self.fc2 = torch.nn.Linear(4 * d, d)
        self.lnf = torch.nn.LayerNorm(d)

    def forward(self, idx):  # idx: [batch, seq] token ids
        b, t = idx.shape
        x = self.emb(idx)
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], -1)
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, -1))
        x = x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))
        return self.lnf(x) @ self.emb.weight.T  # the head tied to the embedding


class J(nnx.Module):
    def __init__(self, size, rngs):
        d, self.heads = size.dim, size.heads
        self.emb = nnx.Embed(size.vocab, d, rngs=rngs)
        self.ln1 = nnx.LayerNorm(d, epsilon=EPSILON, rngs=rngs)
        self.qkv = nnx.Linear(d, 3 * d, rngs=rngs)
        self.proj = nnx.Linear(d, d, use_bias=PROJ_BIAS, rngs=rngs)
        self.ln2 = nnx.LayerNorm(d, epsilon=1e-5, rngs=rngs)
        self.fc1 = nnx.Linear(d, 4 * d, rngs=rngs)
        self.fc2 = nnx.Linear(4 * d, d, rngs=rngs)
        self.lnf = nnx.LayerNorm(d, epsilon=1e-5, rngs=rngs)

    def __call__(self, idx):
        b, t = idx.shape
        x = self.emb(idx)
        q, k, v = jnp.split(self.qkv(self.ln1(x)), 3, axis=-1)
        q, k, v = (z.reshape(b, t, self.heads, -1).transpose(0, 2, 1, 3) for z in (q, k, v))
        att = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(q.shape[-1] + EXTRA)
        att = jax.nn.softmax(jnp.where(jnp.triu(jnp.ones((t, t), bool), 1), -jnp.inf, att), axis=-1)
        x = x + self.proj((att @ v).transpose(0, 2, 1, 3).reshape(b, t, -1))
        x = x + self.fc2(jax.nn.gelu(self.fc1(self.ln2(x)), approximate=APPROXIMATE))
        return self.emb.attend(self.lnf(x))  # the head tied to the embedding


lm = stackwars.Model(
    name="{name}",
    presets={{"tiny": {{"batch": 2, "seq": 8, "vocab": 32, "dim": 16, "heads": 2}}}},
    batch=lambda size, rng: {{"idx": rng.integers(0, size.vocab, (size.batch, size.seq)),
                             "target": rng.integers(0, size.vocab, (size.batch, size.seq))}},
    torch=T,
    jax=J,
)
'''
LM_RIGHT = {"epsilon": 1e-5, "extra": 0, "approximate": False, "proj_bias": True}

# issue 88: the same decoder LM written with each framework's own attention API,
# F.scaled_dot_product_attention and jax.nn.dot_product_attention (which always takes its softmax in
# float32), pre-LN blocks, a GELU MLP and a head tied to the token embedding (nnx.Embed.attend)
LM_SDPA = '''
import jax
import jax.numpy as jnp
import torch
import torch.nn.functional as F
from flax import nnx
import stackwars

CAUSAL = {causal}  # is_causal on both sides, or no mask at all
APPROXIMATE = {approximate}  # jax.nn.gelu's tanh approximation (PyTorch's GELU is the exact one)


class Block(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(d, -1))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=CAUSAL)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class T(torch.nn.Module):
    def __init__(self, size):
        super().__init__()
        self.tok = torch.nn.Embedding(size.vocab, size.dim)
        self.blocks = torch.nn.ModuleList([Block(size.dim, size.heads) for _ in range(2)])
        self.lnf = torch.nn.LayerNorm(size.dim)

    def forward(self, idx):
        x = self.tok(idx)
        for block in self.blocks:
            x = block(x)
        return self.lnf(x) @ self.tok.weight.T  # the head tied to the embedding


class JBlock(nnx.Module):
    def __init__(self, d, heads, rngs):
        self.heads = heads
        self.ln1, self.ln2 = nnx.LayerNorm(d, epsilon=1e-5, rngs=rngs), nnx.LayerNorm(d, epsilon=1e-5, rngs=rngs)
        self.qkv, self.proj = nnx.Linear(d, 3 * d, rngs=rngs), nnx.Linear(d, d, rngs=rngs)
        self.fc1, self.fc2 = nnx.Linear(d, 4 * d, rngs=rngs), nnx.Linear(4 * d, d, rngs=rngs)

    def __call__(self, x):
        b, t, d = x.shape
        q, k, v = (z.reshape(b, t, self.heads, -1) for z in jnp.split(self.qkv(self.ln1(x)), 3, axis=-1))
        a = jax.nn.dot_product_attention(q, k, v, is_causal=CAUSAL)  # [batch, seq, heads, head size]
        x = x + self.proj(a.reshape(b, t, d))
        return x + self.fc2(jax.nn.gelu(self.fc1(self.ln2(x)), approximate=APPROXIMATE))


class J(nnx.Module):
    def __init__(self, size, rngs):
        self.tok = nnx.Embed(size.vocab, size.dim, rngs=rngs)
        self.blocks = nnx.List([JBlock(size.dim, size.heads, rngs) for _ in range(2)])
        self.lnf = nnx.LayerNorm(size.dim, epsilon=1e-5, rngs=rngs)

    def __call__(self, idx):
        x = self.tok(idx)
        for block in self.blocks:
            x = block(x)
        return self.tok.attend(self.lnf(x))  # the head tied to the embedding


lm = stackwars.Model(
    name="{name}",
    presets={{"tiny": {{"batch": 2, "seq": 8, "vocab": 32, "dim": 16, "heads": 2}}}},
    batch=lambda size, rng: {{"idx": rng.integers(0, size.vocab, (size.batch, size.seq)),
                             "target": rng.integers(0, size.vocab, (size.batch, size.seq))}},
    torch=T,
    jax=J,
)
'''
LM_SDPA_RIGHT = {"causal": True, "approximate": False}
