"""mha in JAX: a pure function of a parameter dict."""

import jax
import jax.numpy as jnp

from stackwars.workloads.jax_util import build, canonical, dot_product_attention, sq_error  # noqa: F401 - the twin interface


def forward(cfg, params, batch):
    x = batch["x"]  # [B, T, C]
    B, T, C = x.shape
    H = cfg.heads

    def project(p):  # [B, T, C] -> [B, T, H, hd]
        return (x @ params[f"w{p}"] + params[f"b{p}"]).reshape(B, T, H, C // H)

    q, k, v = project("q"), project("k"), project("v")
    if cfg.attention != "naive":  # fused: xla or cudnn as chosen for this cell, or JAX's default
        y = dot_product_attention(q, k, v, cfg.attention, is_causal=cfg.causal)  # [B, T, H, hd]
    else:  # the textbook form in the PyTorch twin's layout: heads before time, batch dims leading
        q, k, v = (t.transpose(0, 2, 1, 3) for t in (q, k, v))  # [B, H, T, hd]
        s = (q @ k.transpose(0, 1, 3, 2)) / jnp.sqrt(jnp.asarray(C // H, q.dtype))  # [B, H, T, T]
        if cfg.causal:
            s = jnp.where(jnp.tril(jnp.ones((T, T), dtype=bool)), s, -jnp.inf)
        y = (jax.nn.softmax(s, axis=-1) @ v).transpose(0, 2, 1, 3)  # [B, H, T, hd] -> [B, T, H, hd]
    return y.reshape(B, T, C) @ params["wo"] + params["bo"]  # [B, T, C]


def loss(cfg, params, batch):
    return sq_error(forward(cfg, params, batch), batch["target"])
