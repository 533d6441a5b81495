"""Per-example operations in JAX: a Python loop, jax.vmap, or the batched form (the backend
decides whether it runs under jit)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from stackwars.workloads.jax_util import build, canonical  # noqa: F401 - the twin interface


def dot(x, y):  # one example
    return jnp.dot(x, y)


def attention(q, k, v):  # one example: [T, d] each
    return jax.nn.softmax(q @ k.T / math.sqrt(q.shape[-1]), axis=-1) @ v


def forward(cfg, params, batch):
    if "q" in batch:
        args, one = (batch["q"], batch["k"], batch["v"]), attention
        batched = lambda q, k, v: jax.nn.softmax(  # noqa: E731
            jnp.einsum("btd,bsd->bts", q, k) / math.sqrt(q.shape[-1]), axis=-1) @ v
    else:
        args, one = (batch["x"], batch["y"]), dot
        batched = lambda x, y: jnp.sum(x * y, axis=-1)  # noqa: E731
    if cfg.impl == "loop":
        return jnp.stack([one(*(a[i] for a in args)) for i in range(args[0].shape[0])])
    if cfg.impl == "vmap":
        return jax.vmap(one)(*args)
    return batched(*args)


def loss(cfg, params, batch):  # pragma: no cover - forward only
    raise NotImplementedError("forward only")
