"""Helpers for JAX twins whose parameters are a flat dict in the canonical layout."""

import jax.numpy as jnp


def build(cfg, params):
    """The static part is the config; the parameters are the canonical dict itself."""
    return cfg, dict(params)


def canonical(static, params):
    return params


def sq_error(y, target):
    """Per-example squared error (summed over features, averaged over rows), in float32;
    the twin of ``workloads.base.sq_error``."""
    y, target = y.astype(jnp.float32), target.astype(jnp.float32)
    return jnp.mean(jnp.sum((y - target) ** 2, axis=-1))


def dot_product_attention(q, k, v, implementation, **kwargs):
    """jax.nn.dot_product_attention with ``implementation`` xla or cudnn; JAX's own default
    (``None``, which is XLA's path) for sdpa or an unresolved best.

    Float64 inputs never go through it: jax.nn.dot_product_attention computes its softmax in
    float32 whatever the input dtype (about 1e-7 relative), which would make a float64
    cross-check or reference only as exact as float32. They take ``exact_attention``."""
    import jax

    if q.dtype == jnp.float64:
        return exact_attention(q, k, v, **kwargs)
    impl = implementation if implementation in ("xla", "cudnn") else None
    return jax.nn.dot_product_attention(q, k, v, implementation=impl, **kwargs)


def exact_attention(q, k, v, scale=None, is_causal=False, local_window_size=None):
    """softmax(QK^T * scale + mask) V in the inputs' own dtype, with jax.nn.dot_product_attention's
    layout and arguments: [batch, seq, heads, head_dim]; grouped key/value heads; a causal mask;
    ``local_window_size`` (left, right) keys around each query."""
    import jax

    T, H, hd = q.shape[1], q.shape[2], q.shape[3]
    if k.shape[2] != H:  # grouped-query attention: each key/value head serves H // K query heads
        k, v = jnp.repeat(k, H // k.shape[2], axis=2), jnp.repeat(v, H // v.shape[2], axis=2)
    att = jnp.einsum("bqhd,bkhd->bhqk", q, k) * (hd ** -0.5 if scale is None else scale)  # [B, H, T, S]
    i, j = jnp.arange(T)[:, None], jnp.arange(k.shape[1])[None, :]
    keep = jnp.ones((T, k.shape[1]), dtype=bool)
    if is_causal:
        keep = keep & (j <= i)
    if local_window_size is not None:
        left, right = local_window_size
        keep = keep & (j >= i - left) & (j <= i + right)
    att = jnp.where(keep, att, -jnp.inf)
    return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(att, axis=-1), v)
