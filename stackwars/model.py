"""Your own model: a PyTorch module, a JAX model, or both, measured like the built-in workloads.

The public API is one class, ``stackwars.Model``::

    import numpy as np
    import torch
    import stackwars

    def batch(size, rng):                       # the inputs for one step, as numpy arrays
        x = rng.standard_normal((size.batch, size.features))
        return {"x": x, "target": rng.standard_normal((size.batch, 1))}

    model = stackwars.Model(
        name="mlp",
        presets={"tiny": {"batch": 4, "features": 16}, "small": {"batch": 64, "features": 256}},
        batch=batch,
        torch=lambda size: torch.nn.Sequential(torch.nn.Linear(size.features, 64), torch.nn.GELU(),
                                               torch.nn.Linear(64, 1)),
    )

``stackwars run my_model.py:model`` then measures it on every PyTorch backend (and, given
``jax=``, on every JAX one), with the float64 parity reference, FLOPs, shapes and memory
estimate derived from the model itself:

* **sizes**: each preset is a dict of named sizes; ``size`` is a frozen dataclass of them
  (integers are sizes and must be positive; ``--set name=value`` overrides one, validated);
* **the model**: ``torch=`` a factory ``size -> nn.Module``; ``jax=`` a factory
  ``(size, rngs) -> flax.nnx.Module``, or a pair ``(init, apply)`` of pure functions,
  ``init(size, key) -> params`` and ``apply(params, *inputs) -> output``;
* **how it is called**: ``model(*inputs)``, ``inputs`` the batch's arrays in the order given
  (default: every key but ``target``); ``torch_forward(model, batch)`` and
  ``jax_forward(model, batch)`` replace the call (a sampler that integrates an ODE);
* **the loss** (train-step): ``loss(output, batch) -> scalar``, written with operators both
  frameworks' arrays share, or ``torch_loss(model, batch)`` / ``jax_loss(model, batch)``;
  default: the squared error against ``target`` (floats; summed over the last axis, averaged
  over the rest), cross-entropy against ``target`` (integers: class ids over the last axis),
  or, with no target, the squared output;
* **parameters** go from one twin to the other by name (PyTorch's ``weight`` is Flax's
  ``kernel``, ``scale`` or ``embedding``; a Linear or Conv kernel is transposed to Flax's
  layout), else in name order where every shape agrees; ``transfer=(to_jax, to_torch)``, two
  functions between flat dicts of numpy arrays by dotted name, replaces that where they do
  not line up;
* **FLOPs** from PyTorch's flop counter (forward; train-step: forward and backward) or XLA's
  cost analysis where only JAX is given; ``flops(size, phase)`` replaces it;
* **the float64 reference** is the model itself run in float64 (the PyTorch side where there
  is one; the JAX side under ``jax.enable_x64`` otherwise), with the same optimizer step;
* **the twins are checked to be one function** before the first cell, in a worker: both in
  float64, a forward in eval mode, one in training mode and one train step (loss, gradients,
  updates, buffers), within ``TWIN_TOLERANCE`` (a quantity that an operation computing below
  float64 reaches, ``jax.nn.dot_product_attention``'s float32 softmax, within that dtype's
  rounding: ``stackwars.precision``, named in the run's notes); the normalisations' momentum and epsilon read
  from both; a float32 overflow named as such (``UserWorkload.verify``). The command-line
  process runs none of the user's code: the shapes it needs come from that worker.

A model given in one framework only runs on that framework's backends (a PyTorch-only model
on torch-eager, torch-compile and torch-mlir-xla as well); the verdict says there is nothing
to compare. Models must be deterministic (no dropout, no random calls in ``forward``): any
noise a step needs belongs in the batch, so both twins see the same numbers.

Where a model comes from: a file (``stackwars run path/to/file.py:name``, nothing
installed), an installed package's ``stackwars.workloads`` entry point, or a module in
``STACKWARS_PLUGINS`` (a module name, or a ``.py`` file); a module or file may define several
``Model`` objects, each registered under its ``name``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import re
import time
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from stackwars.errors import SpecError
from stackwars.records import PHASES
from stackwars.workloads.base import Arrays, Config, OptimizerSpec, Workload, as_float64

NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
OPTIMIZERS = ("sgd", "adamw")


@dataclass
class Model:
    """A user's model; see the module docstring. Checked when it is made."""

    name: str
    presets: Mapping[str, Mapping[str, Any]]
    batch: Callable[[Any, np.random.Generator], Mapping[str, np.ndarray]]
    torch: Callable[[Any], Any] | None = None
    jax: Callable[..., Any] | tuple[Callable, Callable] | None = None
    inputs: Sequence[str] | None = None
    loss: Callable[[Any, Mapping[str, Any]], Any] | None = None
    torch_forward: Callable[[Any, Mapping[str, Any]], Any] | None = None
    jax_forward: Callable[[Any, Mapping[str, Any]], Any] | None = None
    torch_loss: Callable[[Any, Mapping[str, Any]], Any] | None = None
    jax_loss: Callable[[Any, Mapping[str, Any]], Any] | None = None
    transfer: tuple[Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]],
                    Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]] | None = None
    flops: Callable[[Any, str], int] | None = None
    optimizer: str = "sgd"
    lr: float = 0.01
    description: str = ""
    phases: Sequence[str] = field(default_factory=lambda: tuple(PHASES))

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not NAME.match(self.name):
            raise SpecError(f"Model name {self.name!r}: lower-case letters, digits, '.', '_' and '-', starting with "
                            f"a letter or digit")
        if self.torch is None and self.jax is None:
            raise SpecError(f"Model {self.name!r}: give torch= (a factory of an nn.Module), jax= (a factory of a "
                            f"flax.nnx.Module, or an (init, apply) pair), or both")
        if not callable(self.batch):
            raise SpecError(f"Model {self.name!r}: batch= must be a function (size, rng) -> dict of numpy arrays")
        if self.transfer is not None and not (isinstance(self.transfer, tuple) and len(self.transfer) == 2
                                              and all(map(callable, self.transfer))):
            raise SpecError(f"Model {self.name!r}: transfer= must be a pair of functions (to_jax, to_torch), each "
                            f"from one side's parameters to the other's (flat dicts of numpy arrays by dotted name)")
        for part in ("torch", "loss", "torch_forward", "jax_forward", "torch_loss", "jax_loss", "flops"):
            value = getattr(self, part)
            if value is not None and not callable(value):
                raise SpecError(f"Model {self.name!r}: {part}= must be a function, got {type(value).__name__}")
        if self.jax is not None and not callable(self.jax) and not (
                isinstance(self.jax, tuple) and len(self.jax) == 2 and all(map(callable, self.jax))):
            raise SpecError(f"Model {self.name!r}: jax= must be a factory (size, rngs) -> flax.nnx.Module or a "
                            f"pair (init, apply) of functions")
        if not isinstance(self.presets, Mapping) or not self.presets:
            raise SpecError(f"Model {self.name!r}: presets= must be a dict of named sizes, "
                            f"e.g. {{'tiny': {{'batch': 2}}}}")
        keys = None
        for preset, sizes in self.presets.items():
            if not isinstance(sizes, Mapping):
                raise SpecError(f"Model {self.name!r}: preset {preset!r} must be a dict of sizes")
            if keys is not None and set(sizes) != keys:
                raise SpecError(f"Model {self.name!r}: preset {preset!r} names {sorted(sizes)}, the first preset "
                                f"{sorted(keys)}; every preset names the same sizes")
            keys = set(sizes)
        if self.optimizer not in OPTIMIZERS:
            raise SpecError(f"Model {self.name!r}: optimizer {self.optimizer!r}; allowed: {', '.join(OPTIMIZERS)}")
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise SpecError(f"Model {self.name!r}: lr must be a positive number, got {self.lr!r}")
        bad = [p for p in self.phases if p not in PHASES]
        if bad or not self.phases:
            raise SpecError(f"Model {self.name!r}: phases {list(self.phases)}; allowed: {', '.join(PHASES)}")

    @property
    def frameworks(self) -> tuple[str, ...]:
        return tuple(f for f in ("torch", "jax") if getattr(self, f) is not None)


# ---- the workload a Model becomes ---------------------------------------------------------

def _config_class(model: Model) -> type[Config]:
    first = next(iter(model.presets.values()))
    fields = []
    for key, value in first.items():
        if not key.isidentifier():
            raise SpecError(f"Model {model.name!r}: size name {key!r} is not a Python identifier")
        typ = bool if isinstance(value, bool) else int if isinstance(value, int) else \
            float if isinstance(value, float) else str
        fields.append((key, typ))
    cls = dataclasses.make_dataclass(f"{model.name.replace('-', '_').replace('.', '_')}_size", fields,
                                     bases=(Config,), frozen=True)
    cls.__module__ = __name__
    return cls


class UserWorkload(Workload):
    """A ``Model`` as a workload: the twins, reference, FLOPs and shapes derived from it."""

    flops_formula = "counted: PyTorch's flop counter (or XLA's cost analysis where only JAX is given)"

    def __init__(self, model: Model, origin: str, preload: tuple[str, ...] = ()):
        self.model = model
        self.origin = origin
        self.preload = tuple(preload)  # the frameworks its file imports at its top (registry.frameworks_imported)
        self.name = model.name
        self.description = model.description or f"your model ({', '.join(model.frameworks)}; {origin})"
        self.config_cls = _config_class(model)
        self.presets = {}
        for preset, sizes in model.presets.items():
            cfg = self.config_cls(**sizes)
            try:
                cfg.validate()
            except SpecError as exc:
                raise SpecError(f"Model {model.name!r}: preset {preset!r}: {exc}") from None
            self.presets[preset] = cfg
        self.phases = tuple(model.phases)
        # the frameworks it is written in (the built-ins name their twin modules here; a user's
        # twins are made by ``twin`` from the Model itself)
        self.twin_modules = {f: f"{origin}:{f}" for f in model.frameworks}
        self.shape_params = tuple(k for k, v in next(iter(model.presets.values())).items()
                                  if isinstance(v, int) and not isinstance(v, bool))
        # what the command-line process needs of the model (its parameters' and its batch's shapes,
        # for the memory estimate) at each size a run plans, computed in the check's worker and
        # handed back (``learn``): the user's factories and batch() never run in that process
        self.facts: dict[Config, tuple[dict[str, tuple], dict[str, tuple]]] = {}

    def learn(self, facts: Sequence[Mapping[str, Any]]) -> None:
        """Shapes a worker computed (``verify_task``), kept for ``shapes``."""
        for f in facts:
            cfg = self.config(f["preset"], dict(f.get("overrides") or {}))
            self.facts[cfg] = ({k: tuple(v) for k, v in f["parameters"].items()},
                               {k: tuple(v) for k, v in f["batch"].items()})

    # ---- what the user gave, called with a clear error ------------------------------------
    def _call(self, what: str, fn: Callable, *args: Any) -> Any:
        try:
            return fn(*args)
        except SpecError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure in the user's code is theirs to see, named
            raise SpecError(f"{self.origin}: model {self.name!r}: {what} raised {type(exc).__name__}: {exc}") from None

    def init_batch(self, cfg: Config, seed: int) -> Arrays:
        """Another batch for the same weights (the reference draws more to estimate float32's
        error of each tensor: harness/reference.float32_errors)."""
        return self.make_batch(cfg, seed)

    def make_batch(self, cfg: Config, seed: int) -> Arrays:
        out = self._call("batch(size, rng)", self.model.batch, cfg, np.random.default_rng(seed + 1))
        if not isinstance(out, Mapping) or not out:
            raise SpecError(f"{self.origin}: model {self.name!r}: batch(size, rng) must return a dict of numpy "
                            f"arrays, got {type(out).__name__}")
        arrays = {}
        for k, v in out.items():
            a = np.asarray(v)
            if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
                raise SpecError(f"{self.origin}: model {self.name!r}: batch array {k!r} has dtype {a.dtype}; "
                                f"give floating-point or integer arrays")
            arrays[k] = a.astype(np.float64) if np.issubdtype(a.dtype, np.floating) else a.astype(np.int64)
        for k in self.input_names(arrays):
            if k not in arrays:
                raise SpecError(f"{self.origin}: model {self.name!r}: inputs names {k!r}, which batch() does not "
                                f"return (it returns {', '.join(arrays)})")
        return arrays

    def input_names(self, batch: Mapping[str, Any]) -> list[str]:
        return list(self.model.inputs) if self.model.inputs is not None else [k for k in batch if k != "target"]

    # ---- parameters -----------------------------------------------------------------------
    def torch_module(self, cfg: Config, seed: int = 0, device: str | None = None):
        import torch

        torch.manual_seed(seed)
        ctx = torch.device(device) if device else contextlib.nullcontext()
        with ctx:
            module = self._call("the torch factory", self.model.torch, cfg)
        if not isinstance(module, torch.nn.Module):
            raise SpecError(f"{self.origin}: model {self.name!r}: torch= must return a torch.nn.Module, got "
                            f"{type(module).__name__}")
        return self._materialized(module, cfg, device)

    def _materialized(self, module, cfg: Config, device: str | None):
        """A module with lazy parts (``nn.LazyLinear``, ``nn.LazyConv2d``: shapes taken from the
        first input) initialised by one forward on the first batch, as PyTorch's own docs
        prescribe, in the same seeded stream; refused, naming the reason, where that fails."""
        import torch
        from torch.nn.parameter import is_lazy

        lazy = [n for n, p in (*module.named_parameters(), *module.named_buffers()) if is_lazy(p)]
        if not lazy:
            return module
        why = (f"{self.origin}: model {self.name!r}: it has lazy modules ({', '.join(lazy[:4])}"
               f"{', ...' if len(lazy) > 4 else ''}), whose shapes come from the first forward")
        batch = self.make_batch(cfg, 0)
        tensors = {k: torch.as_tensor(v, dtype=torch.int64 if np.issubdtype(v.dtype, np.integer) else torch.float32,
                                      device=device or "cpu") for k, v in batch.items()}
        try:
            with torch.no_grad():
                _torch_call(self, module, tensors)  # called as every step calls it
        except Exception as exc:  # noqa: BLE001 - the user's forward, named
            raise SpecError(f"{why}; that forward raised {type(exc).__name__}: {exc}{_call_hint(self, batch, exc)}; "
                            f"give those modules their sizes") from None
        still = [n for n, p in (*module.named_parameters(), *module.named_buffers()) if is_lazy(p)]
        if still:
            raise SpecError(f"{why}; one forward left {', '.join(still[:4])} uninitialised: give those modules their "
                            f"sizes")
        return module

    def jax_parts(self, cfg: Config, seed: int = 0):
        """(kind, graphdef or apply, params pytree, rest) of the JAX side, built."""
        import jax

        if isinstance(self.model.jax, tuple):
            init, apply = self.model.jax
            params = self._call("the jax init", init, cfg, jax.random.key(seed))
            return "pure", apply, params, None
        from flax import nnx

        module = self._call("the jax factory", self.model.jax, cfg, nnx.Rngs(seed))
        if not isinstance(module, nnx.Module):
            raise SpecError(f"{self.origin}: model {self.name!r}: jax= must return a flax.nnx.Module (or be an "
                            f"(init, apply) pair), got {type(module).__name__}")
        graphdef, params, rest = nnx.split(module, nnx.Param, ...)
        return "nnx", graphdef, params, rest

    def jax_skeleton(self, cfg: Config, seed: int = 0):
        """``jax_parts`` without computing the parameters: (kind, graphdef or apply, the
        parameters' abstract pytree, the rest of an NNX module's state, computed). A twin's
        ``build`` fills the parameters with the run's own (drawn once, or carried over from
        PyTorch), so the factory's initialisers need not run: in eager JAX each one compiles
        a program of its own (the UNet example's 44 took 20 s of each of its JAX cells'
        preparation at the tiny size on a 2-core Zen 3 VM, 1.6 s without them). The rest
        (BatchNorm's statistics, RNG state) comes from one ``jax.jit`` of the factory that
        returns only it, whose unused initialisers XLA drops. The factory is traced as
        ``parameter_shapes`` already traces it."""
        import jax

        if isinstance(self.model.jax, tuple):
            init, apply = self.model.jax
            params = jax.eval_shape(lambda: self._call("the jax init", init, cfg, jax.random.key(seed)))
            return "pure", apply, params, None
        from flax import nnx

        abstract = nnx.eval_shape(lambda: self._call("the jax factory", self.model.jax, cfg, nnx.Rngs(seed)))
        graphdef, params, _ = nnx.split(abstract, nnx.Param, ...)
        return "nnx", graphdef, params, jax.jit(lambda: self.jax_parts(cfg, seed)[3])()

    def init(self, cfg: Config, seed: int) -> tuple[Arrays, Arrays]:
        if self.model.torch is not None:
            module = self.torch_module(cfg, seed)
            params = {n: p.detach().double().numpy() for n, p in module.named_parameters()}
        else:
            _, _, tree, _ = self.jax_parts(cfg, seed)
            params = {k: np.asarray(v, dtype=np.float64) for k, v in flat(tree).items()}
        return params, self.make_batch(cfg, seed)

    def shapes(self, cfg: Config):
        if cfg in self.facts:  # the command-line process: from the check's worker
            return self.facts[cfg]
        params = self.parameter_shapes(cfg)
        batch = {k: tuple(v.shape) for k, v in self.make_batch(cfg, 0).items()}
        return params, batch

    @functools.lru_cache(maxsize=32)
    def parameter_shapes(self, cfg: Config) -> dict[str, tuple[int, ...]]:
        if self.model.torch is not None:
            module = self.torch_module(cfg, 0, device="meta")  # nothing allocated
            return {n: tuple(p.shape) for n, p in module.named_parameters()}
        import jax

        shapes = jax.eval_shape(lambda: self.jax_parts(cfg, 0)[2])
        return {k: tuple(v.shape) for k, v in flat(shapes).items()}

    def transfer_plan(self, cfg: Config) -> "Transfer":
        """How canonical (PyTorch) parameters become the JAX side's, checked now."""
        import jax

        if self.model.torch is None:
            return Transfer({}, identity=True)
        canonical = self.parameter_shapes(cfg)
        jax_shapes = {k: tuple(v.shape) for k, v in flat(jax.eval_shape(lambda: self.jax_parts(cfg, 0)[2])).items()}
        if self.model.transfer is not None:
            return Transfer({}, hook=self.model.transfer, jax_shapes=jax_shapes, origin=f"{self.origin}: model "
                            f"{self.name!r}")
        try:
            return Transfer(match(canonical, jax_shapes), jax_shapes=jax_shapes)
        except SpecError as exc:
            raise SpecError(f"{self.origin}: model {self.name!r}: {exc}") from None

    # ---- the twins ------------------------------------------------------------------------
    def twin(self, framework: str) -> types.SimpleNamespace:
        if framework not in self.model.frameworks:
            raise SpecError(f"workload {self.name!r} has no {framework} implementation (a "
                            f"{'/'.join(self.model.frameworks)}-only model)")
        return _torch_twin(self) if framework == "torch" else _jax_twin(self)

    def unsupported(self, cfg: Config, framework: str, backend: str, phase: str) -> str | None:
        if framework not in self.model.frameworks:
            side = {"torch": "PyTorch", "jax": "JAX"}
            return (f"{self.name} is a {side[self.model.frameworks[0]]}-only model: it has no {side[framework]} "
                    f"implementation")
        return None

    def optimizer(self, cfg: Config) -> OptimizerSpec:
        return OptimizerSpec(self.model.optimizer, lr=float(self.model.lr),
                             weight_decay=0.01 if self.model.optimizer == "adamw" else 0.0)

    def describe(self, cfg: Config) -> dict[str, Any]:
        """The base description (PyTorch's side where there is one), and each side on its own:
        its parameters (count, tensors) and FLOPs (PyTorch's flop counter, XLA's cost analysis)."""
        import jax

        d = super().describe(cfg)
        sides = {}
        if self.model.torch is not None:
            shapes = {n: tuple(p.shape) for n, p in self.torch_module(cfg, 0, device="meta").named_parameters()}
            sides["PyTorch"] = {"parameters": sum(math.prod(v) for v in shapes.values()),
                                "parameter_tensors": len(shapes),
                                "flops": {p: _torch_flops(self, cfg, p) for p in self.phases}}
        if self.model.jax is not None:
            shapes = {k: tuple(v.shape) for k, v in flat(jax.eval_shape(lambda: self.jax_parts(cfg, 0)[2])).items()}
            sides["JAX"] = {"parameters": sum(math.prod(v) for v in shapes.values()), "parameter_tensors": len(shapes),
                            "flops": {p: _xla_flops(self, cfg, p) for p in self.phases}}
        d["sides"] = sides
        return d

    # ---- counts ---------------------------------------------------------------------------
    def flops(self, cfg: Config, phase: str) -> int:
        if self.model.flops is not None:
            return int(self._call("flops(size, phase)", self.model.flops, cfg, phase))
        return _counted_flops(self, cfg, phase)

    def bytes_moved(self, cfg: Config, phase: str, itemsize: int, param_itemsize: int) -> int:
        """At least: the parameters read (and written, training) and the batch read once."""
        params, batch = self.shapes(cfg)
        n_params = sum(math.prod(s) for s in params.values())
        n_batch = sum(math.prod(s) for s in batch.values())
        return (1 if phase == "forward" else 2) * n_params * param_itemsize + n_batch * itemsize

    # ---- the float64 reference: the model itself ------------------------------------------
    def reference_name(self, cfg: Config) -> str:
        return ("the model's PyTorch side in float64" if self.model.torch is not None
                else "the model's JAX side in float64 (jax.enable_x64)")

    def reference(self, cfg: Config, phase: str, params: Arrays, batch: Arrays, device: str = "cpu") -> Arrays:
        if self.model.torch is not None:
            return _torch_step(self, cfg, phase, params, batch, "float64")
        return _jax_step_x64(self, cfg, phase, params, batch)

    def reference_float32(self, cfg: Config, phase: str, params: Arrays, batch: Arrays,
                          device: str = "cpu") -> Arrays | None:
        if self.model.torch is None:
            return None
        return _torch_step(self, cfg, phase, params, batch, "float32")

    # ---- checked before anything is measured ------------------------------------------------
    @functools.lru_cache(maxsize=32)
    def verify(self, cfg: Config) -> list[str]:
        """Build each side at ``cfg`` and run it on the CPU on the first batch: each output must
        be one array; twins must agree on parameters (they can be transferred), on the output's
        shape, on their normalisations' settings and, in float64, on every number of a forward
        in eval mode, a forward in training mode and one train step (``check_twins``); an
        output that overflows float32 where float64 does not is named as overflow. Raises
        SpecError naming the file and the part that is wrong; returns the check's notes (an
        operation that computed below float64, and what it was allowed)."""
        params, batch = self.init(cfg, 0)
        outs = {}
        if self.model.torch is not None:
            outs["PyTorch"] = _torch_step(self, cfg, "forward", params, batch, "float32")["out"]
        if self.model.jax is not None:
            self.transfer_plan(cfg)
            outs["JAX"] = _jax_forward_numpy(self, cfg, params, batch)
        if len({o.shape for o in outs.values()}) > 1:
            raise SpecError(f"{self.origin}: model {self.name!r}: the twins' outputs differ in shape (PyTorch "
                            f"{outs['PyTorch'].shape}, JAX {outs['JAX'].shape}); both must compute the same function")
        notes: list[str] = []
        if len(outs) == 2:
            check_settings(self, cfg)
            notes = self.check_twins(cfg, params, batch)
        self.check_overflow(cfg, params, batch, outs)
        return notes

    def check_twins(self, cfg: Config, params: Arrays, batch: Arrays) -> list[str]:
        """The twins, given the same (transferred) parameters and the first batch, run in float64
        on both sides (JAX under x64): the forward in eval mode, the forward in training mode
        (batch statistics), and one train step (loss, every gradient, every parameter's update,
        every buffer after it, a BatchNorm's running statistics). Dropout is off in both
        (its modules left in eval mode) so that both compute one function. One function run
        twice in float64 agrees to about 1e-13 (the order of its sums); every quantity must agree
        within TWIN_TOLERANCE, relative to its largest element, except one that an operation
        computing below float64 reaches (``jax.nn.dot_product_attention``'s float32 softmax, a
        ``.float()``: ``stackwars.precision``), which is allowed that dtype's rounding and named
        in the notes returned. Twins that differ are bad input, refused before the first cell,
        naming the first quantity that differs and, for the forward, the first layer
        (``_first_difference``)."""
        from stackwars import precision

        preset = next((k for k, v in self.presets.items() if v == cfg), "?")
        t, t_narrow = _torch_check(self, cfg, params, batch)
        j, j_narrow = _jax_check(self, cfg, params, batch)
        largest = {}  # each kind's largest element (gradients, updates): a millionth of it is the floor
        for key, v in t.items():
            kind = key.split(".")[0]
            largest[kind] = max(largest.get(kind, 0.0), float(np.max(np.abs(v))) if np.size(v) else 0.0)
        within: dict[tuple[str, Any], list[tuple[float, str]]] = {}  # (side, operation) -> (difference, quantity)
        for key in t:  # in the order a reader follows: eval forward, train forward, loss, gradients, updates, buffers
            if key not in j:
                continue
            kind = key.split(".")[0]
            what = CHECKED.get(kind, key)
            name = key.split(".", 1)[1] if "." in key else None
            narrows = {("PyTorch", n) for n in t_narrow.get(key, ())} | {("JAX", n) for n in j_narrow.get(key, ())}
            tol = precision.tolerance((n for _, n in narrows), TWIN_TOLERANCE)
            err = _relative(j[key], t[key], 1e-6 * largest[kind] if kind in ("grad", "update") else 0.0)
            if err is None or err <= TWIN_TOLERANCE:
                continue
            if err <= tol:
                for n in narrows:
                    within.setdefault(n, []).append((err, f"{what}{f' of {name}' if name else ''}"))
                continue
            told = f"{err:.3g}" if math.isfinite(err) else "NaN or infinity"
            where = ""
            if key in ("eval", "train"):
                where = _first_difference(self, cfg, params, batch, tol, training=key == "train")
            allowed = (f"{tol:.2g} is allowed (the rounding of "
                       f"{'; '.join(sorted(n.describe(side) for side, n in narrows))}, which reach it)"
                       if narrows else f"{TWIN_TOLERANCE:.0e} is allowed (one function run twice in float64 agrees "
                                       f"to about 1e-13)")
            hint = _hint(key, name)
            raise SpecError(
                f"{self.origin}: model {self.name!r}: the twins compute different functions: given the same "
                f"parameters and the first batch of preset {preset!r}, in float64 on both sides, "
                f"{what}{f' of {name}' if name else ''} differs by {told} (max|JAX - PyTorch| / max|PyTorch|) where "
                f"{allowed}. {where}{hint}nothing was run")
        notes = []
        for (side, n), found in sorted(within.items(), key=lambda kv: (kv[0][0], kv[0][1].op)):
            found.sort(reverse=True)
            worst = ", ".join(f"{q} to {e:.3g}" for e, q in found[:3]) + (
                f" and {len(found) - 3} more" if len(found) > 3 else "")
            notes.append(f"{n.describe(side)}: {worst} ({len(found)} of the check's quantities beyond float64's "
                         f"{TWIN_TOLERANCE:.0e}, within {n.dtype}'s rounding, "
                         f"{precision.tolerance([n], TWIN_TOLERANCE):.2g})")
        return notes

    def check_overflow(self, cfg: Config, params: Arrays, batch: Arrays, outs: Mapping[str, np.ndarray]) -> None:
        """A float32 forward that gives NaN or infinity where the float64 one does not overflows
        float32: named as overflow, on which side and at which layer, not as twins that differ."""
        bad = [side for side, out in outs.items() if not np.all(np.isfinite(out))]
        if not bad:
            return
        ref = self.reference(cfg, "forward", params, batch)["out"]
        if not np.all(np.isfinite(ref)):
            return  # float64 holds NaN too: every cell's parity says the reference holds NaN
        where = []
        for side in bad:
            layers = (_torch_layers(self, cfg, params, batch, "float32") if side == "PyTorch"
                      else _jax_layers(self, cfg, params, batch))
            first = next((name for name, out in layers if not np.all(np.isfinite(out))), None)
            where.append(f"{side}'s" + (f" first at layer {first}" if first else ""))
        preset = next((k for k, v in self.presets.items() if v == cfg), "?")
        raise SpecError(f"{self.origin}: model {self.name!r}: overflow in float32: the forward at preset {preset!r} "
                        f"gives NaN or infinity in float32 ({'; '.join(where)}) where the float64 forward is finite: "
                        f"the model's numbers leave float32's range at this size (scale its inputs or weights, or "
                        f"normalise); the twins are not the problem; nothing was run")


# ---- parameter names and layouts ----------------------------------------------------------

def path_name(path) -> str:
    """A pytree path as a dotted name: ('fc1', 'kernel', .value) -> 'fc1.kernel'."""
    parts = [str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k)))) for k in path]
    if len(parts) > 1 and parts[-1] == "value" and type(path[-1]).__name__ == "GetAttrKey":
        parts = parts[:-1]  # an nnx.Variable's value
    return ".".join(parts)


def flat(tree) -> dict[str, Any]:
    """A parameter pytree (nnx.State, a nested dict) as a flat {dotted.name: leaf} dict."""
    import jax

    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {path_name(p): v for p, v in leaves}


def unflat(tree, values: Mapping[str, Any]):
    """``tree`` with its leaves replaced by ``values`` (by dotted name)."""
    import jax

    leaves, treedef = jax.tree_util.tree_flatten_with_path(tree)
    return jax.tree_util.tree_unflatten(treedef, [values[path_name(p)] for p, _ in leaves])


_SYNONYMS = {"kernel": "weight", "scale": "weight", "embedding": "weight", "w": "weight", "b": "bias"}


def _normal(name: str) -> str:
    parts = [_SYNONYMS.get(p, p) for p in name.lower().split(".") if p not in ("layers", "value")]
    return ".".join(parts)


def _layout(jax_name: str, torch_shape: tuple[int, ...], jax_shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The permutation that takes a PyTorch array to the JAX side's layout, or None if none does."""
    rank = len(torch_shape)
    if jax_name.split(".")[-1] == "kernel" and rank >= 2:
        perm = (1, 0) if rank == 2 else tuple(range(2, rank)) + (1, 0)  # [out, in, *k] -> [*k, in, out]
        if tuple(torch_shape[i] for i in perm) == tuple(jax_shape):
            return perm
    if tuple(torch_shape) == tuple(jax_shape):
        return tuple(range(rank))
    if rank == 2 and tuple(torch_shape[::-1]) == tuple(jax_shape):
        return (1, 0)
    return None


def match(torch_shapes: Mapping[str, tuple], jax_shapes: Mapping[str, tuple]) -> dict[str, tuple[str, tuple]]:
    """jax name -> (torch name, permutation): by name (Flax's kernel/scale/embedding is
    PyTorch's weight), else in sorted-name order where every layout agrees. Parameters that
    cannot be paired are named with both shapes; ``transfer=`` is advised only where the twins
    hold the same numbers in another arrangement (the same sizes), never where they describe
    different models (a 5x5 kernel against a 3x3 one, a bias on one side only)."""
    by_name = {_normal(t): t for t in torch_shapes}
    if len(torch_shapes) != len(jax_shapes):
        only_torch = [t for t in torch_shapes if _normal(t) not in {_normal(j) for j in jax_shapes}]
        only_jax = [j for j in jax_shapes if _normal(j) not in by_name]
        named = "; ".join(part for part in (
            f"only PyTorch has {_listing({t: torch_shapes[t] for t in only_torch})}" if only_torch else "",
            f"only JAX has {_listing({j: jax_shapes[j] for j in only_jax})}" if only_jax else "") if part)
        raise SpecError(f"parameters cannot be matched: PyTorch has {len(torch_shapes)} "
                        f"({_listing(torch_shapes)}), JAX has {len(jax_shapes)} ({_listing(jax_shapes)})"
                        + (f"; {named}" if named else "") + ": the twins do not describe the same model (a layer or "
                        "a bias on one side only); make them the same")
    plan: dict[str, tuple[str, tuple]] = {}
    if len(by_name) == len(torch_shapes) and all(_normal(j) in by_name for j in jax_shapes):
        for j, js in jax_shapes.items():
            t = by_name[_normal(j)]
            perm = _layout(j, torch_shapes[t], js)
            if perm is None:
                raise SpecError(f"parameters cannot be matched: PyTorch's {t} {tuple(torch_shapes[t])} and JAX's "
                                f"{j} {tuple(js)} have the same name but {_unlike(torch_shapes[t], js)}")
            plan[j] = (t, perm)
        return plan
    def key(name: str) -> list[tuple]:  # numbers as numbers (layer 10 after layer 9), weight before bias
        return [(0, int(p), "") if p.isdigit() else (1, 0, _SYNONYMS.get(p, p)) for p in name.split(".")]

    for j, t in zip(sorted(jax_shapes, key=key), sorted(torch_shapes, key=key)):
        perm = _layout(j, torch_shapes[t], jax_shapes[j])
        if perm is None:
            same_sizes = sorted(map(math.prod, torch_shapes.values())) == sorted(map(math.prod, jax_shapes.values()))
            raise SpecError(f"parameters cannot be matched: by name they differ, and in name order PyTorch's {t} "
                            f"{tuple(torch_shapes[t])} meets JAX's {j} {tuple(jax_shapes[j])}, " + (
                                _unlike(torch_shapes[t], jax_shapes[j]) if not same_sizes
                                else "while both sides hold parameters of the same sizes: pair them with transfer= "
                                "(a function from PyTorch's parameters to JAX's, flat dicts by dotted name)"))
        plan[j] = (t, perm)
    return plan


def _unlike(torch_shape: tuple, jax_shape: tuple) -> str:
    """Why two parameters do not pair, and what to do: different sizes are different models;
    the same size in another arrangement is what transfer= is for."""
    a, b = math.prod(torch_shape), math.prod(jax_shape)
    if a != b:
        return (f"they differ in size ({a} elements against {b}): the twins do not describe the same model; "
                f"make the two layers the same")
    return ("no layout in common (the same number of elements, arranged otherwise); give transfer= (a function "
            "from PyTorch's parameters to JAX's, flat dicts by dotted name)")


def _listing(shapes: Mapping[str, tuple]) -> str:
    items = [f"{k} {tuple(v)}" for k, v in shapes.items()]
    return ", ".join(items[:6]) + (f", ... {len(items) - 6} more" if len(items) > 6 else "")


@dataclass
class Transfer:
    """Canonical (PyTorch-named, PyTorch-layout) parameters to the JAX side's and back."""

    plan: dict[str, tuple[str, tuple]]
    identity: bool = False
    hook: Callable | None = None
    jax_shapes: Mapping[str, tuple] | None = None
    origin: str = ""

    def to_jax(self, canonical: Mapping[str, Any], xp) -> dict[str, Any]:
        if self.identity:
            return dict(canonical)
        if self.hook is not None:
            out = self.hook[0]({k: np.asarray(v) for k, v in canonical.items()})
            missing = sorted(set(self.jax_shapes or ()) - set(out or ()))
            wrong = [k for k in (self.jax_shapes or ()) if k in out and tuple(np.shape(out[k])) != self.jax_shapes[k]]
            if missing or wrong:
                raise SpecError(f"{self.origin}: transfer() must return every JAX parameter in its shape; missing "
                                f"{missing[:5]}, wrong shape {wrong[:5]}")
            return {k: xp.asarray(out[k]) for k in self.jax_shapes}
        return {j: xp.transpose(xp.asarray(canonical[t]), perm) for j, (t, perm) in self.plan.items()}

    def to_canonical(self, jax_params: Mapping[str, Any]) -> dict[str, Any]:
        if self.identity:
            return dict(jax_params)
        if self.hook is not None:
            return dict(self.hook[1]({k: np.asarray(v, dtype=np.float64) for k, v in jax_params.items()}))
        return {t: np.transpose(np.asarray(jax_params[j]), np.argsort(perm)) for j, (t, perm) in self.plan.items()}


# ---- PyTorch side ---------------------------------------------------------------------------

def _call_hint(wl: UserWorkload, batch: Mapping[str, Any], exc: BaseException) -> str:
    """What a forward that was called with the wrong arguments should know: how the model is called."""
    if not isinstance(exc, TypeError) or wl.model.inputs is not None:
        return ""
    names = wl.input_names(batch)
    return (f" (the model is called with every batch array except 'target', in the batch's order: "
            f"model({', '.join(names)}); name the labels 'target', or give inputs=[...] to choose what it gets)")


def _torch_call(wl: UserWorkload, model, batch):
    if wl.model.torch_forward is not None:
        return wl.model.torch_forward(model, batch)
    return model(*[batch[k] for k in wl.input_names(batch)])


def default_loss(out, batch, xp_name: str, precise: bool = False):
    """Squared error against a float target (summed over the last axis, averaged over the
    rest), cross-entropy against integer class ids, or the squared output with no target. In
    float32 as the cells compute it; ``precise``: in float64, for the reference."""
    target = batch.get("target")
    if xp_name == "torch":
        import torch

        out = out.double() if precise else out.float()
        if target is None:
            return (out * out).sum(-1).mean()
        if not torch.is_floating_point(target):
            return torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
        d = out - target.to(out.dtype)
        return (d * d).sum(-1).mean()
    import jax.numpy as jnp
    import optax

    out = out.astype(jnp.float64 if precise else jnp.float32)
    if target is None:
        return jnp.mean(jnp.sum(out * out, axis=-1))
    if jnp.issubdtype(target.dtype, jnp.integer):
        return optax.softmax_cross_entropy_with_integer_labels(out.reshape(-1, out.shape[-1]),
                                                               target.reshape(-1)).mean()
    d = out - target.astype(out.dtype)
    return jnp.mean(jnp.sum(d * d, axis=-1))


def _torch_twin(wl: UserWorkload) -> types.SimpleNamespace:
    import torch

    def build(cfg, params):
        first = next(iter(params.values()))
        module = wl.torch_module(cfg, 0)
        module = module.to(device=first.device, dtype=first.dtype if first.is_floating_point() else None)
        named = dict(module.named_parameters())
        with torch.no_grad():
            for n, p in named.items():
                p.copy_(params[n])
        return module

    def canonical(model):
        # the parameters and every BatchNorm's running statistics: a train step's update of each is compared
        return {**dict(model.named_parameters()), **_bn_statistics(model)}

    def buffers_compared(cfg):
        return list(_bn_names(wl, cfg))

    def forward(model, batch):
        return _torch_call(wl, model, batch)

    def loss(model, batch):
        if wl.model.torch_loss is not None:
            return wl.model.torch_loss(model, batch)
        out = _torch_call(wl, model, batch)
        if wl.model.loss is not None:
            return wl.model.loss(out, batch)
        return default_loss(out, batch, "torch")

    return types.SimpleNamespace(build=build, canonical=canonical, forward=forward, loss=loss,
                                 buffers_compared=buffers_compared, __name__=f"{wl.name} (torch)")


def _bn_statistics(model) -> dict[str, Any]:
    """A PyTorch model's BatchNorm running statistics by name (``bn1.running_mean``, ...): the state
    a train step updates beside the parameters, compared by every train-step cell (issue 88)."""
    import torch

    out = {}
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
            prefix = f"{name}." if name else ""
            out[f"{prefix}running_mean"], out[f"{prefix}running_var"] = m.running_mean, m.running_var
    return out


@functools.lru_cache(maxsize=32)
def _bn_names(wl: "UserWorkload", cfg) -> tuple[str, ...]:
    """The names of the PyTorch side's BatchNorm running statistics (a model built on the meta device)."""
    return tuple(sorted(_bn_statistics(wl.torch_module(cfg, 0, device="meta"))))


@functools.lru_cache(maxsize=32)
def _bn_facts(wl: "UserWorkload", cfg) -> dict[str, tuple[int, float | None]]:
    """Each BatchNorm's ``running_var`` name -> (the elements a channel in a train step's batch,
    PyTorch's momentum), from one forward of the PyTorch side on the meta device (nothing
    computed; on the CPU where the model cannot run on meta). What takes Flax's running variance
    (the batch's biased variance) to PyTorch's (its unbiased one) after one step (``_jax_twin``'s
    ``align``), as the float64 check does."""
    import torch

    if wl.model.torch is None:  # a model written in JAX only: no PyTorch definition to take Flax's to
        return {}
    counts: dict[str, int] = {}
    batch = wl.make_batch(cfg, 0)
    for device in ("meta", "cpu"):
        model = wl.torch_module(cfg, 0, device=device if device == "meta" else None)
        model.train()
        hooks = []
        for name, m in model.named_modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                def hook(mod, args, res, name=name):
                    counts.setdefault(name, args[0].numel() // max(1, args[0].shape[1]))
                hooks.append(m.register_forward_hook(hook))
        tb = {k: torch.from_numpy(v if np.issubdtype(v.dtype, np.integer) else np.asarray(v, dtype=np.float32))
              .to(device) for k, v in batch.items()}
        try:
            with torch.no_grad():
                _torch_call(wl, model, tb)
            break
        except Exception:  # noqa: BLE001 - an operation without a meta kernel: the CPU, once
            counts.clear()
            if device == "cpu":
                raise
        finally:
            for h in hooks:
                h.remove()
    return {(f"{name}." if name else "") + "running_var": (n, m.momentum)
            for name, m in model.named_modules() if (n := counts.get(name))}


def _torch_step(wl: UserWorkload, cfg, phase: str, params: Arrays, batch: Arrays, dtype: str) -> Arrays:
    """The model's PyTorch side, one step on the CPU in ``dtype``: the reference (float64) and
    the reference's own float32 error."""
    import torch

    from stackwars.backends.torch_common import make_optimizer

    npd = {"float64": np.float64, "float32": np.float32}[dtype]
    twin = _torch_twin(wl)
    model = twin.build(cfg, {k: torch.from_numpy(np.array(v, dtype=npd)) for k, v in params.items()})
    tb = {k: torch.from_numpy(v if np.issubdtype(v.dtype, np.integer) else np.asarray(v, dtype=npd))
          for k, v in batch.items()}

    def host(t):
        return t.detach().cpu().double().numpy()

    try:
        if phase == "forward":
            model.eval()
            with torch.no_grad():
                return {"out": host(_one_array(twin.forward(model, tb), "PyTorch", wl))}
        model.train()
        before = {k: v.detach().clone() for k, v in twin.canonical(model).items()}
        opt = make_optimizer(wl.optimizer(cfg), model.parameters())
        loss = twin.loss(model, tb) if dtype == "float32" else _float64_loss(wl, twin, model, tb)
        loss.backward()
        grads = {n: host(p.grad) if p.grad is not None else np.zeros(tuple(p.shape)) for n, p in
                 model.named_parameters()}
        opt.step()
    except SpecError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's forward or loss, named
        raise SpecError(f"{wl.origin}: model {wl.name!r}: its PyTorch {phase} raised {type(exc).__name__}: "
                        f"{exc}{_call_hint(wl, batch, exc)}") from None
    out = {"loss": host(loss)}
    for k, v in twin.canonical(model).items():
        out[f"update.{k}"] = host(v - before[k])
    if dtype == "float64":
        out.update({f"grad.{k}": g for k, g in grads.items()})
        out["grad_floor"] = np.asarray(100 * 1e-8)
    return out


def _float64_loss(wl, twin, model, tb):
    """The loss in float64: the default loss computes in float32 (as the cells do), which the
    reference must not."""
    if wl.model.torch_loss is not None or wl.model.loss is not None:
        return twin.loss(model, tb)
    return default_loss(twin.forward(model, tb), tb, "torch", precise=True)


# ---- JAX side -------------------------------------------------------------------------------

def _jax_twin(wl: UserWorkload, dropout: bool = True, widen: bool = False) -> types.SimpleNamespace:
    """The pure-function twin interface of the JAX backends. ``build`` gives (static, (params,
    rest)): the parameters in the JAX side's own layout, and the rest of an NNX module's state
    (BatchNorm's statistics); both are arguments of every step, never constants baked into
    it. ``forward`` merges an NNX module from them in eval mode (or calls ``apply``), which is
    how NNX runs under ``jax.jit``; the train step (``loss_and_state``) merges it in train
    mode, differentiates with respect to the parameters and returns the updated rest, at the
    trace level NNX requires; ``canonical`` takes the parameters back to PyTorch's names and
    layouts for the parity check. ``dropout`` False: dropout off in training mode too (the twin
    check's one function). ``widen``: every module computes in its parameters' dtype (float64 under
    x64), where a Flax module fixes its own (``nnx.Embed``'s ``attend`` computes in float32 unless
    told otherwise): the float64 reference and the twin check run the function, not its float32
    rounding."""
    import jax
    import jax.numpy as jnp

    def build(cfg, params):
        kind, graph, tree, rest = wl.jax_skeleton(cfg, 0)
        plan = wl.transfer_plan(cfg)
        first = next(iter(params.values()))
        values = {k: jnp.asarray(v, dtype=first.dtype) for k, v in plan.to_jax(params, jnp).items()}
        device = next(iter(first.devices())) if hasattr(first, "devices") else None
        if device is not None:
            values = {k: jax.device_put(v, device) for k, v in values.items()}
            rest = jax.device_put(rest, device) if rest is not None else None
        return (kind, graph, plan, cfg), (unflat(tree, values), rest)

    def model_of(static, params, rest, training):
        from flax import nnx

        model = nnx.merge(static[1], params, rest)
        # as PyTorch's side runs: eval() for the forward phase (BatchNorm's running statistics,
        # no dropout), train() for the train step
        _nnx_mode(model, training, dropout)
        if widen:
            _nnx_widen(model)
        return model

    def run(model_or_apply, batch, custom):
        if custom is not None:
            return custom(model_or_apply, batch)
        return model_or_apply(*[batch[k] for k in wl.input_names(batch)])

    def call(static, params, rest, batch, training):
        """(output, the model after the call or None)."""
        if static[0] == "pure":
            apply = static[1]
            return run(lambda *xs: apply(params, *xs), batch, wl.model.jax_forward), None
        model = model_of(static, params, rest, training)
        return run(model, batch, wl.model.jax_forward), model

    def forward(static, tree, batch):
        return call(static, tree[0], tree[1], batch, False)[0]

    def loss_and_state(static, params, rest, batch, precise=False):
        if wl.model.jax_loss is not None:
            if static[0] == "pure":
                apply = static[1]
                return wl.model.jax_loss(lambda *xs: apply(params, *xs), batch), rest
            model = model_of(static, params, rest, True)
            value = wl.model.jax_loss(model, batch)
        else:
            out, model = call(static, params, rest, batch, True)
            value = (wl.model.loss(out, batch) if wl.model.loss is not None
                     else default_loss(out, batch, "jax", precise=precise))
        if model is None:
            return value, rest
        from flax import nnx

        return value, nnx.split(model, nnx.Param, ...)[2]

    def loss(static, tree, batch):
        return loss_and_state(static, tree[0], tree[1], batch)[0]

    def partition(static, tree):
        return tree

    def combine(static, params, rest):
        return params, rest

    def canonical(static, tree):
        # the parameters in PyTorch's names and layouts and, where the PyTorch side has BatchNorms, their
        # running statistics under PyTorch's names (Flax's mean and var), as the PyTorch side's canonical
        out = static[2].to_canonical(flat(tree[0]))
        if wl.model.torch is not None and len(tree) > 1 and tree[1] is not None:
            names, stats = _buffer_names(wl, static[3]), _bn_names(wl, static[3])
            out.update({names_t: v for k, v in flat(tree[1]).items()
                        if (names_t := names.get(k)) is not None and names_t in stats})
        return out

    def align(static, after, initial):
        """``after`` a train step, each running variance taken from Flax's definition (the batch's
        biased variance) to PyTorch's (its unbiased one), from where it started: the quantity the
        PyTorch reference holds."""
        out = dict(after)
        for k, (n, momentum) in _bn_facts(wl, static[3]).items():
            if k in out and n > 1 and momentum is not None:
                kept = (1 - momentum) * np.asarray(initial[k], dtype=np.float64)
                out[k] = (kept + (np.asarray(out[k], dtype=np.float64) - kept) * n / (n - 1)).astype(np.float32)
        return out

    def buffers_compared(cfg):
        return _torch_twin(wl).buffers_compared(cfg) if wl.model.torch is not None else []

    return types.SimpleNamespace(build=build, canonical=canonical, forward=forward, loss=loss,
                                 loss_and_state=loss_and_state, partition=partition, combine=combine,
                                 call=call, align=align, buffers_compared=buffers_compared,
                                 __name__=f"{wl.name} (jax)")


def _jax_forward_numpy(wl: UserWorkload, cfg, params: Arrays, batch: Arrays) -> np.ndarray:
    import jax.numpy as jnp

    twin = _jax_twin(wl)
    static, tree = twin.build(cfg, {k: jnp.asarray(v, dtype=jnp.float32) for k, v in params.items()})
    jb = {k: jnp.asarray(v, dtype=jnp.int32 if np.issubdtype(v.dtype, np.integer) else jnp.float32)
          for k, v in batch.items()}
    try:
        forward = lambda t, b: twin.forward(static, t, b)  # noqa: E731
        return np.asarray(_one_array(_compiled_or_not(forward, tree, jb), "JAX", wl))
    except SpecError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise SpecError(f"{wl.origin}: model {wl.name!r}: its JAX forward raised {type(exc).__name__}: "
                        f"{exc}{_call_hint(wl, batch, exc)}") from None


def _one_array(out: Any, side: str, wl: UserWorkload) -> Any:
    """A forward's output, which must be one array: it is what parity compares and the
    default loss reduces. A tuple, list, dict or None is named as what it is, not as an
    error the forward never raised."""
    if hasattr(out, "shape") and hasattr(out, "dtype"):
        return out
    what = "None" if out is None else f"a {type(out).__name__}"
    raise SpecError(f"{wl.origin}: model {wl.name!r}: its {side} forward returned {what}; a forward must return one "
                    f"array (the output that parity compares and the loss reduces): return that one, or give "
                    f"{'torch' if side == 'PyTorch' else 'jax'}_forward=(model, batch) that picks it")


def _torch_layers(wl: UserWorkload, cfg, params: Arrays, batch: Arrays, dtype: str = "float64",
                  training: bool = False) -> list[tuple[str, np.ndarray]]:
    """(module name, its first output) of every PyTorch submodule, in the order they
    finished (a layer before the block that holds it), in ``dtype``, in eval mode or in
    training mode with dropout off (``training``)."""
    import torch

    npd = {"float64": np.float64, "float32": np.float32}[dtype]
    twin = _torch_twin(wl)
    model = twin.build(cfg, {k: torch.from_numpy(np.array(v, dtype=npd)) for k, v in params.items()})
    _torch_mode(model, training)
    tb = {k: torch.from_numpy(v if np.issubdtype(v.dtype, np.integer) else np.asarray(v, dtype=npd))
          for k, v in batch.items()}
    seen: dict[str, np.ndarray] = {}

    def hook(name):
        def record(module, args, out):
            if isinstance(out, torch.Tensor) and name not in seen:
                seen[name] = out.detach().double().numpy()
        return record

    handles = [m.register_forward_hook(hook(n)) for n, m in model.named_modules() if n]
    try:
        with torch.no_grad():
            twin.forward(model, tb)
    finally:
        for h in handles:
            h.remove()
    return list(seen.items())


def _jax_layers(wl: UserWorkload, cfg, params: Arrays, batch: Arrays, dtype: str = "float32",
                training: bool = False) -> list[tuple[str, np.ndarray]]:
    """(module path, its first output) of every NNX submodule of the JAX twin, in the order
    they finished, in ``dtype`` (float32 as the cells run; float64 under x64), in eval mode or
    in training mode with dropout off. Each submodule's class has its ``__call__`` wrapped for
    this one forward and restored after it; a pure-function twin has no layers."""
    import jax

    with _float64_check() if dtype == "float64" else jax.enable_x64(False):
        return _jax_layers_in(wl, cfg, params, batch, dtype, training)


def _jax_layers_in(wl: UserWorkload, cfg, params: Arrays, batch: Arrays, dtype: str,
                   training: bool) -> list[tuple[str, np.ndarray]]:
    import jax.numpy as jnp
    from flax import nnx

    fdt = jnp.float64 if dtype == "float64" else jnp.float32
    twin = _jax_twin(wl)
    static, (tree, rest) = twin.build(cfg, {k: jnp.asarray(v, dtype=fdt) for k, v in params.items()})
    if static[0] != "nnx":
        return []
    model = nnx.merge(static[1], tree, _cast_rest(rest, fdt))
    _nnx_mode(model, training)
    if dtype == "float64":
        _nnx_widen(model)
    names = {id(m): ".".join(str(p) for p in path) for path, m in nnx.iter_modules(model) if path}
    seen: dict[str, np.ndarray] = {}
    missing = object()
    saved = {}
    for cls in {type(m) for path, m in nnx.iter_modules(model) if path}:
        saved[cls] = cls.__dict__.get("__call__", missing)
        inner = cls.__call__

        def wrapped(self, *args, _inner=inner, **kwargs):
            out = _inner(self, *args, **kwargs)
            name = names.get(id(self))
            if name is not None and name not in seen and hasattr(out, "shape"):
                seen[name] = np.asarray(out, dtype=np.float64)
            return out

        cls.__call__ = wrapped
    try:
        jb = {k: jnp.asarray(v, dtype=jnp.int32 if np.issubdtype(v.dtype, np.integer) else fdt)
              for k, v in batch.items()}
        if wl.model.jax_forward is not None:
            wl.model.jax_forward(model, jb)
        else:
            model(*[jb[k] for k in wl.input_names(jb)])
    finally:
        for cls, old in saved.items():
            if old is missing:
                del cls.__call__
            else:
                cls.__call__ = old
    return list(seen.items())


def _layer_pairs(wl: UserWorkload, cfg) -> dict[str, str]:
    """PyTorch module name -> JAX module path, from the parameters' pairing (a parameter's
    module is its name less the last part); where the user's transfer= pairs them, by name."""
    plan = wl.transfer_plan(cfg)
    if plan.plan:
        return {t.rpartition(".")[0]: j.rpartition(".")[0] for j, (t, _) in plan.plan.items()}
    return {}


def _compared(t: np.ndarray, j: np.ndarray) -> tuple[float | None, str]:
    """max|j - t| / max|t| where the layouts can be lined up (as they are, or PyTorch's
    channels-first moved last as Flax's are: the closer of the two where both shapes fit, as
    they do for a batch of 8 images of 8 channels of 8 x 8), else None and both shapes."""
    found = []
    for a in (t, np.moveaxis(t, 1, -1) if t.ndim >= 3 else None):
        if a is not None and a.shape == j.shape:
            scale = float(np.max(np.abs(a))) if a.size else 0.0
            diff = float(np.max(np.abs(j - a))) if a.size else 0.0
            if not math.isfinite(diff):
                found.append(math.inf)
            else:
                found.append(diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf))
    if found:
        return min(found), ""
    return None, f"shape {tuple(t.shape)} in PyTorch, {tuple(j.shape)} in JAX"


def _first_difference(wl: UserWorkload, cfg, params: Arrays, batch: Arrays, tol: float,
                      training: bool = False) -> str:
    """A sentence naming the first layer (in the order PyTorch's finished) whose output differs
    between the twins beyond ``tol``, both in float64 (in eval mode, or in training mode with
    dropout off), and the last before it that agrees; empty where the layers cannot be paired
    (a pure-function JAX twin, no parameters in common by name) or every paired layer agrees
    (the difference lies after the last of them)."""
    try:
        pairs = _layer_pairs(wl, cfg)
        jax_out = dict(_jax_layers(wl, cfg, params, batch, "float64", training))
        torch_out = _torch_layers(wl, cfg, params, batch, "float64", training)
    except Exception:  # noqa: BLE001 - the location is a courtesy; the difference is already established
        return ""
    by_name = {_normal(k): k for k in jax_out}
    for name, _ in torch_out:  # modules with no parameters (an activation) where both name them alike
        pairs.setdefault(name, by_name.get(_normal(name), ""))
    last = None
    for name, t in torch_out:
        j = jax_out.get(pairs.get(name, ""))
        if j is None:
            continue
        err, shapes = _compared(t, j)
        label = name if pairs[name] == name else f"{name} (JAX's {pairs[name]})"
        if err is None or err > tol:
            told = shapes if err is None else f"{err:.3g}"
            if last:
                return (f"The first layer whose output differs is {label} ({told}); the last that agrees is {last}: "
                        f"look between them, or in {name} itself. ")
            return f"The first layer whose output differs is {label} ({told}), the first that can be paired. "
        last = label
    if last:
        return f"Every layer that can be paired agrees, up to {last}: the difference lies after it. "
    return ""


# ---- the twin check in float64 (UserWorkload.check_twins) ----------------------------------------

# one function run twice in float64 agrees to about 1e-13 relative (the order of its sums, a few
# hundred roundings of 1.1e-16 each); the smallest real difference the check must see is a
# LayerNorm's epsilon of 1e-5 against 1e-6, which moves its output by about half the difference
# over the variance (4.5e-6 at a variance of 1, 4.5e-8 at 100): 1e-8 is five orders above the
# first and below the second
TWIN_TOLERANCE = 1e-8
CHECKED = {"eval": "the forward in eval mode", "train": "the forward in training mode (batch statistics, dropout off)",
           "loss": "the train step's loss", "grad": "the gradient", "update": "the train step's update",
           "start": "the starting value", "buffer": "after the train step, the value"}


def _relative(a: np.ndarray, b: np.ndarray, floor: float = 0.0) -> float | None:
    """max|a - b| / max(max|b|, floor) (max|a - b| where both are zero); inf where the shapes
    differ. ``floor``: a gradient that is zero in exact arithmetic (a convolution's bias before a
    BatchNorm, which takes the mean out) is rounding noise of 1e-17 on both sides, and relative to
    itself it would differ by 1; against a millionth of the largest gradient it does not."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return math.inf
    if not a.size:
        return None
    diff = float(np.max(np.abs(a - b)))
    if not math.isfinite(diff):
        return math.inf if np.isfinite(a).all() or np.isfinite(b).all() or not np.array_equal(
            np.isnan(a), np.isnan(b)) else None
    scale = max(float(np.max(np.abs(b))), floor)
    return diff / scale if scale > 0 else diff


def _hint(key: str, name: str | None) -> str:
    """Where to look, from what differs first."""
    part = key.split(".")[0]
    return {
        "eval": "Look for an activation (jax.nn.gelu approximates with tanh unless approximate=False; PyTorch's "
                "GELU is the exact one), a normalisation (missing on one side, another epsilon), a scale (attention's "
                "1/sqrt(d)), a padding, a reshape where a transpose belongs (PyTorch's NCHW against Flax's NHWC), or a "
                "missing or extra operation; ",
        "train": "The forward in eval mode agrees and the one in training mode does not: a normalisation's batch "
                 "statistics (a BatchNorm on one side only, or used otherwise); ",
        "loss": "The forwards agree and the losses do not: the two loss functions differ; ",
        "grad": "The forward and the loss agree and the gradients do not: a detach or stop_gradient on one side, or a "
                "custom gradient; ",
        "update": "The gradients agree and the updates do not: the two optimizer steps differ; ",
        "start": f"The two sides start {name} at different values; ",
        "buffer": "The running statistics differ after one step: a BatchNorm's momentum (PyTorch's momentum m is "
                  "Flax's 1 - m: PyTorch's default 0.1 is Flax's 0.9); ",
    }.get(part, "")


def _torch_mode(model, training: bool) -> None:
    """eval(), or train() with every dropout module left in eval mode (the check's one function)."""
    import torch

    model.train(training)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd):
            m.eval()


def _nnx_mode(model, training: bool, dropout: bool = False) -> None:
    """NNX's eval() or train() (BatchNorm's running or batch statistics), dropout off unless asked."""
    from flax import nnx

    mode = getattr(model, "train" if training else "eval", None)
    if callable(mode):
        mode()
    if training and not dropout:
        for _, m in nnx.iter_modules(model):
            if isinstance(m, nnx.Dropout):
                m.deterministic = True


def _nnx_widen(model) -> None:
    """Every NNX module's computation dtype set to float64 where it fixes a narrower float one."""
    import jax.numpy as jnp
    from flax import nnx

    for _, m in nnx.iter_modules(model):
        dt = getattr(m, "dtype", None)
        if dt is not None and jnp.issubdtype(dt, jnp.floating) and jnp.dtype(dt) != jnp.float64:
            m.dtype = jnp.float64


def _cast_rest(rest, dtype):
    """An NNX module's state beyond its parameters (BatchNorm's statistics) in ``dtype`` (floats only)."""
    import jax
    import jax.numpy as jnp

    if rest is None:
        return None
    return jax.tree_util.tree_map(lambda x: x.astype(dtype) if jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating)
                                  else x, rest)


@functools.lru_cache(maxsize=32)
def _buffer_names(wl: UserWorkload, cfg) -> dict[str, str]:
    """JAX state name -> PyTorch buffer name: a module's buffers by the parameters' pairing of
    modules, PyTorch's running_mean and running_var Flax's mean and var."""
    pairs = _layer_pairs(wl, cfg)
    out = {}
    for t_name in _torch_buffers(wl.torch_module(cfg, 0, device="meta")):
        module, _, attr = t_name.rpartition(".")
        j_module = pairs.get(module, module)
        out[f"{j_module}.{ {'running_mean': 'mean', 'running_var': 'var'}.get(attr, attr)}".lstrip(".")] = t_name
    return out


def _torch_buffers(model) -> dict[str, Any]:
    """A module's floating-point buffers by name (a BatchNorm's running statistics; not its counter)."""
    return {n: b for n, b in model.named_buffers() if b.is_floating_point()}


def _torch_check(wl: UserWorkload, cfg, params: Arrays, batch: Arrays
                 ) -> tuple[dict[str, np.ndarray], dict[str, frozenset]]:
    """The PyTorch twin in float64: eval forward, training-mode forward and one train step
    (loss, gradients, updates, buffers before and after), each from a fresh model; and, by
    key, the operations that computed below float64 in that part (``precision.TorchNarrow``)."""
    import torch

    from stackwars.precision import TorchNarrow

    from stackwars.backends.torch_common import make_optimizer

    twin = _torch_twin(wl)
    p64 = {k: torch.from_numpy(np.asarray(v, dtype=np.float64)) for k, v in params.items()}
    tb = {k: torch.from_numpy(v if np.issubdtype(v.dtype, np.integer) else np.asarray(v, dtype=np.float64))
          for k, v in batch.items()}

    def host(t):  # a copy: a float64 tensor's numpy() shares its memory, which the step then updates
        return t.detach().cpu().double().numpy().copy()

    out: dict[str, np.ndarray] = {}
    narrow: dict[str, frozenset] = {}
    step = TorchNarrow()
    try:
        for key, training in (("eval", False), ("train", True)):
            model = twin.build(cfg, p64)
            _torch_mode(model, training)
            with torch.no_grad(), TorchNarrow() as seen:
                out[key] = host(_one_array(twin.forward(model, tb), "PyTorch", wl))
            narrow[key] = frozenset(seen.found)
        model = twin.build(cfg, p64)
        _torch_mode(model, True)
        out.update({f"start.{n}": host(b) for n, b in _torch_buffers(model).items()})
        before = {k: v.detach().clone() for k, v in model.named_parameters()}
        opt = make_optimizer(wl.optimizer(cfg), model.parameters())
        counts: dict[str, int] = {}  # each BatchNorm's elements a channel in the step's batch

        def count(name):
            def hook(mod, args, res):  # returns None: the output stays the module's
                counts.setdefault(name, args[0].numel() // max(1, args[0].shape[1]))
            return hook

        hooks = [m.register_forward_hook(count(name)) for name, m in model.named_modules()
                 if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
        with step:
            loss = _float64_loss(wl, twin, model, tb)
            for h in hooks:
                h.remove()
            loss.backward()
        out["loss"] = host(loss)
        out.update({f"grad.{n}": host(p.grad) if p.grad is not None else np.zeros(tuple(p.shape))
                    for n, p in model.named_parameters()})
        with step:
            opt.step()
    except SpecError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's forward or loss, named
        raise SpecError(f"{wl.origin}: model {wl.name!r}: its PyTorch side in float64 raised {type(exc).__name__}: "
                        f"{exc}{_call_hint(wl, batch, exc)}") from None
    out.update({f"update.{n}": host(p - before[n]) for n, p in model.named_parameters()})
    out.update({f"buffer.{n}": host(b) for n, b in _torch_buffers(model).items()})
    # PyTorch's running variance takes the batch's unbiased variance (n / (n - 1)), Flax's the biased
    # one: PyTorch's step is taken to Flax's definition before the two are compared (7e-5 apart at n = 512)
    for name, m in model.named_modules():
        n = counts.get(name)
        key = f"buffer.{name}.running_var" if name else "buffer.running_var"
        if n and n > 1 and key in out and m.momentum is not None:
            kept = (1 - m.momentum) * out[key.replace("buffer.", "start.", 1)]
            out[key] = kept + (out[key] - kept) * (n - 1) / n
    narrow.update({k: frozenset(step.found) for k in out if k.split(".")[0] in ("loss", "grad", "update", "buffer")})
    return out, narrow


def _jax_check(wl: UserWorkload, cfg, params: Arrays, batch: Arrays
               ) -> tuple[dict[str, np.ndarray], dict[str, frozenset]]:
    """The JAX twin in float64 (x64), as ``_torch_check``, in PyTorch's names and layouts; and,
    by key, the operations that computed below float64 and reach it (``precision.jax_narrow``)."""
    with _float64_check():
        try:
            return _jax_check_in(wl, cfg, params, batch)
        except SpecError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's forward or loss, named
            raise SpecError(f"{wl.origin}: model {wl.name!r}: its JAX side in float64 (x64) raised "
                            f"{type(exc).__name__}: {exc}{_call_hint(wl, batch, exc)}") from None


@contextlib.contextmanager
def _float64_check():
    """The JAX side of the twins' float64 check: x64 on, and XLA with most of its optimisations
    off (``jax_disable_most_optimizations``: backend optimisation level 0, LLVM's expensive
    passes off), restored after. The check asks what the twins compute, not how fast: one
    function run twice in float64 agrees to about 1e-13 however it is compiled, far under
    TWIN_TOLERANCE, and the cells run the optimised programs, whose parity is judged against
    the float64 reference. The check of the tutorial's CNN and LM took 4.4 s instead of 5.8 in a
    warm process on the idle 2-CPU VM (two runs each); tests/test_external.py and the built-in
    twins' float64 test compile so for the same reason."""
    import jax

    before = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", True)
    try:
        with jax.enable_x64(True):
            yield
    finally:
        jax.config.update("jax_disable_most_optimizations", before)


def _jax_check_in(wl: UserWorkload, cfg, params: Arrays, batch: Arrays
                  ) -> tuple[dict[str, np.ndarray], dict[str, frozenset]]:
    import jax
    import jax.numpy as jnp
    import optax

    from stackwars.backends.jax_common import make_optimizer
    from stackwars.precision import jax_narrow

    twin = _jax_twin(wl, dropout=False, widen=True)
    p64 = {k: jnp.asarray(v, dtype=jnp.float64) for k, v in params.items()}

    def fresh():  # each part from a fresh build: a training-mode forward updates an NNX module's statistics
        static, (tree, rest) = twin.build(cfg, p64)
        return static, tree, _cast_rest(rest, jnp.float64)

    jb = {k: jnp.asarray(v, dtype=jnp.int64) if np.issubdtype(v.dtype, np.integer) else jnp.asarray(v)
          for k, v in as_float64(batch).items()}
    host = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
    out: dict[str, np.ndarray] = {}
    narrow: dict[str, frozenset] = {}
    for key, training in (("eval", False), ("train", True)):
        static, tree, rest = fresh()
        forward = lambda t, r, b, static=static, training=training: twin.call(static, t, r, b, training)[0]  # noqa: E731
        out[key] = host(_one_array(_compiled_or_not(forward, tree, rest, jb), "JAX", wl))
        reached = jax_narrow(forward, tree, rest, jb)
        narrow[key] = frozenset().union(*jax.tree_util.tree_leaves(reached)) if reached is not None else frozenset()
    static, tree, rest = fresh()
    names = _buffer_names(wl, cfg) if rest is not None and wl.model.torch is not None else {}
    state = lambda r: {names[k]: host(v) for k, v in flat(r).items() if k in names}  # noqa: E731
    out.update({f"start.{k}": v for k, v in state(rest).items()})
    tx = make_optimizer(wl.optimizer(cfg))

    def step(tree, rest, jb):
        # the rest (BatchNorm's statistics) an argument too: NNX updates it at the level it is traced at
        # allow_int: the rest may hold integers (nnx.Dropout's RNG count), whose gradient is float0, discarded
        (loss, new_rest), (grads, _) = jax.value_and_grad(
            lambda p, r: twin.loss_and_state(static, p, r, jb, precise=True), argnums=(0, 1), has_aux=True,
            allow_int=True)(tree, rest)
        updates, _ = tx.update(grads, tx.init(tree), tree)
        return loss, new_rest, grads, optax.apply_updates(tree, updates)

    loss, new_rest, grads, new = _compiled_or_not(step, tree, rest, jb)
    plan = static[2]
    canon = lambda t: {k: host(v) for k, v in plan.to_canonical(flat(t)).items()}  # noqa: E731
    before, after = canon(tree), canon(new)
    out["loss"] = host(loss)
    out.update({f"grad.{k}": v for k, v in canon(grads).items()})
    out.update({f"update.{k}": after[k] - before[k] for k in before})
    out.update({f"buffer.{k}": v for k, v in state(new_rest).items()})
    reached = jax_narrow(step, tree, rest, jb)
    if reached is not None:
        r_loss, r_rest, r_grads, r_new = reached
        narrow["loss"] = r_loss

        def canon_sets(t):  # each canonical (PyTorch) name's operations; a transfer hook mixes them all
            d = flat(t)
            if plan.identity:
                return d
            if plan.hook is not None:
                every = frozenset().union(*d.values())
                return {k: every for k in before}
            return {t_name: d[j] for j, (t_name, _) in plan.plan.items()}

        narrow.update({f"grad.{k}": v for k, v in canon_sets(r_grads).items()})
        narrow.update({f"update.{k}": v for k, v in canon_sets(r_new).items()})
        narrow.update({f"buffer.{names[k]}": v for k, v in flat(r_rest).items() if k in names})
    return out, narrow


def _compiled_or_not(fn, *args):
    """``fn(*args)`` under ``jax.jit``: one XLA program, not one a primitive (op by op the
    check compiled about 150 of them, 5 of its 7 s on the 2-core Xeon VM). Where the user's code cannot
    be traced (Python control flow on a value, an output that is not arrays), op by op, as jax-eager
    runs it, so the check's word is the one it would have said."""
    import jax

    try:
        return jax.jit(fn)(*args)
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
            jax.errors.TracerIntegerConversionError, jax.errors.TracerBoolConversionError, TypeError):
        return fn(*args)


def check_settings(wl: UserWorkload, cfg) -> None:
    """The settings a normalisation's numbers depend on, read from both twins' modules paired by
    their parameters: a BatchNorm's momentum (PyTorch's m updates running = (1 - m) running + m
    batch; Flax's momentum is 1 - m) and the epsilon of a BatchNorm, LayerNorm or GroupNorm. A
    setting that differs is a different model, named with both values; float64's numbers would
    show it too, this says which setting."""
    import torch

    if isinstance(wl.model.jax, tuple):
        return
    from flax import nnx

    pairs = _layer_pairs(wl, cfg)
    if not pairs:
        return
    t_model = wl.torch_module(cfg, 0, device="meta")
    j_model = nnx.eval_shape(lambda: wl._call("the jax factory", wl.model.jax, cfg, nnx.Rngs(0)))
    j_modules = {".".join(str(p) for p in path): m for path, m in nnx.iter_modules(j_model) if path}
    found = []
    for name, m in t_model.named_modules():
        j = j_modules.get(pairs.get(name, ""))
        if j is None:
            continue
        kind = type(m).__name__
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.momentum is not None \
                and hasattr(j, "momentum") and abs((1.0 - float(j.momentum)) - float(m.momentum)) > 1e-12:
            found.append(f"{name}: {kind} momentum {m.momentum:g} in PyTorch (running = {1 - m.momentum:g} running + "
                         f"{m.momentum:g} batch) against Flax's {float(j.momentum):g} (running = {float(j.momentum):g} "
                         f"running + {1 - float(j.momentum):g} batch); Flax's equivalent is momentum="
                         f"{1 - m.momentum:g}")
        eps = getattr(m, "eps", None)
        j_eps = getattr(j, "epsilon", None)
        if isinstance(m, (torch.nn.modules.batchnorm._BatchNorm, torch.nn.LayerNorm, torch.nn.GroupNorm)) \
                and eps is not None and j_eps is not None and abs(float(eps) - float(j_eps)) > 1e-15:
            found.append(f"{name}: {kind} epsilon {float(eps):g} in PyTorch against {float(j_eps):g} in Flax")
    if found:
        raise SpecError(f"{wl.origin}: model {wl.name!r}: the twins compute different functions: "
                        + "; ".join(found) + "; make them the same; nothing was run")


def _jax_step_x64(wl: UserWorkload, cfg, phase: str, params: Arrays, batch: Arrays) -> Arrays:
    """A JAX-only model's reference: its own step in float64."""
    import jax
    import jax.numpy as jnp
    import optax

    from stackwars.backends.jax_common import make_optimizer

    with jax.enable_x64(True):
        twin = _jax_twin(wl, widen=True)
        static, tree = twin.build(cfg, {k: jnp.asarray(v, dtype=jnp.float64) for k, v in params.items()})
        jb = {k: jnp.asarray(v) for k, v in as_float64(batch).items()}
        if phase == "forward":
            return {"out": np.asarray(twin.forward(static, tree, jb), dtype=np.float64)}

        params, rest = tree

        def loss64(p, r):  # the rest (BatchNorm's statistics) an argument too: NNX updates it at this level
            if wl.model.jax_loss is None and wl.model.loss is None:
                return default_loss(twin.call(static, p, r, jb, True)[0], jb, "jax", precise=True)
            return twin.loss_and_state(static, p, r, jb)[0]

        loss, (grads, _) = jax.value_and_grad(loss64, argnums=(0, 1), allow_int=True)(params, rest)
        tx = make_optimizer(wl.optimizer(cfg))
        updates, _ = tx.update(grads, tx.init(params), params)
        new = optax.apply_updates(params, updates)
        before, after = flat(params), flat(new)
        out = {"loss": np.asarray(loss, dtype=np.float64)}
        out.update({f"update.{k}": np.asarray(after[k], dtype=np.float64) - np.asarray(before[k], dtype=np.float64)
                    for k in before})
        out.update({f"grad.{k}": np.asarray(v, dtype=np.float64) for k, v in flat(grads).items()})
        out["grad_floor"] = np.asarray(100 * 1e-8)
        return out


# ---- FLOPs --------------------------------------------------------------------------------

@functools.lru_cache(maxsize=64)
def _counted_flops(wl: UserWorkload, cfg, phase: str) -> int:
    if wl.model.torch is not None:
        return _torch_flops(wl, cfg, phase)
    return _xla_flops(wl, cfg, phase)


def _torch_flops(wl: UserWorkload, cfg, phase: str) -> int:
    """PyTorch's flop counter over one step (forward; train-step: forward and backward), on
    the meta device where the model allows it (nothing computed), else on the CPU."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    params, batch = wl.init(cfg, 0)
    twin = _torch_twin(wl)
    for device in ("meta", "cpu"):
        try:
            model = twin.build(cfg, {k: torch.from_numpy(np.asarray(v, dtype=np.float32)).to(device)
                                     for k, v in params.items()})
            tb = {k: torch.from_numpy(v if np.issubdtype(v.dtype, np.integer) else np.asarray(v, dtype=np.float32))
                  .to(device) for k, v in batch.items()}
            counter = FlopCounterMode(display=False)
            with counter:
                if phase == "forward":
                    with torch.no_grad():
                        twin.forward(model, tb)
                else:
                    twin.loss(model, tb).backward()
            return int(counter.get_total_flops())
        except Exception:  # noqa: BLE001 - an op without a meta kernel: count on the CPU
            if device == "cpu":
                return 0
    return 0


def _xla_flops(wl: UserWorkload, cfg, phase: str) -> int:
    import jax
    import jax.numpy as jnp

    params, batch = wl.init(cfg, 0)
    twin = _jax_twin(wl)
    static, tree = twin.build(cfg, {k: jnp.asarray(v, dtype=jnp.float32) for k, v in params.items()})
    jb = {k: jnp.asarray(v, dtype=jnp.int32 if np.issubdtype(v.dtype, np.integer) else jnp.float32)
          for k, v in batch.items()}
    fn = (lambda p, b: twin.forward(static, p, b)) if phase == "forward" else \
        jax.grad(lambda p, b: twin.loss(static, p, b))
    try:
        cost = jax.jit(fn).lower(tree, jb).compile().cost_analysis()
        cost = cost[0] if isinstance(cost, (list, tuple)) else cost
        return int(cost.get("flops", 0))
    except Exception:  # noqa: BLE001 - no cost analysis on this backend
        return 0


def verify_task(workload: str, sizes: Sequence[tuple[str, Mapping[str, Any]]] = ()) -> dict[str, Any]:
    """Worker target: ``UserWorkload.verify`` at the model's first preset, and the shapes the
    command-line process needs at every size a run plans (``sizes``: (preset, overrides)), in a
    worker, so that the parent runs none of the user's code and imports no framework (a factory
    that starts a thread, changes directory or never returns does it here, under the check's
    limit). A SpecError comes back as the message to show."""
    from stackwars import registry

    wl = registry.workload(workload)
    started = time.perf_counter()
    try:
        notes = wl.verify(next(iter(wl.presets.values())))
        facts = []
        for preset, overrides in sizes:
            params, batch = wl.shapes(wl.config(preset, dict(overrides)))
            facts.append({"preset": preset, "overrides": dict(overrides), "parameters": params, "batch": batch})
    except SpecError as exc:
        return {"status": "ok", "problem": str(exc)}
    return {"status": "ok", "problem": None, "facts": facts, "notes": notes, "check_s": time.perf_counter() - started}


def describe_task(workload: str, preset: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Worker target: ``stackwars describe`` of a user's model, both sides, computed here."""
    from stackwars import registry

    wl = registry.workload(workload)
    try:
        return {"status": "ok", "problem": None, "describe": wl.describe(wl.config(preset, dict(overrides)))}
    except SpecError as exc:
        return {"status": "ok", "problem": str(exc)}
    except Exception as exc:  # noqa: BLE001 - the user's factory, forward on meta tensors, FLOP counting
        return {"status": "ok", "problem": f"{wl.origin}: model {wl.name!r}: describing it raised "
                                           f"{type(exc).__name__}: {exc}"}
