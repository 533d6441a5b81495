"""The control-flow workloads in JAX: pure functions of a parameter dict, the loop or the
branch in the implementation the config names (see the package docstring)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from stackwars.errors import Unsupported
from stackwars.workloads.jax_util import build, canonical, sq_error  # noqa: F401 - the twin interface
from stackwars.workloads.loops import NEWTON_FIXED_ITERS, NEWTON_MAX_ITERS


def _remat(cfg, step):
    return jax.checkpoint(step) if cfg.remat else step


def _loop(cfg, step, h, xs):
    """h <- step(h, x_t) for t < n; ``xs`` [n, ...] (or None: nothing per step)."""
    n = cfg.n
    body = _remat(cfg, step if xs is not None else (lambda h, _: step(h)))
    if cfg.impl == "python":  # unrolled into the trace: n copies of the step
        for t in range(n):
            h = body(h, xs[t] if xs is not None else None)
        return h
    if cfg.impl == "scan":
        h, _ = lax.scan(lambda h, x: (body(h, x), None), h, xs, length=n)
        return h
    if cfg.impl == "fori":
        return lax.fori_loop(0, n, lambda t, h: body(h, xs[t] if xs is not None else None), h)
    if cfg.impl == "while":
        _, h = lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, body(c[1], xs[c[0]] if xs is not None
                                                                         else None)), (0, h))
        return h
    raise Unsupported(f"impl={cfg.impl} has no JAX form for this workload")


def _rnn(cfg, p, batch):
    xs = jnp.swapaxes(batch["x"], 0, 1)  # [n, B, d]

    def step(h, x):
        return jnp.tanh(h @ p["w"] + x @ p["u"] + p["b"])

    return _loop(cfg, step, jnp.zeros_like(xs[0]), xs)


def _ode(cfg, p, batch):
    dt = 1.0 / cfg.n

    def field(x):
        return jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]

    def step(x):  # one RK4 step
        k1 = field(x)
        k2 = field(x + 0.5 * dt * k1)
        k3 = field(x + 0.5 * dt * k2)
        k4 = field(x + dt * k3)
        return x + (dt / 6.0) * (k1 + 2 * k2 + 2 * k3 + k4)

    return _loop(cfg, step, batch["x0"], None)


def _solve(cfg, p, z):
    a = 0.5 + jax.nn.softplus(p["p"])
    y = z / (1.0 + a)
    tol = cfg.tol * jnp.maximum(jnp.abs(z), 1.0)

    def newton(y):
        return y - (y ** 3 + a * y - z) / (3 * y ** 2 + a)

    def residual(y):
        return jnp.abs(y ** 3 + a * y - z)

    if cfg.impl == "fixed":
        return lax.fori_loop(0, NEWTON_FIXED_ITERS, lambda _, y: newton(y), y)
    if cfg.impl == "python":  # the host reads the data each iteration: jax-eager only
        for _ in range(NEWTON_MAX_ITERS):
            if bool(jnp.all(residual(y) <= tol)):
                break
            y = newton(y)
        return y
    _, y = lax.while_loop(lambda c: jnp.any(residual(c[1]) > tol) & (c[0] < NEWTON_MAX_ITERS),
                          lambda c: (c[0] + 1, newton(c[1])), (0, y))
    return y


def _newton(cfg, p, batch):
    y = batch["x"]
    for _ in range(cfg.n):  # the layers: a Python loop in every impl
        y = _solve(cfg, p, y @ p["w"])
    return y


def _branch(cfg, p, batch):
    def a(h):
        return jnp.tanh(h @ p["wa"])

    def b(h):
        return jax.nn.relu(h @ p["wb"]) - 0.1

    def choose(h):
        if cfg.impl == "python":  # a Python `if` on the data: jax-eager only
            return a(h) if bool(jnp.mean(h) > 0) else b(h)
        if cfg.impl == "cond":
            return lax.cond(jnp.mean(h) > 0, a, b, h)
        return jnp.where(jnp.mean(h) > 0, a(h), b(h))  # both sides computed

    choose = _remat(cfg, choose)
    h = batch["x"]
    for _ in range(cfg.n):
        h = choose(h)
    return h


def forward(cfg, params, batch):
    if "w1" in params:
        return _ode(cfg, params, batch)
    if "p" in params:
        return _newton(cfg, params, batch)
    if "wa" in params:
        return _branch(cfg, params, batch)
    return _rnn(cfg, params, batch)


def loss(cfg, params, batch):
    return sq_error(forward(cfg, params, batch), batch["target"])
