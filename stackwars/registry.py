"""Name -> object for workloads, backends and studies.

Built-in modules register themselves on import; ``STACKWARS_PLUGINS`` (comma-separated
module names) adds third-party ones, in the parent and in every worker alike.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from stackwars.errors import SpecError

_WORKLOADS: dict[str, Any] = {}
_BACKENDS: dict[str, Any] = {}
_STUDIES: dict[str, Any] = {}
_ORIGIN: dict[tuple[str, str], str] = {}  # (kind, name) -> "built-in" or "plugin <module>"
_loaded = False
_plugins: set[str] = set()
_importing: str | None = None  # the plugin module being imported, while it registers


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


def register_workload(obj: Any) -> Any:
    return _register(_WORKLOADS, "workload", obj.name, obj)


def register_backend(spec: Any) -> Any:
    return _register(_BACKENDS, "backend", spec.name, spec)


def register_study(obj: Any) -> Any:
    return _register(_STUDIES, "study", obj.name, obj)


def origin(kind: str, name: str) -> str:
    """Where a workload, backend or study came from: "built-in" or "plugin <module>"."""
    _ensure_loaded()
    return _ORIGIN.get((kind, canonical_backend(name) if kind == "backend" else name), "unknown")


def plugins() -> list[str]:
    """The plugin modules loaded (STACKWARS_PLUGINS)."""
    _ensure_loaded()
    return sorted(_plugins)


def _ensure_loaded() -> None:
    global _loaded, _importing
    if not _loaded:
        _loaded = True
        importlib.import_module("stackwars.workloads")
        importlib.import_module("stackwars.backends")
        importlib.import_module("stackwars.studies")
    # plugins named after the first lookup (the variable can change in-process) load too
    for name in filter(None, (p.strip() for p in os.environ.get("STACKWARS_PLUGINS", "").split(","))):
        if name not in _plugins:
            _importing = f"plugin {name}"
            try:
                importlib.import_module(name)
            except SpecError as exc:  # a name it may not take
                raise SpecError(f"STACKWARS_PLUGINS names {name!r}: {exc}") from None
            except BaseException as exc:  # noqa: BLE001 - even sys.exit() or Ctrl-C in a plugin's import
                raise SpecError(f"STACKWARS_PLUGINS names {name!r}, which cannot be imported "
                                f"({type(exc).__name__}: {exc}); give importable module names, comma-separated, "
                                f"or unset it") from None
            finally:
                _importing = None
            _plugins.add(name)


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
