"""ffn in JAX: a pure function of a parameter dict."""

import jax
import jax.numpy as jnp


def build(cfg, params):
    return cfg, dict(params)


def canonical(static, params):
    return params


def forward(cfg, params, batch):
    x = batch["x"]  # [B, T, d]
    h = jax.nn.gelu(x @ params["w1"] + params["b1"], approximate=cfg.activation == "gelu-tanh")  # [B, T, h]
    return h @ params["w2"] + params["b2"]  # [B, T, d]


def loss(cfg, params, batch):
    y = forward(cfg, params, batch).astype(jnp.float32)
    return jnp.mean(jnp.sum((y - batch["target"].astype(jnp.float32)) ** 2, axis=-1))  # per-example
