"""Workloads with control flow: where tracing compilers meet loops, data-dependent loops and
branches. Each is one computation written in each framework the ways its experts write it
(``impl``), with a float64 reference (the PyTorch twin's Python loop in float64, as for the
models) and parity on every cell.

* ``rnn``: a recurrence h = tanh(h W + x_t U + b) over ``n`` steps; output the last h.
* ``ode``: ``n`` fixed steps of RK4 through an MLP vector field (flow matching's sampling
  loop): f(x) = tanh(x W1 + b1) W2 + b2, dt = 1/n.
* ``newton``: ``n`` layers, each solving y^3 + a*y = z (z = y_prev W, a = 0.5 +
  softplus(p), elementwise) by Newton's method to a tolerance: the number of iterations is
  decided by the data.
* ``branch``: ``n`` steps, each choosing between two sub-computations by a predicate on
  the data (mean(h) > 0: tanh(h Wa) or relu(h Wb) - 0.1).

``impl`` (what runs the loop or the branch):

| impl | JAX | PyTorch |
|---|---|---|
| python | a Python loop (unrolled when traced) | a Python loop (eager; unrolled by torch.compile) |
| scan | ``lax.scan`` | ``torch._higher_order_ops.scan`` |
| fori | ``lax.fori_loop`` | (none) |
| while | ``lax.while_loop`` (a counter, or the tolerance) | ``torch._higher_order_ops.while_loop`` |
| fixed | newton: a fixed number of Newton steps, no test (``fori_loop``) | the same, a Python loop |
| cond / where | branch: ``lax.cond`` / both sides then ``jnp.where`` | ``torch.cond`` / ``torch.where`` |

For ``newton`` and ``branch``, ``python`` means a host-side test of the data (``float()`` /
``.item()``, ``if tensor``): JAX cannot trace it under ``jit`` and PyTorch's compiler breaks
its graph there, which is the point. ``remat=true`` rematerialises each step in the
backward pass (``jax.checkpoint`` / ``torch.utils.checkpoint``). Combinations a framework
cannot run by design are ``unsupported`` with the reason (``unsupported()``); what fails in
the installed version is an ``error`` with the framework's message.
"""

from __future__ import annotations

from dataclasses import dataclass
import numpy as np

from stackwars.registry import register_workload
from stackwars.workloads.base import Arrays, Config, OptimizerSpec, Workload, bounded, choices

IMPLS = {"rnn": ("python", "scan", "fori", "while"), "ode": ("python", "scan", "fori", "while"),
         "newton": ("python", "while", "fixed"), "branch": ("python", "cond", "where")}
NEWTON_MAX_ITERS = 50
NEWTON_FIXED_ITERS = 8


@dataclass(frozen=True)
class LoopConfig(Config):
    batch: int = 2
    d: int = 8  # width of the state
    n: int = 4  # steps (rnn, ode, branch) or layers (newton)
    impl: str = choices("python", "scan", "fori", "while", "fixed", "cond", "where", default="python")
    remat: bool = False
    hidden: int = 16  # ode: width of the vector field's hidden layer
    tol: float = bounded(1e-5, low=0, why="newton's stopping tolerance")  # stop when |residual| <= tol * max(1, |z|)


class LoopWorkload(Workload):
    config_cls = LoopConfig
    twin_modules = {"torch": "stackwars.workloads.loops.torch_twin", "jax": "stackwars.workloads.loops.jax_twin"}
    shape_params = ("batch",)
    kind: str = ""

    def config(self, preset: str, overrides=None) -> LoopConfig:
        cfg = super().config(preset, overrides)
        if cfg.impl not in IMPLS[self.kind]:
            from stackwars.errors import SpecError
            raise SpecError(f"impl={cfg.impl!r} does not apply to {self.name}; choose one of "
                            f"{', '.join(IMPLS[self.kind])}")
        return cfg

    def optimizer(self, cfg) -> OptimizerSpec:
        return OptimizerSpec("sgd", lr=0.01)

    def tolerance(self, dtype: str, matmul_precision: str, phase: str) -> float:
        """A loop carries rounding through every step: float32 1e-3 (as the models), TF32 1e-2,
        bfloat16 1e-1."""
        super().tolerance(dtype, matmul_precision, phase)
        if dtype == "bfloat16":
            return 1e-1
        return 1e-2 if matmul_precision == "tf32" else 1e-3

    def unsupported(self, cfg: LoopConfig, framework: str, backend: str, phase: str) -> str | None:
        """Combinations a framework cannot run by design (not: what fails in a version)."""
        compiled_jax = framework == "jax" and backend != "jax-eager"
        if self.kind in ("newton", "branch") and cfg.impl == "python" and compiled_jax:
            what = "while-loop test" if self.kind == "newton" else "if"
            return (f"a Python {what} on the data cannot be traced by jax.jit (a traced value has no truth "
                    f"value); JAX's compiled forms are lax.{'while_loop' if self.kind == 'newton' else 'cond'}")
        if framework == "jax" and phase == "train-step" and cfg.impl == "while":
            return ("JAX cannot reverse-differentiate lax.while_loop (forward mode only): a train step needs "
                    "lax.scan / fori_loop with a fixed trip count")
        if framework == "torch" and cfg.impl == "fori":
            return "PyTorch has no fori_loop; its loops are Python loops or the scan / while_loop operators"
        if cfg.remat and framework == "jax" and self.kind == "branch" and cfg.impl == "python":
            return "jax.checkpoint traces the step, and a Python if on traced data cannot be traced"
        if cfg.remat and cfg.impl not in ("python", "scan", "fori", "fixed"):
            return f"remat is offered with python, scan, fori and fixed loops, not {cfg.impl}"
        if cfg.remat and framework == "torch" and cfg.impl == "scan":
            return "torch.utils.checkpoint inside torch's scan operator is not supported"
        return None

    def reference(self, cfg, phase: str, params: Arrays, batch: Arrays, device: str = "cpu") -> Arrays:
        """The PyTorch twin's Python loop in float64 (autograd through every step)."""
        import dataclasses

        import torch

        from stackwars.backends.torch_common import make_optimizer

        # every impl computes the same function, except newton's fixed step count (no tolerance)
        torch_twin = self.twin("torch")
        ref_cfg = dataclasses.replace(cfg, impl="fixed" if cfg.impl == "fixed" else "python", remat=False)
        model = torch_twin.build(ref_cfg, {k: torch.from_numpy(np.asarray(v, dtype=np.float64)).to(device)
                                           for k, v in params.items()})
        tb = {k: torch.from_numpy(np.asarray(v, dtype=np.float64)).to(device) for k, v in batch.items()}
        if phase == "forward":
            with torch.no_grad():
                return {"out": torch_twin.forward(model, tb).cpu().numpy()}
        before = {k: v.detach().clone() for k, v in torch_twin.canonical(model).items()}
        opt = make_optimizer(self.optimizer(cfg), model.parameters())
        loss = torch_twin.loss(model, tb)
        loss.backward()
        opt.step()
        out = {"loss": loss.detach().cpu().numpy()}
        for k, v in torch_twin.canonical(model).items():
            out[f"update.{k}"] = (v.detach() - before[k]).cpu().numpy()
        return out

    reference_devices = ("cpu", "cuda")

    def reference_name(self, cfg) -> str:
        return "PyTorch twin's Python loop, float64"

    def attention_geometry(self, cfg):
        return None

    def bytes_moved(self, cfg, phase: str, itemsize_: int, param_itemsize: int) -> int:
        params = sum(int(np.prod(s)) for s in self.shapes(cfg)[0].values())
        inputs = sum(int(np.prod(s)) for s in self.shapes(cfg)[1].values())
        return params * param_itemsize * (1 if phase == "forward" else 2) + inputs * itemsize_


def _normal(rng, shape, scale):
    return rng.standard_normal(shape) * scale


class Rnn(LoopWorkload):
    name = "rnn"
    kind = "rnn"
    description = "recurrence h = tanh(h W + x_t U + b) over n steps (python / scan / fori / while)"
    presets = {"tiny": LoopConfig(batch=2, d=8, n=4, impl="scan"),
               # states of 256 KB: a backward pass through n=300 steps holds ~150 MB, enough to see
               "small": LoopConfig(batch=256, d=256, n=100, impl="scan"),
               "paper": LoopConfig(batch=256, d=512, n=1000, impl="scan")}
    flops_formula = "n * (4 * batch * d^2); train-step 3x"

    def shapes(self, cfg):
        d = cfg.d
        return ({"w": (d, d), "u": (d, d), "b": (d,)},
                {"x": (cfg.batch, cfg.n, d), "target": (cfg.batch, d)})

    def init(self, cfg, seed):
        rng = np.random.default_rng(seed)
        d = cfg.d
        # a contraction (spectral radius ~0.5): the recurrence neither explodes nor dies at n=1000
        params = {"w": _normal(rng, (d, d), 0.5 / np.sqrt(d)), "u": _normal(rng, (d, d), 1 / np.sqrt(d)),
                  "b": _normal(rng, (d,), 0.1)}
        return params, {"x": _normal(rng, (cfg.batch, cfg.n, d), 1.0), "target": _normal(rng, (cfg.batch, d), 0.5)}

    def flops(self, cfg, phase):
        f = cfg.n * 4 * cfg.batch * cfg.d * cfg.d
        return f if phase == "forward" else 3 * f

    def working_elements(self, cfg, phase):
        return cfg.batch * cfg.d * (1 if phase == "forward" else 3 * cfg.n)  # the states kept for backward


class Ode(LoopWorkload):
    name = "ode"
    kind = "ode"
    description = "RK4 over n steps of an MLP vector field (flow matching's sampling loop)"
    presets = {"tiny": LoopConfig(batch=2, d=8, n=4, hidden=16, impl="scan"),
               "small": LoopConfig(batch=64, d=64, n=100, hidden=256, impl="scan"),
               "paper": LoopConfig(batch=1024, d=128, n=1000, hidden=512, impl="scan")}
    flops_formula = "n * 4 evaluations * (4 * batch * d * hidden); train-step 3x"

    def shapes(self, cfg):
        d, h = cfg.d, cfg.hidden
        return ({"w1": (d, h), "b1": (h,), "w2": (h, d), "b2": (d,)},
                {"x0": (cfg.batch, d), "target": (cfg.batch, d)})

    def init(self, cfg, seed):
        rng = np.random.default_rng(seed)
        d, h = cfg.d, cfg.hidden
        params = {"w1": _normal(rng, (d, h), 1 / np.sqrt(d)), "b1": _normal(rng, (h,), 0.1),
                  "w2": _normal(rng, (h, d), 1 / np.sqrt(h)), "b2": _normal(rng, (d,), 0.1)}
        return params, {"x0": _normal(rng, (cfg.batch, d), 1.0), "target": _normal(rng, (cfg.batch, d), 1.0)}

    def flops(self, cfg, phase):
        f = cfg.n * 4 * 4 * cfg.batch * cfg.d * cfg.hidden
        return f if phase == "forward" else 3 * f

    def working_elements(self, cfg, phase):
        per_step = 4 * cfg.batch * (cfg.d + cfg.hidden)
        return per_step if phase == "forward" else per_step * cfg.n


class Newton(LoopWorkload):
    name = "newton"
    kind = "newton"
    description = "n layers, each solving y^3 + a y = y_prev W by Newton's method to a tolerance (data-dependent)"
    presets = {"tiny": LoopConfig(batch=2, d=8, n=3, impl="while"),
               "small": LoopConfig(batch=64, d=128, n=30, impl="while"),
               "paper": LoopConfig(batch=512, d=512, n=100, impl="while")}
    flops_formula = "n * 2 * batch * d^2 (the solves' elementwise work is not counted); train-step 3x"

    def shapes(self, cfg):
        return {"w": (cfg.d, cfg.d), "p": (cfg.d,)}, {"x": (cfg.batch, cfg.d), "target": (cfg.batch, cfg.d)}

    def init(self, cfg, seed):
        rng = np.random.default_rng(seed)
        params = {"w": _normal(rng, (cfg.d, cfg.d), 1.5 / np.sqrt(cfg.d)), "p": _normal(rng, (cfg.d,), 0.5)}
        return params, {"x": _normal(rng, (cfg.batch, cfg.d), 2.0), "target": _normal(rng, (cfg.batch, cfg.d), 0.5)}

    def flops(self, cfg, phase):
        f = cfg.n * 2 * cfg.batch * cfg.d * cfg.d
        return f if phase == "forward" else 3 * f

    def working_elements(self, cfg, phase):
        per_layer = cfg.batch * cfg.d * (NEWTON_MAX_ITERS if phase == "train-step" else 2)
        return per_layer * (cfg.n if phase == "train-step" else 1)


class Branch(LoopWorkload):
    name = "branch"
    kind = "branch"
    description = "n steps, each choosing tanh(h Wa) or relu(h Wb) - 0.1 by a predicate on the data"
    presets = {"tiny": LoopConfig(batch=2, d=8, n=4, impl="cond"),
               "small": LoopConfig(batch=64, d=256, n=50, impl="cond"),
               "paper": LoopConfig(batch=512, d=1024, n=200, impl="cond")}
    flops_formula = "n * 2 * batch * d^2 (the branch taken; where computes both); train-step 3x"

    def shapes(self, cfg):
        return {"wa": (cfg.d, cfg.d), "wb": (cfg.d, cfg.d)}, {"x": (cfg.batch, cfg.d), "target": (cfg.batch, cfg.d)}

    def init(self, cfg, seed):
        rng = np.random.default_rng(seed)
        params = {"wa": _normal(rng, (cfg.d, cfg.d), 1.2 / np.sqrt(cfg.d)),
                  "wb": _normal(rng, (cfg.d, cfg.d), 1.2 / np.sqrt(cfg.d))}
        return params, {"x": _normal(rng, (cfg.batch, cfg.d), 1.0), "target": _normal(rng, (cfg.batch, cfg.d), 0.5)}

    def flops(self, cfg, phase):
        f = cfg.n * 2 * cfg.batch * cfg.d * cfg.d
        return f if phase == "forward" else 3 * f

    def working_elements(self, cfg, phase):
        return cfg.batch * cfg.d * (2 if phase == "forward" else 3 * cfg.n)


for _cls in (Rnn, Ode, Newton, Branch):
    register_workload(_cls())

