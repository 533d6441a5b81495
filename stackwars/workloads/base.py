"""What every workload provides, and the shared machinery for presets and overrides.

A workload is one computation with identical semantics in both frameworks:

* a frozen ``Config`` dataclass; presets are instances in a table (sizes are data);
* ``init(cfg, seed)``: parameters and batch as float64 numpy arrays, drawn once;
* ``reference(cfg, phase, params, batch)``: float64 numpy outputs of the phase;
* ``flops`` / ``bytes_moved``: analytical counts for achieved rates and rooflines;
* twins, one module per framework, imported lazily (``twin("torch")``), exposing
  ``build(cfg, params) -> model``, ``canonical(model) -> {name: array}``,
  ``forward(model, batch)`` and ``loss(model, batch)``.

Canonical parameters are a flat ``{name: array}`` dict in one layout (``x @ W`` with
``W`` of shape [in, out]); twins convert to their idiomatic layout and back.
"""

from __future__ import annotations

import dataclasses
import importlib
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping

import os

import numpy as np

from stackwars.errors import SpecError
from stackwars.records import DTYPES, MATMUL_PRECISIONS, PHASES

Arrays = dict[str, np.ndarray]


def choices(*values: Any, default: Any) -> Any:
    """A config field restricted to ``values``."""
    return dataclasses.field(default=default, metadata={"choices": values})


def bounded(default: Any, low: float | None = None, high: float | None = None, low_open: bool = True,
            why: str = "") -> Any:
    """A numeric config field restricted by its meaning: above ``low`` (``low_open``: strictly,
    as an epsilon or a scale must be), at most ``high`` (a probability, a momentum)."""
    return dataclasses.field(default=default, metadata={"low": low, "high": high, "low_open": low_open, "why": why})


@dataclass(frozen=True)
class Config:
    """Base of workload configs. Int fields are sizes and must be positive."""

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def validate(self) -> None:
        """Raise SpecError on an impossible configuration, from each field's meaning: a choice
        among its values; an int (or an optional int that is set) is a size and must be
        positive, unless its field says otherwise (``bounded``); a float must be finite and
        within its field's bounds. Shared by `run` and `describe`. Subclasses extend it."""
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            allowed = f.metadata.get("choices")
            if allowed is not None and v not in allowed:
                raise SpecError(f"{f.name}={v!r} is not allowed; choose one of {', '.join(map(str, allowed))}")
            if v is None or isinstance(v, bool):
                continue
            numeric = _numeric(hints.get(f.name))
            if numeric is float and not np.isfinite(v):
                raise SpecError(f"{f.name} must be finite, got {v}")
            low, high = f.metadata.get("low"), f.metadata.get("high")
            if numeric is int and low is None and high is None and v <= 0:
                raise SpecError(f"{f.name} must be a positive integer, got {v}")
            why = f" ({f.metadata['why']})" if f.metadata.get("why") else ""
            if low is not None and (v < low or (v == low and f.metadata.get("low_open", True))):
                sign = ">" if f.metadata.get("low_open", True) else ">="
                raise SpecError(f"{f.name} must be {sign} {low:g}, got {v:g}{why}")
            if high is not None and v > high:
                raise SpecError(f"{f.name} must be <= {high:g}, got {v:g}{why}")


def _numeric(hint: Any) -> type | None:
    """int or float for a field typed int, float, or either of them optional (``int | None``)."""
    if hint in (int, float):
        return hint
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if len(args) == 1 and args[0] in (int, float) else None


def _coerce(name: str, raw: Any, typ: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    args = [a for a in typing.get_args(typ) if a is not type(None)]
    if args and len(args) < len(typing.get_args(typ)):  # optional: "none" unsets it
        if raw.lower() == "none":
            return None
        typ = args[0] if len(args) == 1 else typ
    try:
        if typ is bool:
            low = raw.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if typ is int:
            return int(raw)
        if typ is float:
            return float(raw)
    except ValueError:
        raise SpecError(f"{name}={raw!r} is not a valid {typ.__name__}") from None
    return raw


@dataclass(frozen=True)
class OptimizerSpec:
    name: str  # "sgd" | "adamw"
    lr: float
    weight_decay: float = 0.0


class Workload:
    name: ClassVar[str]
    description: ClassVar[str]
    config_cls: ClassVar[type[Config]]
    presets: ClassVar[Mapping[str, Config]]
    phases: ClassVar[tuple[str, ...]] = PHASES
    twin_modules: ClassVar[Mapping[str, str]]  # framework -> module path
    flops_formula: ClassVar[str] = ""
    # config fields that only change array shapes (the same program, traced again): what a
    # recompilation study may vary under one compiled function
    shape_params: ClassVar[tuple[str, ...]] = ()
    # config fields that choose how the same function is computed (a custom kernel or the
    # framework's operator): the tables show them as labelled rows of one table
    variant_params: ClassVar[tuple[str, ...]] = ()
    # framework modules every cell-process of this workload imports whatever its backend (a
    # user's model file imports both frameworks at its top): its fork servers preload them
    # (harness/forkserver.py), so each process does not import them again
    preload: tuple[str, ...] = ()
    # modules this workload's cell-processes on one framework import while they prepare (a
    # model's JAX twin imports flax.nnx: 0.25 s of each process on the idle 2-core VM, beside
    # what the JAX servers preload): that framework's fork servers preload them too (``preload_for``)
    framework_preload: ClassVar[Mapping[str, tuple[str, ...]]] = {}

    def preload_for(self, framework: str) -> tuple[str, ...]:
        """What the fork servers of this workload's ``framework`` cell-processes preload beside
        the backend's own modules (runner.process_request)."""
        return tuple(dict.fromkeys((*self.preload, *self.framework_preload.get(framework, ()))))

    def variant_label(self, overrides: Mapping[str, Any], framework: str | None, device: str = "cpu") -> str | None:
        """A row label for a non-default variant (``variant_params``), or None."""
        return None

    def process_env(self, cfg: Config, device: str) -> dict[str, str]:
        """Environment the worker sets before importing anything (as a backend's)."""
        return {}

    # ---- configuration --------------------------------------------------------------
    def config(self, preset: str, overrides: Mapping[str, Any] | None = None) -> Config:
        if preset not in self.presets:
            raise SpecError(f"unknown preset {preset!r} for workload {self.name!r}; "
                            f"allowed: {', '.join(self.presets)}")
        base = self.presets[preset]
        overrides = dict(overrides or {})
        hints = typing.get_type_hints(self.config_cls)
        fields = {f.name for f in dataclasses.fields(base)}
        unknown = sorted(set(overrides) - fields)
        if unknown:
            raise SpecError(f"unknown parameter(s) {', '.join(unknown)} for workload {self.name!r}; "
                            f"allowed: {', '.join(sorted(fields))}")
        values = {k: _coerce(k, v, hints[k]) for k, v in overrides.items()}
        cfg = dataclasses.replace(base, **values)
        cfg.validate()
        return cfg

    def check_phase(self, phase: str) -> None:
        if phase not in self.phases:
            raise SpecError(f"unknown phase {phase!r} for workload {self.name!r}; allowed: {', '.join(self.phases)}")

    # ---- data and reference -----------------------------------------------------------
    def init(self, cfg: Config, seed: int) -> tuple[Arrays, Arrays]:
        raise NotImplementedError

    def reference(self, cfg: Config, phase: str, params: Arrays, batch: Arrays) -> Arrays:
        raise NotImplementedError

    def optimizer(self, cfg: Config) -> OptimizerSpec:
        return OptimizerSpec("sgd", lr=0.01)

    def flops(self, cfg: Config, phase: str) -> int:
        raise NotImplementedError

    def bytes_moved(self, cfg: Config, phase: str, itemsize: int, param_itemsize: int) -> int:
        raise NotImplementedError

    def tolerance(self, dtype: str, matmul_precision: str, phase: str) -> float:
        """Max allowed (max|out-ref| / max|ref|). Loose enough for the dtype's rounding,
        tight enough that a wrong mask, scale or transposition fails by orders of magnitude."""
        if dtype not in DTYPES or matmul_precision not in MATMUL_PRECISIONS:
            raise SpecError(f"no tolerance for dtype={dtype} precision={matmul_precision}")
        if dtype == "bfloat16":
            return 5e-2
        return 5e-3 if matmul_precision == "tf32" else 2e-4

    def pad_exact(self, cfg: Config, key: str, phase: str) -> bool:
        """Whether zero-padding the batch along ``key`` and slicing the output leaves the
        outputs unchanged (so shape buckets are a valid trick for this workload)."""
        return False

    def varying_axes(self, cfg: Config, key: str) -> dict[str, list[int]]:
        """Which axes of which batch arrays a change of ``key`` resizes (params excluded)."""
        _, before = self.shapes(cfg)
        _, after = self.shapes(dataclasses.replace(cfg, **{key: getattr(cfg, key) + 1}))
        return {name: [i for i, (a, b) in enumerate(zip(before[name], after[name])) if a != b]
                for name in before if before[name] != after[name]}

    def reference_name(self, cfg: Config) -> str:
        return "float64 numpy"

    def reference_float32(self, cfg: Config, phase: str, params: Arrays, batch: Arrays,
                          device: str = "cpu") -> Arrays | None:
        """The reference implementation run in float32, where it is a program with a float32
        mode (the models' PyTorch twin): how far float32 alone moves this workload from
        float64, which the float32 cells' tolerance is derived from (harness/reference.py).
        None: the tolerance stays the dtype's fixed one."""
        return None

    def unsupported(self, cfg: Config, framework: str, backend: str, phase: str) -> str | None:
        """Why this framework and backend cannot run this configuration by design (checked
        before a worker starts; the cell is ``unsupported``), or None."""
        return None

    def attention_geometry(self, cfg: Config) -> list | None:
        """The workload's attention patterns (``workloads.attention.Geometry``), from which each
        framework's implementation is chosen; None for a workload without attention."""
        return None

    def twin(self, framework: str) -> types.ModuleType:
        try:
            path = self.twin_modules[framework]
        except KeyError:
            raise SpecError(f"workload {self.name!r} has no {framework} implementation") from None
        return importlib.import_module(path)

    def shapes(self, cfg: Config) -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]:
        """Parameter and batch shapes, computed without allocating."""
        raise NotImplementedError

    def parameter_count(self, cfg: Config) -> int:
        return sum(int(np.prod(s)) for s in self.shapes(cfg)[0].values())

    def working_elements(self, cfg: Config, phase: str) -> int:
        """Elements of the intermediate arrays a step holds at once (activations, scores,
        gradients of activations): the micro-ops' part of the pre-flight memory estimate."""
        return 0

    def memory_estimate(self, cfg: Config, phase: str, dtype: str) -> dict[str, int]:
        """A pre-flight estimate, in bytes, of what a cell holds at its peak (a lower bound
        by design: the RSS watchdog catches what it misses). The same parts as the models':
        the host copy of the inputs, the program's parameters, optimizer state and working
        arrays, and the float64 reference (which runs after the program is released)."""
        params, batch = self.shapes(cfg)
        n_params = sum(int(np.prod(s)) for s in params.values())
        n_batch = sum(int(np.prod(s)) for s in batch.values())
        work = self.working_elements(cfg, phase)
        train = phase == "train-step"
        return {"host_weights": 4 * (n_params + n_batch),
                "parameters": n_params * itemsize(param_dtype(dtype, phase)),
                "optimizer": 4 * n_params if train else 0,  # the gradients (SGD keeps no state)
                "activations": itemsize(dtype) * (n_batch + work),
                "reference": 8 * (n_params * (2 if train else 1) + n_batch + work)}

    def describe(self, cfg: Config) -> dict[str, Any]:
        """What ``stackwars describe`` prints: the configuration, parameter and input shapes'
        sizes, analytical FLOPs and minimum bytes moved per phase. Nothing is allocated."""
        params, batch = self.shapes(cfg)
        return {"workload": self.name, "description": self.description, "config": cfg.as_dict(),
                "parameters": self.parameter_count(cfg), "parameter_tensors": len(params),
                "inputs": {k: list(v) for k, v in batch.items()},
                "flops": {p: self.flops(cfg, p) for p in self.phases}, "flops_formula": self.flops_formula,
                "bytes_moved": {f"{p}/{d}": self.bytes_moved(cfg, p, itemsize(d), itemsize(param_dtype(d, p)))
                                for p in self.phases for d in DTYPES}}


# ---- helpers shared by the micro-op references ----------------------------------------

def normal(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
    return rng.standard_normal(shape) * scale


def sq_error(y: np.ndarray, t: np.ndarray) -> tuple[float, np.ndarray]:
    """Squared error summed over the last axis (features), averaged over the rest
    (examples), and its gradient with respect to ``y``.

    A per-example loss, so the SGD update is a sizeable fraction of each parameter and the
    train-step parity check (which reads ``new - old`` parameters) is not limited by the
    rounding of the parameters themselves."""
    diff = y - t
    rows = diff.size // diff.shape[-1]
    return float(np.sum(diff * diff) / rows), 2.0 * diff / rows


def gelu(x: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """GELU and its derivative, float64. ``tanh`` is GPT-2's approximation; ``erf`` is exact."""
    if kind == "tanh":
        c = np.sqrt(2.0 / np.pi)
        u = c * (x + 0.044715 * x ** 3)
        t = np.tanh(u)
        y = 0.5 * x * (1.0 + t)
        dy = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3 * 0.044715 * x * x)
        return y, dy
    from math import erf
    cdf = 0.5 * (1.0 + np.vectorize(erf, otypes=[np.float64])(x / np.sqrt(2.0)))
    pdf = np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi)
    return x * cdf, cdf + x * pdf


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """The value of ``x`` after rounding to ``dtype`` (round to nearest even), so that the
    reference starts from exactly the inputs the frameworks receive. Held as float32, which
    represents every float32 and bfloat16 value exactly (a float64 copy would double the
    worker's host memory for a model's weights); references compute in float64
    (``as_float64``). Integer arrays (token ids, labels) pass through unchanged."""
    if np.issubdtype(np.asarray(x).dtype, np.integer):
        return x
    x32 = np.ascontiguousarray(x, dtype=np.float32)
    if dtype == "float32":
        return x32
    if dtype == "bfloat16":
        bits = x32.reshape(-1).view(np.uint32)
        out = np.empty_like(bits)
        for lo in range(0, bits.size, ROUND_CHUNK):  # temporaries of one chunk, not of a whole embedding
            _round_bfloat16(bits, out, lo)
        return out.view(np.float32).reshape(x32.shape)
    raise SpecError(f"unknown dtype {dtype!r}; allowed: {', '.join(DTYPES)}")


ROUND_CHUNK = 1 << 22  # elements rounded at a time (16 MiB of float32)
ROUND_THREADS_FROM = 1 << 24  # elements from which round_all rounds in threads (below, they cost more than they save)


def _round_bfloat16(bits: np.ndarray, out: np.ndarray, lo: int) -> None:
    """float32 bit patterns [lo, lo + ROUND_CHUNK) rounded to the nearest even bfloat16, into ``out``."""
    b, o = bits[lo:lo + ROUND_CHUNK], out[lo:lo + ROUND_CHUNK]
    np.right_shift(b, np.uint32(16), out=o)
    o &= np.uint32(1)
    o += np.uint32(0x7FFF)
    o += b
    o &= np.uint32(0xFFFF0000)


def host_threads() -> int:
    """The CPUs this process may run on: the threads that draw, round and lay out a model's
    weights on the host."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def round_all(arrays: Arrays, dtype: str) -> Arrays:
    """``round_to`` over every array, in parallel threads (numpy's ufuncs release the GIL),
    chunk by chunk (``ROUND_CHUNK``): a model's weights are rounded in seconds on a many-core
    host, not in minutes, and its largest tensor (GPT-2's token embedding, 31% of it) by all
    the threads, not by one."""
    from concurrent.futures import ThreadPoolExecutor

    items = list(arrays.items())
    if dtype != "bfloat16" or sum(np.asarray(v).size for _, v in items) < ROUND_THREADS_FROM:
        return {k: round_to(v, dtype) for k, v in items}  # no arithmetic, or too small for threads to pay
    out: dict[str, Any] = {}
    jobs = []
    for k, v in items:
        if np.issubdtype(np.asarray(v).dtype, np.integer):
            out[k] = v
            continue
        x32 = np.ascontiguousarray(v, dtype=np.float32)
        bits = x32.reshape(-1).view(np.uint32)
        rounded = np.empty_like(bits)
        out[k] = rounded.view(np.float32).reshape(x32.shape)
        jobs += [(bits, rounded, lo) for lo in range(0, bits.size, ROUND_CHUNK)]
    with ThreadPoolExecutor(max_workers=host_threads()) as pool:
        list(pool.map(lambda job: _round_bfloat16(*job), jobs))
    return {k: out[k] for k, _ in items}


def as_float64(arrays: Arrays) -> Arrays:
    """Floating arrays in float64 (a reference's arithmetic); integer arrays unchanged."""
    return {k: v if np.issubdtype(np.asarray(v).dtype, np.integer) else np.asarray(v, dtype=np.float64)
            for k, v in arrays.items()}


def param_dtype(dtype: str, phase: str) -> str:
    """Parameters are stored in the compute dtype for inference; training in bfloat16
    keeps float32 master weights (torch: autocast; JAX: cast inside the loss)."""
    return "float32" if phase == "train-step" else dtype


def itemsize(dtype: str) -> int:
    return {"float32": 4, "bfloat16": 2}[dtype]


def initial_values(host: Mapping[str, np.ndarray], canonical: Mapping[str, Any],
                   copy: Callable[[Any], np.ndarray]) -> dict[str, np.ndarray]:
    """A train step's starting point, to measure its update from, as float32 host arrays: the
    parameters as drawn and rounded (``round_to``: exactly what the framework was given;
    ``to_tensor``/``to_device_array`` copied them, so no step changes these), else a copy of
    the framework's own tensor (state the workload does not draw). No copy of a large model
    is made: its 124M-parameter float32 copy and its float64 conversions were seconds of the
    harness's cost per GPT-2 cell."""
    out = {}
    for k, v in canonical.items():
        given = host.get(k)
        ok = given is not None and given.dtype == np.float32 and tuple(given.shape) == tuple(v.shape)
        out[k] = given if ok else copy(v)
    return out


def update_of(new: np.ndarray, initial: np.ndarray) -> np.ndarray:
    """new - initial in float32. Exact where the two are within a factor of two of each other
    (Sterbenz), which holds for almost every element a step moves; elsewhere rounded by at
    most 6e-8 of the update itself, far below the tightest tolerance (2e-4)."""
    return np.subtract(new, initial, dtype=np.float32)
