"""Flow matching for molecular generation, in PyTorch and in JAX (Flax NNX): the first
published study's stretch goal, written with stackwars' public API only.

A velocity field v(x, t) over the 3-D coordinates of a molecule's atoms (a permutation-
equivariant network: each atom sees its own coordinates, the time, and the mean of every
atom's features) is trained with the flow-matching loss: along the straight path
x_t = (1 - t) x0 + t x1 from noise x0 to a molecule x1, v should be x1 - x0. Sampling
integrates dx/dt = v(x, t) from noise with Euler steps.

    stackwars run examples/flow_matching.py:flow -p tiny --phase forward --phase train-step

measures the train step (the loss, its gradients, an SGD step) and the sampler (the
"forward" phase: every Euler step) on every default backend of both frameworks. The noise,
the times and the molecules are in the batch, so both frameworks see the same numbers.
"""

import jax
import jax.numpy as jnp
import numpy as np
import torch
from flax import nnx
from torch import nn

import stackwars


def batch(size, rng):
    """Molecules (random clouds standing in for a dataset's), noise, a time per molecule and
    the sampler's time grid."""
    molecules = rng.standard_normal((size.batch, size.atoms, 3)) * np.linspace(0.5, 1.5, size.atoms)[:, None]
    return {"x0": rng.standard_normal((size.batch, size.atoms, 3)), "x1": molecules,
            "t": rng.uniform(0.0, 1.0, size.batch), "times": np.linspace(0.0, 1.0, size.steps + 1)}


class TorchVelocity(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.embed = nn.Linear(4, size.hidden)
        self.mix = nn.Linear(size.hidden, size.hidden)
        self.hidden = nn.Linear(size.hidden, size.hidden)
        self.out = nn.Linear(size.hidden, 3)

    def forward(self, x, t):  # x [B, N, 3], t [B]
        tt = t[:, None, None].expand(x.shape[0], x.shape[1], 1)
        h = nn.functional.gelu(self.embed(torch.cat([x, tt], dim=-1)))
        h = h + self.mix(h.mean(dim=1, keepdim=True))  # what every atom sees of the others
        return self.out(nn.functional.gelu(self.hidden(h)))


class JaxVelocity(nnx.Module):
    def __init__(self, size, rngs):
        self.embed = nnx.Linear(4, size.hidden, rngs=rngs)
        self.mix = nnx.Linear(size.hidden, size.hidden, rngs=rngs)
        self.hidden = nnx.Linear(size.hidden, size.hidden, rngs=rngs)
        self.out = nnx.Linear(size.hidden, 3, rngs=rngs)

    def __call__(self, x, t):
        tt = jnp.broadcast_to(t[:, None, None], (x.shape[0], x.shape[1], 1))
        h = jax.nn.gelu(self.embed(jnp.concatenate([x, tt], axis=-1)), approximate=False)
        h = h + self.mix(h.mean(axis=1, keepdims=True))
        return self.out(jax.nn.gelu(self.hidden(h), approximate=False))


def flow_matching_loss(model, b):
    """The same lines in both frameworks: operators their arrays share."""
    t = b["t"][:, None, None]
    xt = (1 - t) * b["x0"] + t * b["x1"]
    d = model(xt, b["t"]) - (b["x1"] - b["x0"])
    return (d * d).sum(-1).mean()


def torch_sample(model, b):
    x, times = b["x0"], b["times"]
    for i in range(times.shape[0] - 1):  # Euler steps, unrolled as PyTorch runs a Python loop
        t = torch.full((x.shape[0],), 1.0, dtype=x.dtype, device=x.device) * times[i]
        x = x + (times[i + 1] - times[i]) * model(x, t)
    return x


def jax_sample(model, b):
    times = b["times"]

    def step(i, x):  # one compiled loop body, as JAX's users write a sampler
        t = jnp.full((x.shape[0],), 1.0, dtype=x.dtype) * times[i]
        return x + (times[i + 1] - times[i]) * model(x, t)

    return jax.lax.fori_loop(0, times.shape[0] - 1, step, b["x0"])


flow = stackwars.Model(
    name="flow-matching",
    description="flow matching over atom coordinates: velocity MLP with a pooled context; train step and Euler sampler",
    presets={"tiny": {"batch": 4, "atoms": 9, "hidden": 32, "steps": 4},
             "small": {"batch": 64, "atoms": 29, "hidden": 256, "steps": 20}},
    batch=batch,
    torch=TorchVelocity,
    jax=JaxVelocity,
    torch_forward=torch_sample,
    jax_forward=jax_sample,
    torch_loss=flow_matching_loss,
    jax_loss=flow_matching_loss,
)
