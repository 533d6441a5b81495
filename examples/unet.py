"""A small convolutional UNet (a denoiser), in PyTorch and in JAX (Flax NNX): an architecture
none of the built-in models covers (convolutions at three resolutions, skip connections,
GroupNorm, upsampling), written with stackwars' public API only.

    stackwars run examples/unet.py:unet -p tiny --phase forward --phase train-step

The batch is NCHW, PyTorch's layout; the JAX side works in NHWC, Flax's (and XLA's) own,
transposing at its two ends, as a port of PyTorch code to Flax does. The loss is stackwars'
default: the squared error against ``target`` (here the clean image).
"""

import jax
import jax.numpy as jnp
import torch
from flax import nnx
from torch import nn
from torch.nn import functional as F

import stackwars

EPS = 1e-5  # GroupNorm's epsilon, PyTorch's default, given to Flax too (its default is 1e-6)


def batch(size, rng):
    clean = rng.standard_normal((size.batch, size.channels, size.image, size.image))
    return {"x": clean + 0.3 * rng.standard_normal(clean.shape), "target": clean}


class TorchBlock(nn.Module):
    def __init__(self, cin, cout, groups):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm1 = nn.GroupNorm(groups, cout, eps=EPS)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)

    def forward(self, x):
        return F.gelu(self.conv2(F.gelu(self.norm1(self.conv1(x)))))


class TorchUNet(nn.Module):
    def __init__(self, size):
        super().__init__()
        w, g = size.width, size.groups
        self.down1 = TorchBlock(size.channels, w, g)
        self.down2 = TorchBlock(w, 2 * w, g)
        self.middle = TorchBlock(2 * w, 4 * w, g)
        self.up2 = TorchBlock(6 * w, 2 * w, g)
        self.up1 = TorchBlock(3 * w, w, g)
        self.out = nn.Conv2d(w, size.channels, 1)

    def forward(self, x):  # x [B, C, H, W]
        d1 = self.down1(x)
        d2 = self.down2(pool_nchw(d1))
        m = self.middle(pool_nchw(d2))
        u2 = self.up2(torch.cat([upsample_nchw(m), d2], dim=1))
        u1 = self.up1(torch.cat([upsample_nchw(u2), d1], dim=1))
        return self.out(u1)


def pool_nchw(x):
    """2 x 2 average, written as the JAX side's is. (With F.interpolate for the upsampling,
    the torch-mlir-xla train step fails: torch-mlir has no StableHLO lowering for its
    backward; these two are the same functions in plain reshapes and repeats.)"""
    b, c, h, w = x.shape
    return x.reshape(b, c, h // 2, 2, w // 2, 2).mean(dim=(3, 5))


def upsample_nchw(x):  # nearest, x 2
    return x.repeat_interleave(2, dim=2).repeat_interleave(2, dim=3)


class JaxBlock(nnx.Module):
    def __init__(self, cin, cout, groups, rngs):
        self.conv1 = nnx.Conv(cin, cout, (3, 3), padding="SAME", rngs=rngs)
        self.norm1 = nnx.GroupNorm(cout, num_groups=groups, epsilon=EPS, rngs=rngs)
        self.conv2 = nnx.Conv(cout, cout, (3, 3), padding="SAME", rngs=rngs)

    def __call__(self, x):
        gelu = lambda v: jax.nn.gelu(v, approximate=False)  # noqa: E731 - PyTorch's default GELU is exact
        return gelu(self.conv2(gelu(self.norm1(self.conv1(x)))))


def pool(x):  # 2 x 2 average, NHWC
    b, h, w, c = x.shape
    return x.reshape(b, h // 2, 2, w // 2, 2, c).mean(axis=(2, 4))


def upsample(x):  # nearest, x 2, NHWC
    return jnp.repeat(jnp.repeat(x, 2, axis=1), 2, axis=2)


class JaxUNet(nnx.Module):
    def __init__(self, size, rngs):
        w, g = size.width, size.groups
        self.down1 = JaxBlock(size.channels, w, g, rngs)
        self.down2 = JaxBlock(w, 2 * w, g, rngs)
        self.middle = JaxBlock(2 * w, 4 * w, g, rngs)
        self.up2 = JaxBlock(6 * w, 2 * w, g, rngs)
        self.up1 = JaxBlock(3 * w, w, g, rngs)
        self.out = nnx.Conv(w, size.channels, (1, 1), rngs=rngs)

    def __call__(self, x):  # x [B, C, H, W] in, out; NHWC inside
        x = x.transpose(0, 2, 3, 1)
        d1 = self.down1(x)
        d2 = self.down2(pool(d1))
        m = self.middle(pool(d2))
        u2 = self.up2(jnp.concatenate([upsample(m), d2], axis=-1))
        u1 = self.up1(jnp.concatenate([upsample(u2), d1], axis=-1))
        return self.out(u1).transpose(0, 3, 1, 2)


unet = stackwars.Model(
    name="unet",
    description="a small convolutional UNet denoiser: 3 resolutions, skip connections, GroupNorm",
    presets={"tiny": {"batch": 2, "channels": 3, "image": 16, "width": 8, "groups": 4},
             "small": {"batch": 16, "channels": 3, "image": 64, "width": 32, "groups": 8}},
    batch=batch,
    torch=TorchUNet,
    jax=JaxUNet,
)
