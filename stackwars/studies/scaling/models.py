"""The two models of the scaling study, as one problem each framework trains.

* ``gpt2``: the workload of that name (its presets, its canonical weights, its PyTorch and
  Flax NNX twins), with the batch set to the study's global batch;
* ``mlp-mnist``: the MNIST study's MLP (784-512-512-10, ReLU, softmax cross-entropy), with
  the MNIST study's initialisation and MNIST-shaped inputs drawn with numpy (a step's time
  and its communication do not depend on which digits it sees).

Both train with AdamW (lr 3e-4, weight decay 0.01; torch.optim.AdamW and optax.adamw) and a
loss that is the mean over the global batch, so a data-parallel step that averages its
shards' gradients is the single-device step exactly, up to the order of the sums.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stackwars.errors import SpecError
from stackwars.workloads.base import OptimizerSpec

MODELS = ("gpt2", "mlp-mnist")
OPTIMIZER = OptimizerSpec("adamw", lr=3e-4, weight_decay=0.01)
# per-device batch by preset when the study is not told one (weak scaling keeps it; strong
# scaling splits per-device x the largest device count)
MLP_PRESETS = {"tiny": ((784, 64, 10), 8), "small": ((784, 512, 512, 10), 64), "paper": ((784, 512, 512, 10), 128)}


@dataclass(frozen=True)
class Problem:
    model: str
    preset: str
    global_batch: int
    params: dict[str, np.ndarray]  # canonical, float32
    batch: dict[str, np.ndarray]  # every array's first axis is the example
    tokens_per_example: int  # 1 for the MLP
    parameter_count: int
    tolerance: float  # on max|a - b| / max|b| of the updated parameters and the first moments
    cfg: Any = None  # the workload's config (gpt2)


def default_batch(model: str, preset: str) -> int:
    if model == "gpt2":
        from stackwars import registry
        return registry.workload("gpt2").presets[preset].batch
    return MLP_PRESETS[preset][1]


def check(model: str, preset: str) -> None:
    if model not in MODELS:
        raise SpecError(f"the scaling study trains {', '.join(MODELS)}; got {model!r}")
    if preset not in ("tiny", "small", "paper"):
        raise SpecError(f"unknown preset {preset!r}; allowed: tiny, small, paper")


# the MLP's multi-device step against its one-device step (two float32 programs, other reduction orders)
MLP_TOLERANCE = {"float32": 1e-4, "tf32": 1e-2}


def problem(model: str, preset: str, global_batch: int, seed: int = 0, device: str = "cpu") -> Problem:
    """The canonical weights and the global batch. The study runs float32 matmuls exactly in
    both frameworks; on CUDA the tolerance still allows for TF32, which cuDNN/cuBLAS paths
    outside the matmul precision setting may use."""
    check(model, preset)
    precision = "tf32" if device == "cuda" else "float32"
    if model == "gpt2":
        from stackwars import registry
        wl = registry.workload("gpt2")
        cfg = wl.config(preset, {"batch": global_batch})
        params, batch = wl.init(cfg, seed)
        return Problem(model, preset, global_batch, params, batch, cfg.seq, wl.parameter_count(cfg),
                       wl.tolerance("float32", precision, "train-step"), cfg)
    from stackwars.studies.mnist.common import init_params
    layers, _ = MLP_PRESETS[preset]
    canon = {f"{i}.{k}": v for i, layer in enumerate(init_params(seed, layers)) for k, v in layer.items()}
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1,)))
    batch = {"images": rng.random((global_batch, layers[0]), dtype=np.float32),
             "labels": rng.integers(0, layers[-1], global_batch, dtype=np.int64)}
    return Problem(model, preset, global_batch, canon, batch, 1, sum(v.size for v in canon.values()),
                   MLP_TOLERANCE["tf32" if precision == "tf32" else "float32"])


def _mlp_layers(params: dict[str, Any]) -> list[dict[str, Any]]:
    n = len(params) // 2
    return [{"w": params[f"{i}.w"], "b": params[f"{i}.b"]} for i in range(n)]


# ---- JAX ---------------------------------------------------------------------------------------

def jax_model(pb: Problem, device) -> tuple[Any, Any, Any]:
    """(params pytree on ``device``, the loss of (params, batch), a function of a numpy batch to
    the arrays the loss takes). Parameters are a pytree, the loss pure: sharding happens at
    the jit boundary."""
    import jax

    from stackwars.backends.jax_common import build_twin, to_device_array
    if pb.model == "mlp-mnist":
        from stackwars.studies.mnist.jax_train import loss_and_logits

        def loss(params, batch):
            targets = jax.nn.one_hot(batch["labels"], params[-1]["b"].shape[0])
            return loss_and_logits(params, batch["images"], targets)[0]

        params = _mlp_layers({k: jax.device_put(v, device) for k, v in pb.params.items()})
        return params, loss, lambda b: {k: np.asarray(v, np.int32 if k == "labels" else np.float32)
                                        for k, v in b.items()}
    from stackwars import registry
    from stackwars.workloads import attention
    wl = registry.workload("gpt2")
    twin = wl.twin("jax")
    cfg, _ = attention.resolve(wl, pb.cfg, "jax", "cuda" if device.platform == "gpu" else "cpu", "float32",
                               getattr(device, "compute_capability", None))
    static, tree = build_twin(twin, cfg, pb.params, lambda v: to_device_array(v, "float32", device))
    params, rest = twin.partition(static, tree)

    def loss(params, batch):
        return twin.loss_and_state(static, params, rest, batch)[0]

    return params, loss, lambda b: {k: np.asarray(v, np.int32) for k, v in b.items()}


def jax_canonical(pb: Problem, params: Any) -> dict[str, np.ndarray]:
    """Canonical name -> float64 numpy of a (gathered) parameter pytree of ``jax_model``."""
    import jax
    host = jax.tree.map(lambda x: np.asarray(x, np.float64), params)
    if pb.model == "mlp-mnist":
        return {f"{i}.{k}": v for i, layer in enumerate(host) for k, v in layer.items()}
    from stackwars import registry
    twin = registry.workload("gpt2").twin("jax")
    return {k: np.asarray(v) for k, v in twin.canonical(None, (host,)).items()}


# ---- PyTorch -----------------------------------------------------------------------------------

def torch_model(pb: Problem, device: Any) -> tuple[Any, Any, Any]:
    """(nn.Module on ``device``, loss of (model, batch), numpy batch -> tensors on ``device``)."""
    import torch
    import torch.nn.functional as F

    def tensors(b):
        return {k: torch.from_numpy(np.ascontiguousarray(v)).to(device) for k, v in b.items()}

    if pb.model == "mlp-mnist":
        from stackwars.studies.mnist.torch_train import Mlp
        model = Mlp(_mlp_layers(pb.params)).to(device)

        def loss(model, batch):
            return F.cross_entropy(model(batch["images"]), batch["labels"])

        return model, loss, tensors
    from stackwars import registry
    from stackwars.workloads import attention
    wl = registry.workload("gpt2")
    twin = wl.twin("torch")
    cc = ".".join(map(str, torch.cuda.get_device_capability(device))) if device.type == "cuda" else None
    cfg, _ = attention.resolve(wl, pb.cfg, "torch", device.type, "float32", cc)
    model = twin.build(cfg, {k: torch.from_numpy(v.copy()).to(device) for k, v in pb.params.items()})
    return model, twin.loss, tensors


def torch_canonical(pb: Problem, named: dict[str, Any]) -> dict[str, np.ndarray]:
    """Canonical name -> float64 numpy from a module's (full) named parameters."""
    if pb.model == "mlp-mnist":
        out = {}
        for name, v in named.items():  # net.<2i>.weight [out, in] -> i.w [in, out]
            _, idx, kind = name.split(".")
            a = v.detach().cpu().double().numpy()
            out[f"{int(idx) // 2}.{'w' if kind == 'weight' else 'b'}"] = a.T if kind == "weight" else a
        return out
    return {k: v.detach().cpu().double().numpy() for k, v in named.items()}
