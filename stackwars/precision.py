"""What precision each side of a float64 twin check really computed in.

The twins' check (``model.UserWorkload.check_twins``) runs both sides in float64 and allows one
function run twice in float64 to differ by ``TWIN_TOLERANCE`` (1e-8). Some operations compute
below float64 inside a float64 program, by design: ``jax.nn.dot_product_attention`` always takes
its softmax in float32 (and caps its mask at float32's range for that reason); a user's
``.astype(jnp.float32)``, ``.float()`` or ``torch.autocast`` does the same. Their rounding is
float32's, about 1e-8 to 1e-7 relative at the output, and read against 1e-8 it looked like two
different models (issue 88).

This module finds those operations and which of the check's quantities they reach:

* **JAX**: the program's jaxpr (``jax.make_jaxpr``), each equation whose floating output is
  narrower than float64 (a ``convert_element_type`` to float32 and what follows it), followed
  forward through the equations to the outputs it reaches: per output tensor (``jax_narrow``);
* **PyTorch**: a dispatch mode that sees every operation, its floating outputs' dtypes, per part
  of the check (the eval forward, the training forward, the train step: ``TorchNarrow``).

A quantity reached by such an operation is allowed the rounding of the narrowest dtype that
reached it, ``NARROW_FACTOR`` times its machine epsilon (float32: 9.5e-7), and nothing more: a
structural difference (tanh against exact GELU, 1e-3; a 0.9995 residual scale, 5e-4; a missing
BatchNorm) stays far beyond it, and the normalisations' epsilons and momenta are read from the
modules themselves (``model.check_settings``). Each operation is named as the user called it
(the library function nearest the user's code, ``jax.nn.dot_product_attention``), with the
user's line.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any, Iterable

import numpy as np

# one rounding to float32 is at most eps/2 = 6e-8 relative; a softmax in float32 (a max, an exp, a
# sum, a division) and the float64 products around it compound a few of them: 8 eps covers that
# and is three orders under the smallest structural difference the check must see (tanh against
# exact GELU, 1e-3 relative; a residual scaled by 0.9995, 5e-4)
NARROW_FACTOR = 8
_LIBRARIES = (f"{os.sep}jax{os.sep}", f"{os.sep}jaxlib{os.sep}", f"{os.sep}flax{os.sep}", f"{os.sep}optax{os.sep}",
              f"{os.sep}torch{os.sep}", f"{os.sep}numpy{os.sep}")
_PUBLIC = ("jax.nn", "jax.numpy", "jax.lax", "jax.scipy.special", "jax.numpy.linalg", "jax.image", "jax",
           "flax.nnx", "torch.nn.functional", "torch", "optax")


@dataclasses.dataclass(frozen=True)
class Narrow:
    """One operation that computed below float64: what the user called, where, in which dtype."""

    op: str  # "jax.nn.dot_product_attention", or the primitive where no library function is named
    dtype: str  # "float32"
    where: str = ""  # "lm.py:55", the user's line that called it

    def describe(self, side: str) -> str:
        at = f" ({self.where})" if self.where else ""
        return f"{self.op}{at} computes in {self.dtype} on {side}'s side"


def tolerance(narrows: Iterable[Narrow], strict: float) -> float:
    """The tolerance of a quantity reached by ``narrows``: the narrowest one's rounding, at least ``strict``."""
    eps = [float(np.finfo(np.dtype(n.dtype) if n.dtype != "bfloat16" else np.float32).eps)
           * (2 ** 16 if n.dtype == "bfloat16" else 1) for n in narrows]
    return max([strict] + [NARROW_FACTOR * e for e in eps])


def _is_library(path: str) -> bool:
    return any(part in path for part in _LIBRARIES) and f"{os.sep}stackwars{os.sep}" not in path


@functools.lru_cache(maxsize=512)
def _public_name(function: str, path: str) -> str | None:
    """``jax.nn.dot_product_attention`` for the function ``dot_product_attention`` defined in
    ``jax/_src/nn/functions.py``: the public module that exports that very function."""
    import importlib
    import inspect

    head, _, method = function.partition(".")
    for module in _PUBLIC:
        try:
            obj = getattr(importlib.import_module(module), head, None)
        except Exception:  # noqa: BLE001 - an optional library absent
            continue
        if obj is None:
            continue
        target = getattr(obj, method.split(".")[0], None) if method and inspect.isclass(obj) else obj
        try:
            code = inspect.unwrap(target).__code__
        except Exception:  # noqa: BLE001 - a builtin, a class without that method
            continue
        if os.path.realpath(code.co_filename) == os.path.realpath(path):
            return f"{module}.{head}" + (f".{method.split('.')[0]}" if method and inspect.isclass(obj) else "")
    return None


def _named(frames: list[tuple[str, str, int]], primitive: str, dtype: str) -> Narrow:
    """``frames``: (file, function, line), innermost first. In the innermost run of library
    frames, the outermost function a public module exports is what the user called
    (``jax.nn.dot_product_attention``, not the ``astype`` inside it); the frame after the run is
    the user's line. Where no public function is found, the primitive."""
    called = None
    user = ""
    seen_library = False
    for path, function, line in frames:
        if _is_library(path):
            seen_library = True
            called = _public_name(function, path) or called
            continue
        if f"{os.sep}stackwars{os.sep}" in path:
            if seen_library:
                break  # no user's frame between (a gradient's equations): the check's own code called it
            continue  # the check's own frames (the dispatch mode) before the user's
        user = f"{os.path.basename(path)}:{line}"
        break
    return Narrow(called or primitive, dtype, user)


# ---- JAX ----------------------------------------------------------------------------------------

def _narrow_dtype(aval) -> str | None:
    dtype = getattr(aval, "dtype", None)
    if dtype is None:
        return None
    dt = np.dtype(dtype) if str(dtype) != "bfloat16" else None
    if dt is None:
        return "bfloat16"
    return str(dt) if dt.kind == "f" and dt.itemsize < 8 else None


def _sub_jaxprs(params) -> list:
    from jax.extend.core import ClosedJaxpr, Jaxpr

    out = []
    for value in params.values():
        for v in (value if isinstance(value, (tuple, list)) else (value,)):
            if isinstance(v, ClosedJaxpr):
                out.append(v.jaxpr)
            elif isinstance(v, Jaxpr):
                out.append(v)
    return out


def _eqn_narrow(eqn, dtype: str) -> Narrow:
    tb = eqn.source_info.traceback
    frames = [(f.file_name, f.function_name, getattr(f, "line_num", getattr(f, "start_line", 0))) for f in tb.frames] if tb is not None else []
    return _named(frames, str(eqn.primitive), dtype)


def _walk(jaxpr, tainted_in: list[frozenset]) -> tuple[list[frozenset], set]:
    """Each output's set of narrow operations that reach it, and every narrow operation found.
    An equation with a narrower floating output from no narrower input (a conversion from
    float64: where the narrow numbers start) starts a set; a nested program (a jit, a custom
    gradient, a scan) that holds one taints every output of its equation."""
    from jax.extend.core import Var

    env: dict = dict(zip(jaxpr.invars, tainted_in))
    found: set = set()
    for eqn in jaxpr.eqns:
        reach = frozenset().union(*[env.get(v, frozenset()) for v in eqn.invars if isinstance(v, Var)])
        for sub in _sub_jaxprs(eqn.params):
            outs, inner = _walk(sub, [reach] * len(sub.invars))
            found |= inner
            reach = reach.union(inner)
        dtypes = {d for d in (_narrow_dtype(v.aval) for v in eqn.outvars) if d}
        # where narrow numbers start (a conversion from float64), not each operation that carries them on
        if dtypes and not any(isinstance(v, Var) and _narrow_dtype(v.aval) for v in eqn.invars):
            here = _eqn_narrow(eqn, min(dtypes, key=lambda d: np.dtype(d if d != "bfloat16" else "float16").itemsize))
            found.add(here)
            reach = reach | {here}
        for v in eqn.outvars:
            env[v] = reach
    return [env.get(v, frozenset()) if isinstance(v, Var) else frozenset() for v in jaxpr.outvars], found


def jax_narrow(fn, *args) -> Any:
    """The pytree of ``fn(*args)``'s outputs, each leaf the frozenset of narrow operations
    (``Narrow``) that reach it; None where ``fn`` cannot be traced (the check then runs it op
    by op, and a narrow operation there cannot be told apart: it is held to float64's tolerance)."""
    import jax

    try:
        closed, shapes = jax.make_jaxpr(fn, return_shape=True)(*args)
    except Exception:  # noqa: BLE001 - Python control flow on a value: nothing to read
        return None
    leaves, tree = jax.tree_util.tree_flatten(shapes)
    outs, _ = _walk(closed.jaxpr, [frozenset()] * len(closed.jaxpr.invars))
    if len(outs) != len(leaves):
        return None
    return jax.tree_util.tree_unflatten(tree, outs)


# ---- PyTorch ------------------------------------------------------------------------------------

class TorchNarrow:
    """A context in which every PyTorch operation's floating outputs are read; ``found`` the
    operations whose output was narrower than float64 (``torch.autocast``, ``.float()``)."""

    def __init__(self):
        self.found: set[Narrow] = set()
        self._mode = None

    def __enter__(self):
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        outer = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                narrow = {str(t.dtype).removeprefix("torch.") for t in torch.utils._pytree.tree_leaves(out)
                          if isinstance(t, torch.Tensor) and t.is_floating_point() and t.element_size() < 8}
                carried = any(isinstance(t, torch.Tensor) and t.is_floating_point() and t.element_size() < 8
                              for t in torch.utils._pytree.tree_leaves((args, kwargs)))
                if narrow and not carried:  # where narrow numbers start, not each operation on them
                    outer._record(str(func.overloadpacket.__name__), min(narrow))
                return out

        self._mode = _Mode()
        self._mode.__enter__()
        return self

    def _record(self, op: str, dtype: str) -> None:
        import traceback

        frames = [(f.filename, f.name, f.lineno) for f in reversed(traceback.extract_stack())]
        self.found.add(_named(frames, f"aten.{op}", dtype))

    def __exit__(self, *exc):
        self._mode.__exit__(*exc)
        return False
