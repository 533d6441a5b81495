"""softmax and layernorm in JAX: the framework's operator, or the Pallas kernels written as
the Triton ones are: one program per row, the whole row in one block."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from stackwars.workloads.jax_util import build, canonical  # noqa: F401 - the twin interface


def _softmax_kernel(x_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)  # [1, cols]
    x = x - jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(x)
    o_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(o_ref.dtype)


def _layernorm_kernel(eps, x_ref, w_ref, b_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)  # [1, cols]
    mean = jnp.mean(x, axis=-1, keepdims=True)
    d = x - mean
    rstd = jax.lax.rsqrt(jnp.mean(d * d, axis=-1, keepdims=True) + eps)
    o_ref[...] = (d * rstd * w_ref[...].astype(jnp.float32) + b_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def _row_call(kernel, x, *vectors):
    rows, cols = x.shape
    row = pl.BlockSpec((1, cols), lambda i: (i, 0))
    whole = pl.BlockSpec((1, cols), lambda i: (0, 0))  # weight and bias, the same block for every row
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(rows,),
                          in_specs=[row] + [whole] * len(vectors), out_specs=row,
                          interpret=jax.default_backend() == "cpu")(x, *(v.reshape(1, cols) for v in vectors))


def forward(cfg, params, batch):
    x = batch["x"]  # [rows, cols]
    layernorm = "w" in params
    if cfg.impl == "custom":
        if layernorm:
            return _row_call(lambda *refs: _layernorm_kernel(cfg.eps, *refs), x, params["w"], params["b"])
        return _row_call(_softmax_kernel, x)
    if layernorm:  # as flax.linen.LayerNorm computes it
        xf = x.astype(jnp.float32)
        mean = jnp.mean(xf, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(xf - mean), axis=-1, keepdims=True)
        y = (xf - mean) * jax.lax.rsqrt(var + cfg.eps) * params["w"] + params["b"]
        return y.astype(x.dtype)
    return jax.nn.softmax(x, axis=-1)


def loss(cfg, params, batch):  # pragma: no cover - forward-only workloads
    raise NotImplementedError("softmax and layernorm are forward-only")
