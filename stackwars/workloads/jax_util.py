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
