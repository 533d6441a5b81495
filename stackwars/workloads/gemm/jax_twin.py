"""gemm in JAX: a pure function of a parameter dict."""

from stackwars.workloads.jax_util import build, canonical, sq_error  # noqa: F401 - the twin interface


def forward(cfg, params, batch):
    return batch["a"] @ params["b"]  # [m, k] @ [k, n] -> [m, n]


def loss(cfg, params, batch):
    return sq_error(forward(cfg, params, batch), batch["target"])
