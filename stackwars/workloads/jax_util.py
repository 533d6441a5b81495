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
    (``None``, which is XLA's path) for sdpa or an unresolved best."""
    import jax

    impl = implementation if implementation in ("xla", "cudnn") else None
    return jax.nn.dot_product_attention(q, k, v, implementation=impl, **kwargs)
