"""ffn in JAX: a pure function of a parameter dict."""

from dataclasses import replace

import jax

from stackwars.workloads.jax_util import build, canonical, sq_error  # noqa: F401 - the twin interface


def forward(cfg, params, batch):
    x = batch["x"]  # [B, T, d]
    if cfg.layout == "flat":
        return forward(replace(cfg, layout="bsd"), params, {"x": x.reshape(-1, x.shape[-1])}).reshape(x.shape)
    h = jax.nn.gelu(x @ params["w1"] + params["b1"], approximate=cfg.activation == "gelu-tanh")  # [B, T, h]
    return h @ params["w2"] + params["b2"]  # [B, T, d]


def loss(cfg, params, batch):
    return sq_error(forward(cfg, params, batch), batch["target"])
