"""gemm in JAX: a pure function of a parameter dict."""

import jax.numpy as jnp


def build(cfg, params):
    return cfg, dict(params)


def canonical(static, params):
    return params


def forward(cfg, params, batch):
    return batch["a"] @ params["b"]  # [m, k] @ [k, n] -> [m, n]


def loss(cfg, params, batch):
    y = forward(cfg, params, batch).astype(jnp.float32)
    return jnp.mean(jnp.sum((y - batch["target"].astype(jnp.float32)) ** 2, axis=-1))  # per-example
