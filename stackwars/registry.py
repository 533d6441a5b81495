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
_loaded = False
_plugins: set[str] = set()


def register_workload(obj: Any) -> Any:
    _WORKLOADS[obj.name] = obj
    return obj


def register_backend(spec: Any) -> Any:
    _BACKENDS[spec.name] = spec
    return spec


def register_study(obj: Any) -> Any:
    _STUDIES[obj.name] = obj
    return obj


def _ensure_loaded() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        importlib.import_module("stackwars.workloads")
        importlib.import_module("stackwars.backends")
        importlib.import_module("stackwars.studies")
    # plugins named after the first lookup (the variable can change in-process) load too
    for name in filter(None, (p.strip() for p in os.environ.get("STACKWARS_PLUGINS", "").split(","))):
        if name not in _plugins:
            try:
                importlib.import_module(name)
            except Exception as exc:  # noqa: BLE001 - any failure to import a plugin is the user's to fix
                raise SpecError(f"STACKWARS_PLUGINS names {name!r}, which cannot be imported "
                                f"({type(exc).__name__}: {exc}); give importable module names, comma-separated, "
                                f"or unset it") from None
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
