"""Run the JAX twin of each model in float64 and compare it with the PyTorch twin's float64
reference: forward output, loss, every gradient and the new BatchNorm statistics.

In float64 the two twins may differ only by the order of floating-point operations
(~1e-13 relative), so any architectural difference (an epsilon, a mask, a scale, a
transposed weight) shows up by orders of magnitude. Run in its own process, because
jax_enable_x64 is process-wide: ``python tests/x64_twins.py MODEL[:KEY=VALUE,...]...``
prints JSON.
"""

from __future__ import annotations

import json
import sys

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platforms", "cpu")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from stackwars import registry  # noqa: E402
from stackwars.backends.jax_common import build_twin  # noqa: E402


def rel(a, b, floor: float = 1e-300) -> float:
    """max|a-b| / max|b|, the denominator at least ``floor`` (a gradient that is zero in
    exact arithmetic, such as a key bias's under softmax, is rounding noise on both sides)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), floor))


def check(name: str, overrides: dict[str, str] | None = None) -> dict[str, float]:
    wl = registry.workload(name)
    cfg = wl.config("tiny", overrides)
    params, batch = wl.init(cfg, seed=5)
    twin = wl.twin("jax")
    hb = twin.host_batch(cfg, batch)
    jbatch = {k: jnp.asarray(v if np.issubdtype(v.dtype, np.integer) else v.astype(np.float64)) for k, v in hb.items()}
    static, tree = build_twin(twin, cfg, params, lambda v: jnp.asarray(np.asarray(v, np.float64)))
    out = jax.jit(lambda t, b: twin.forward(static, t, b))(tree, jbatch)
    errs = {"dtype": str(out.dtype), "forward.out": rel(out, wl.reference(cfg, "forward", params, batch)["out"])}

    ref = wl.reference(cfg, "train-step", params, batch)
    p, rest = twin.partition(static, tree)
    (loss, new_rest), (grads, _) = jax.jit(jax.value_and_grad(
        lambda p, r: twin.loss_and_state(static, p, r, jbatch), argnums=(0, 1), has_aux=True))(p, rest)
    errs["loss"] = rel(loss, ref["loss"])
    floor = 1e-3 * max(np.max(np.abs(v)) for k, v in ref.items() if k.startswith("grad."))
    grads, new_rest = jax.tree.map(np.asarray, (grads, new_rest))  # laid out on the host, as built
    for k, g in twin.canonical(static, (grads,)).items():
        errs[f"grad.{k}"] = rel(g, ref[f"grad.{k}"], floor)
    for k, v in twin.canonical(static, (new_rest,)).items():  # BatchNorm: the new running statistics
        errs[f"state.{k}"] = rel(np.asarray(v) - params[k], ref[f"update.{k}"])
    return errs


if __name__ == "__main__":  # arguments: MODEL or MODEL:KEY=VALUE,KEY=VALUE
    results = {}
    for arg in sys.argv[1:]:
        name, _, over = arg.partition(":")
        results[arg] = check(name, dict(kv.split("=", 1) for kv in over.split(",")) if over else None)
    print(json.dumps(results))
