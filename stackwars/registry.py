"""Name -> object for workloads, backends and studies, and where each came from.

A leaf: it imports no plugin and nothing of the project above ``errors``. What fills it is
discovery (``stackwars/discovery.py``: the built-ins, installed entry points,
``STACKWARS_PLUGINS`` and users' model files), which ``stackwars/__init__.py`` installs with
``use_discovery`` at the top, so that every process that imports the package, the parent and
every worker alike, finds the same names on its first lookup.
"""

from __future__ import annotations

import contextlib
import types
from typing import Any, Callable, Iterator

from stackwars.errors import SpecError

_WORKLOADS: dict[str, Any] = {}
_BACKENDS: dict[str, Any] = {}
_STUDIES: dict[str, Any] = {}
_ORIGIN: dict[tuple[str, str], str] = {}  # (kind, name) -> "built-in" or "plugin <module>"
_importing: str | None = None  # where what registers now comes from, while discovery imports it

_discover: Callable[[], None] | None = None  # registers whatever is not registered yet
_resolve_file: Callable[[str], str] | None = None  # "path/file.py[:NAME]" -> the registered name


def use_discovery(discover: Callable[[], None], resolve_file: Callable[[str], str]) -> None:
    """Installed once, from the top (``stackwars/__init__.py``): what fills the tables before a
    lookup, and what loads a user's file named on the command line."""
    global _discover, _resolve_file
    _discover, _resolve_file = discover, resolve_file


@contextlib.contextmanager
def registering_from(origin: str) -> Iterator[None]:
    """What registers inside this block comes from ``origin`` ("plugin <module>", "file <path>")."""
    global _importing
    previous, _importing = _importing, origin
    try:
        yield
    finally:
        _importing = previous


def _register(table: dict[str, Any], kind: str, name: str, obj: Any) -> Any:
    """One name, one object: a plugin may add names, never replace one (a shadowed ``gemm``
    once stored 21.5 TFLOP/s on two CPUs with no trace of the plugin)."""
    origin = _importing or "built-in"
    if name in table and _ORIGIN.get((kind, name)) != origin:
        owner = _ORIGIN.get((kind, name), "built-in")
        raise SpecError(f"it registers the {kind} {name!r}, which is already taken "
                        f"({'a built-in' if owner == 'built-in' else owner}); a plugin may add names, not replace "
                        f"them: rename it")
    table[name] = obj
    _ORIGIN[(kind, name)] = origin
    return obj


def forget_origin(origin: str) -> list[str]:
    """Every workload registered from ``origin`` taken out (its names freed); returns those names. Only
    for a model the session itself sent and now sends again, redefined (discovery.send_model): a
    plugin's names are never replaced."""
    names = [name for (kind, name), o in _ORIGIN.items() if kind == "workload" and o == origin]
    for name in names:
        _WORKLOADS.pop(name, None)
        _ORIGIN.pop(("workload", name), None)
    return names


def register_workload(obj: Any) -> Any:
    return _register(_WORKLOADS, "workload", obj.name, obj)


def register_backend(spec: Any) -> Any:
    return _register(_BACKENDS, "backend", spec.name, spec)


def register_study(obj: Any) -> Any:
    return _register(_STUDIES, "study", obj.name, obj)


def registered_workload(name: str) -> Any | None:
    """The workload registered under ``name``, or None, without discovering more (discovery asks)."""
    return _WORKLOADS.get(name)


def origin(kind: str, name: str) -> str:
    """Where a workload, backend or study came from: "built-in" or "plugin <module>"."""
    _ensure_loaded()
    return _ORIGIN.get((kind, canonical_backend(name) if kind == "backend" else name), "unknown")


def _ensure_loaded() -> None:
    if _discover is not None:
        _discover()


FRAMEWORK_PACKAGES = ("torch", "jax", "flax", "optax")


def frameworks_imported(obj: Any) -> tuple[str, ...]:
    """The framework modules a model file's top level imported (``import torch``, ``from flax
    import nnx``, ``from torch.nn import Linear``): every worker that loads the file imports
    them, whatever its backend. Nothing for a Model given without its module."""
    if not isinstance(obj, types.ModuleType):
        return ()
    names = []
    for value in vars(obj).values():
        try:
            name = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
        except Exception:  # noqa: BLE001 - a lazy object that fails when looked at: not a framework we preload
            continue
        if isinstance(name, str) and name.split(".")[0] in FRAMEWORK_PACKAGES:
            names.append(name)
    return tuple(sorted(set(names)))


def resolve_workload(name: str) -> str:
    """A workload's registered name: a built-in's or a plugin's as given; ``path/file.py:NAME``
    (or ``path/file.py``, when it defines one Model) loads the file and names its Model."""
    _ensure_loaded()
    file = name.rpartition(":")[0] if ".py:" in name else name
    if not file.endswith(".py"):
        return name
    if _resolve_file is None:
        raise SpecError(f"{name}: a model file cannot be loaded here (no discovery installed: import stackwars)")
    return _resolve_file(name)


def _lookup(table: dict[str, Any], kind: str, name: str) -> Any:
    _ensure_loaded()
    try:
        return table[name]
    except KeyError:
        allowed = ", ".join(sorted(table)) or "(none)"
        raise SpecError(f"unknown {kind} {name!r}; allowed: {allowed}") from None


def workload(name: str) -> Any:
    return _lookup(_WORKLOADS, "workload", name)


# Old backend names still accepted, each with what it means (the name a user might misread).
BACKEND_ALIASES: dict[str, tuple[str, str]] = {
    "torch-xla": ("torch-mlir-xla", "the PyTorch program exported to StableHLO by torch-mlir and run by XLA through "
                                    "jaxlib; it is not the torch_xla package, which stackwars does not use"),
}


def canonical_backend(name: str) -> str:
    """The current name of a backend given by an old one (stored runs keep what they stored)."""
    return BACKEND_ALIASES[name][0] if name in BACKEND_ALIASES else name


def alias_note(name: str) -> str | None:
    """What an old backend name means, for the message that says it was taken as the new one."""
    if name not in BACKEND_ALIASES:
        return None
    new, meaning = BACKEND_ALIASES[name]
    return f"backend {name!r} is the old name of {new!r}: {meaning}"


def backend(name: str) -> Any:
    return _lookup(_BACKENDS, "backend", canonical_backend(name))


def study(name: str) -> Any:
    return _lookup(_STUDIES, "study", name)


def workloads() -> dict[str, Any]:
    _ensure_loaded()
    return dict(_WORKLOADS)


def backends() -> dict[str, Any]:
    _ensure_loaded()
    return dict(_BACKENDS)


def studies() -> dict[str, Any]:
    _ensure_loaded()
    return dict(_STUDIES)
