"""Name -> object for workloads, backends and studies.

Built-in modules register themselves on import; ``STACKWARS_PLUGINS`` (comma-separated
module names) adds third-party ones, in the parent and in every worker alike.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
import types
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
    if not _entry_points_loaded:
        _load_entry_points()
    # plugins named after the first lookup (the variable can change in-process) load too
    for name in filter(None, (p.strip() for p in os.environ.get("STACKWARS_PLUGINS", "").split(","))):
        if name not in _plugins:
            if name.endswith(".py"):
                load_file(name)
                continue
            _importing = f"plugin {name}"
            try:
                module = importlib.import_module(name)
                _register_models(module, f"plugin {name}")
            except SpecError as exc:  # a name it may not take
                raise SpecError(f"STACKWARS_PLUGINS names {name!r}: {exc}") from None
            except BaseException as exc:  # noqa: BLE001 - even sys.exit() or Ctrl-C in a plugin's import
                raise SpecError(f"STACKWARS_PLUGINS names {name!r}, which cannot be imported "
                                f"({type(exc).__name__}: {exc}); give importable module names, comma-separated, "
                                f"or unset it") from None
            finally:
                _importing = None
            _plugins.add(name)


_entry_points_loaded = False
ENTRY_POINT_GROUP = "stackwars.workloads"


def _load_entry_points() -> None:
    """Installed packages' workloads: each entry point of the ``stackwars.workloads`` group is a
    ``stackwars.Model`` or a module (whose ``Model`` objects, and whatever it registers, count)."""
    global _entry_points_loaded, _importing
    _entry_points_loaded = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        _importing = f"package {ep.value} (entry point {ep.name})"
        try:
            obj = ep.load()
            _register_models(obj, f"package {ep.value} (entry point {ep.name})")
        except SpecError as exc:
            raise SpecError(f"the installed entry point {ep.name} = {ep.value} ({ENTRY_POINT_GROUP}): {exc}") from None
        except BaseException as exc:  # noqa: BLE001
            raise SpecError(f"the installed entry point {ep.name} = {ep.value} ({ENTRY_POINT_GROUP}) cannot be "
                            f"loaded ({type(exc).__name__}: {exc}); fix or uninstall its package") from None
        finally:
            _importing = None


def _register_models(obj: Any, origin: str) -> None:
    """Register ``obj`` if it is a ``stackwars.Model``, or every Model a module defines, as
    coming from ``origin``."""
    global _importing
    from stackwars.model import Model, UserWorkload

    if isinstance(obj, Model):
        models = [(None, obj)]
    elif isinstance(obj, types.ModuleType):
        models = [(attr, v) for attr, v in vars(obj).items() if isinstance(v, Model)]
    else:
        models = []
    previous = _importing
    try:
        for attr, m in models:
            # a file's Model is named as the command line names it (path:NAME): a verdict's command reruns it
            _importing = f"{origin}:{attr}" if origin.startswith("file ") and attr else origin
            if getattr(_WORKLOADS.get(m.name), "model", None) is not m:  # not the same Model seen again
                register_workload(UserWorkload(m, origin, frameworks_imported(obj)))
    finally:
        _importing = previous


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


_files: dict[str, types.ModuleType] = {}


FILE_IMPORT_TIMEOUT_S = 120.0  # a model file's import, tried in a worker first
_import_limit_s: float | None = None  # the command's --timeout, where it gave one: it bounds every wait


def bound_waits(seconds: float | None) -> None:
    """The command's --timeout: a model file's import check waits no longer than it either."""
    global _import_limit_s
    _import_limit_s = seconds


def _import_timeout_s() -> float:
    return FILE_IMPORT_TIMEOUT_S if _import_limit_s is None else min(FILE_IMPORT_TIMEOUT_S, _import_limit_s)


def import_task(path: str) -> dict:
    """Worker target: import the file at ``path``, nothing more."""
    import importlib.util

    sys.path.insert(0, os.path.dirname(path))
    spec = importlib.util.spec_from_file_location("stackwars_user_import_check", path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    return {"status": "ok"}


def _check_import(path: str, path_text: str) -> None:
    """The command's process imports a user's file only after a worker did within
    ``FILE_IMPORT_TIMEOUT_S`` (a loop or a wait at import would otherwise hang it, silently). A
    worker (``STACKWARS_PARENT_PID`` set) imports directly: it is itself killed at its timeout.
    An import that raises is left to the import here, whose message names the error."""
    if os.environ.get("STACKWARS_PARENT_PID"):
        return
    from stackwars.harness.isolation import run_task

    o = run_task({"target": "stackwars.registry:import_task", "kwargs": {"path": path},
                  "process": {"device": "cpu"}}, _import_timeout_s())
    if o.status == "timeout":
        raise SpecError(f"{path_text}: importing it did not finish within {_import_timeout_s():g} s (tried in a "
                        f"worker, killed then): a loop or a wait at import? A model file should define its Model "
                        f"and return; build models inside its factories")


def load_file(path_text: str) -> types.ModuleType:
    """A user's Python file, imported by path (nothing installed), its Models registered; the
    workers load it too (its path joins STACKWARS_PLUGINS). A file that cannot be imported is
    refused with what is wrong and where."""
    global _importing
    import importlib.util
    import sys

    path = os.path.abspath(os.path.expanduser(path_text))
    if path in _files:
        return _files[path]
    if not os.path.isfile(path):
        raise SpecError(f"{path_text}: no such file")
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as exc:
        raise SpecError(f"{path_text}: cannot be read ({exc.strerror or exc})") from None
    nul = source.find(b"\0")
    if nul >= 0:
        raise SpecError(f"{path_text}: not Python source: it holds binary bytes (a NUL at byte {nul}); give the "
                        f".py file that defines the Model")
    try:
        source.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path_text}: not Python source: byte {exc.start} is not UTF-8 text; give the .py file "
                        f"that defines the Model") from None
    digest = hashlib.sha256(path.encode()).hexdigest()[:10]
    module_name = f"stackwars_user_{os.path.splitext(os.path.basename(path))[0]}_{digest}".replace("-", "_")
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    # its folder on sys.path, as `python file.py`, runpy and pytest put it: a model file imports the
    # modules beside it (at import, and later, inside its factories, in every worker)
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    _check_import(path, path_text)  # a file that hangs at import hangs a killable worker, not this process
    _importing = f"file {path}"
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(module_name, None)
        where = f", line {exc.lineno}" if exc.lineno else ""
        raise SpecError(f"{path_text}{where}: syntax error: {exc.msg}") from None
    except SpecError as exc:
        sys.modules.pop(module_name, None)
        raise SpecError(f"{path_text}: {exc}") from None
    except BaseException as exc:  # noqa: BLE001 - the user's file, whatever it does at import
        sys.modules.pop(module_name, None)
        raise SpecError(f"{path_text}: importing it raised {type(exc).__name__}: {exc}") from None
    finally:
        _importing = None
    _files[path] = module
    try:
        _register_models(module, f"file {path}")
    except SpecError as exc:
        raise SpecError(f"{path_text}: {exc}") from None
    plugins = [p.strip() for p in os.environ.get("STACKWARS_PLUGINS", "").split(",") if p.strip()]
    if path not in plugins:  # the workers (and a resumed run's parent, through the recorded env) load it too
        os.environ["STACKWARS_PLUGINS"] = ",".join([*plugins, path])
    _plugins.add(path)
    return module


def resolve_workload(name: str) -> str:
    """A workload's registered name: a built-in's or a plugin's as given; ``path/file.py:NAME``
    (or ``path/file.py``, when it defines one Model) loads the file and names its Model."""
    _ensure_loaded()
    file, sep, attr = name.rpartition(":") if ".py:" in name else (name, "", "")
    if not file.endswith(".py"):
        return name
    module = load_file(file)
    from stackwars.model import Model

    if sep:
        if not hasattr(module, attr):
            found = [k for k, v in vars(module).items() if isinstance(v, Model)]
            raise SpecError(f"{file} has no {attr!r}; its Models: {', '.join(found) or 'none'}")
        obj = getattr(module, attr)
        if not isinstance(obj, Model):
            raise SpecError(f"{file}: {attr} is a {type(obj).__name__}, not a stackwars.Model; make it with "
                            f"stackwars.Model(name=..., presets=..., batch=..., torch=... and/or jax=...)")
        return obj.name
    found = [v for v in vars(module).values() if isinstance(v, Model)]
    if len(found) != 1:
        raise SpecError(f"{file} defines {len(found)} stackwars.Model objects; name one: {file}:NAME")
    return found[0].name


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
