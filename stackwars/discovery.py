"""Discovery: what fills the registry, from the top of the house.

The built-in workloads, backends and studies register when their packages are imported;
installed packages add theirs through the ``stackwars.workloads`` entry-point group;
``STACKWARS_PLUGINS`` (comma-separated module names or ``.py`` files) adds more, in the parent
and in every worker alike; a user's ``path/file.py:NAME`` on the command line loads that file.
``stackwars/__init__.py`` installs ``discover`` and ``resolve_file`` into the registry
(``registry.use_discovery``), so the registry itself imports no plugin.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import os
import sys
import threading
import types
from typing import Any

from stackwars import registry
from stackwars.errors import SpecError

ENTRY_POINT_GROUP = "stackwars.workloads"

_loaded = False
_entry_points_loaded = False
_plugins: set[str] = set()  # STACKWARS_PLUGINS entries loaded (module names and file paths)
_files: dict[str, types.ModuleType] = {}  # a user's file, by its absolute path, once imported


def discover() -> None:
    """Register the built-ins and installed entry points once, and every STACKWARS_PLUGINS entry
    not loaded yet (the variable can change in-process: a file named later joins it)."""
    global _loaded
    if not _loaded:
        _loaded = True
        import stackwars.backends  # noqa: F401 - the built-ins register as they are imported
        import stackwars.studies  # noqa: F401
        import stackwars.workloads  # noqa: F401
    if not _entry_points_loaded:
        _load_entry_points()
    for name in filter(None, (p.strip() for p in os.environ.get("STACKWARS_PLUGINS", "").split(","))):
        if name not in _plugins:
            if name.endswith(".py"):
                load_file(name)
                continue
            try:
                with registry.registering_from(f"plugin {name}"):
                    module = importlib.import_module(name)
                _register_models(module, f"plugin {name}")
            except SpecError as exc:  # a name it may not take
                raise SpecError(f"STACKWARS_PLUGINS names {name!r}: {exc}") from None
            except BaseException as exc:  # noqa: BLE001 - even sys.exit() or Ctrl-C in a plugin's import
                raise SpecError(f"STACKWARS_PLUGINS names {name!r}, which cannot be imported "
                                f"({type(exc).__name__}: {exc}); give importable module names, comma-separated, "
                                f"or unset it") from None
            _plugins.add(name)


def _load_entry_points() -> None:
    """Installed packages' workloads: each entry point of the ``stackwars.workloads`` group is a
    ``stackwars.Model`` or a module (whose ``Model`` objects, and whatever it registers, count)."""
    global _entry_points_loaded
    _entry_points_loaded = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        origin = f"package {ep.value} (entry point {ep.name})"
        try:
            with registry.registering_from(origin):
                obj = ep.load()
            _register_models(obj, origin)
        except SpecError as exc:
            raise SpecError(f"the installed entry point {ep.name} = {ep.value} ({ENTRY_POINT_GROUP}): {exc}") from None
        except BaseException as exc:  # noqa: BLE001
            raise SpecError(f"the installed entry point {ep.name} = {ep.value} ({ENTRY_POINT_GROUP}) cannot be "
                            f"loaded ({type(exc).__name__}: {exc}); fix or uninstall its package") from None


def _register_models(obj: Any, origin: str) -> None:
    """Register ``obj`` if it is a ``stackwars.Model``, or every Model a module defines, as
    coming from ``origin``."""
    from stackwars.model import Model, UserWorkload  # here, not at the top: `import stackwars` stays light

    if isinstance(obj, Model):
        models = [(None, obj)]
    elif isinstance(obj, types.ModuleType):
        models = [(attr, v) for attr, v in vars(obj).items() if isinstance(v, Model)]
    else:
        models = []
    for attr, m in models:
        # a file's Model is named as the command line names it (path:NAME): a verdict's command reruns it
        with registry.registering_from(f"{origin}:{attr}" if origin.startswith("file ") and attr else origin):
            if getattr(registry.registered_workload(m.name), "model", None) is not m:  # not the same Model again
                registry.register_workload(UserWorkload(m, origin, registry.frameworks_imported(obj)))


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
    sys.path.insert(0, os.path.dirname(path))
    spec = importlib.util.spec_from_file_location("stackwars_user_import_check", path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    return {"status": "ok"}


def frameworks_in_source(path: str) -> tuple[str, ...]:
    """The framework packages (``registry.FRAMEWORK_PACKAGES``) a file's top level imports, read from
    its source without running it: the import check's worker is forked from a server that preloaded
    them (harness/forkserver.py), not a fresh interpreter that imports them again (about 4 s for
    PyTorch, JAX and Flax on the 2-CPU VM), and the server stays for the next file that imports the
    same. A file that does not parse: none (its import names the error)."""
    import ast

    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return ()
    found = set()
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.If, ast.Try)):  # `try: import jax` at the top level runs at import too
            todo += [*node.body, *node.orelse, *getattr(node, "finalbody", []),
                     *(n for h in getattr(node, "handlers", []) for n in h.body)]
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
        found |= {n.split(".")[0] for n in names} & set(registry.FRAMEWORK_PACKAGES)
    return tuple(sorted(found))


def _check_import(path: str, path_text: str) -> None:
    """The command's process imports a user's file only after a worker did within
    ``FILE_IMPORT_TIMEOUT_S`` (a loop or a wait at import would otherwise hang it, silently). A
    worker (``STACKWARS_PARENT_PID`` set) imports directly: it is itself killed at its timeout.
    An import that raises is left to the import here, whose message names the error."""
    if os.environ.get("STACKWARS_PARENT_PID"):
        return
    from stackwars.harness.isolation import run_task

    preload = frameworks_in_source(path)
    o = run_task({"target": "stackwars.discovery:import_task", "kwargs": {"path": path},
                  "process": {"device": "cpu", **({"preload": list(preload)} if preload else {})}},
                 _import_timeout_s())
    if o.status == "timeout":
        raise SpecError(f"{path_text}: importing it did not finish within {_import_timeout_s():g} s (tried in a "
                        f"worker, killed then): a loop or a wait at import? A model file should define its Model "
                        f"and return; build models inside its factories")


def _read_source(path: str, path_text: str) -> None:
    """A file that is there, readable, and Python source: a NUL or a byte that is not UTF-8 is named."""
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


_USER_THREADS: list[threading.Thread] = []  # threads a model file's top level started, not daemons


def _contain(cwd: str, threads: set) -> None:
    """After a model file's top level ran here: the working folder it may have changed put back
    (a relative --db or --json follows the user's folder, not the file's), and the threads it
    started that are not daemons kept, for ``leave_if_user_threads``."""
    try:
        if os.getcwd() != cwd:
            os.chdir(cwd)
    except OSError:
        os.chdir(cwd)
    _USER_THREADS.extend(t for t in threading.enumerate() if t not in threads and not t.daemon)


def leave_if_user_threads(code: int) -> None:
    """End this process now, with ``code``, where a model file's top level started a thread that
    is not a daemon and still runs (the interpreter would wait for it, forever): the exit
    handlers run first (fork servers closed, temporary folders removed), the output flushed."""
    if not any(t.is_alive() for t in _USER_THREADS):
        return
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def load_file(path_text: str) -> types.ModuleType:
    """A user's Python file, imported by path (nothing installed), its Models registered; the
    workers load it too (its path joins STACKWARS_PLUGINS). A file that cannot be imported is
    refused with what is wrong and where."""
    path = os.path.abspath(os.path.expanduser(path_text))
    if path in _files:
        return _files[path]
    from stackwars.outputs import check_name  # a leaf of the ground floor; discovery stays light to import

    check_name(path, "the model file")
    _read_source(path, path_text)
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
    cwd, threads = os.getcwd(), set(threading.enumerate())
    try:
        # what its top level prints goes to stderr: this process's stdout is the command's output (describe --json)
        with registry.registering_from(f"file {path}"), contextlib.redirect_stdout(sys.stderr):
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
        _contain(cwd, threads)
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


def resolve_file(name: str) -> str:
    """``path/file.py:NAME`` (or ``path/file.py``, when it defines one Model): load the file and
    name its Model as registered."""
    from stackwars.model import Model  # as above: only a command that names a file needs it

    file, sep, attr = name.rpartition(":") if ".py:" in name else (name, "", "")
    module = load_file(file)
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


SENT = "sent-models"  # the cache's folder of models sent by value (send_model)
_LOADER = """\"\"\"stackwars.Model {name!r}, defined in a notebook cell or an interpreter session and sent to the
workers by value: the pickle beside this file (cloudpickle), checked against its sha256. Written by
stackwars.run (discovery.send_model); a run that measured it keeps this file's sha256 and resumes
from it.\"\"\"

import hashlib
import pathlib

import cloudpickle

_DATA = (pathlib.Path(__file__).parent / "model.pkl").read_bytes()
if hashlib.sha256(_DATA).hexdigest() != {sha256!r}:
    raise RuntimeError(f"{{pathlib.Path(__file__).parent / 'model.pkl'}} changed since stackwars.run wrote it")
model = cloudpickle.loads(_DATA)
"""
# what differs between two picklings of one definition: cloudpickle's id of a class defined in the session (a
# fresh uuid each time the cell runs) and the kernel's process id in the cell's file name
_VOLATILE = (rb"[0-9a-f]{32}", rb"ipykernel_[0-9]+")


def send_model(model: Any) -> str:
    """A ``stackwars.Model`` made in this session (a notebook cell) as the command line names a model
    in a file, ``PATH:model``: pickled by value with cloudpickle (its factories, and the classes and
    functions they use that no module defines) into the cache's ``sent-models`` folder, one folder a
    definition (named by the sha256 of its pickle, without what differs between two picklings of one
    definition), beside a loader file the workers import as any model file. The float64 twin check,
    its worker and its timeout then apply as to a model in a file (``resolve_file``). A model of the
    same name this session sent before, from another definition, is forgotten here first; a
    database keeps the two apart (a model is its name and where it comes from). A factory that
    cannot be sent (an open file, a lock) is refused, named."""
    import re

    from stackwars.harness.tmp import cache_root  # a leaf: the cache's place
    from stackwars.model import Model
    from stackwars.outputs import write

    if not isinstance(model, Model):
        raise SpecError(f"send a stackwars.Model, got {type(model).__name__}")
    try:
        import cloudpickle  # noqa: F401 - present, or said how to install it, before anything is written
    except ImportError:
        raise SpecError(f"model {model.name!r} is not in a file: sending it to the workers by value needs cloudpickle "
                        f"(pip install cloudpickle); or put it in a file and give 'file.py:NAME'") from None
    try:
        data = _dumps(model)
    except Exception as exc:  # noqa: BLE001 - whatever the factories hold
        raise SpecError(_unsendable(model, exc)) from None
    stable = data
    for pattern in _VOLATILE:
        stable = re.sub(pattern, b"-", stable)
    digest = hashlib.sha256(data).hexdigest()
    folder = cache_root() / SENT / f"{model.name}-{hashlib.sha256(stable).hexdigest()[:16]}"
    loader = folder / "model.py"
    if not (loader.is_file() and (folder / "model.pkl").is_file()):
        folder.mkdir(parents=True, exist_ok=True)
        write(folder / "model.pkl", data, "the sent model")
        write(loader, _LOADER.format(name=model.name, sha256=digest), "the sent model")
    path = os.path.abspath(loader)
    # this session's earlier definition of the name, sent before: forgotten, here and in the workers to come
    for earlier in [p for p in _files if p != path and os.path.dirname(os.path.dirname(p)) == str(cache_root() / SENT)]:
        held = registry.origin("workload", model.name) if registry.registered_workload(model.name) else ""
        if held.startswith(f"file {earlier}:"):
            registry.forget_origin(held)
            _files.pop(earlier, None)
            _plugins.discard(earlier)
            os.environ["STACKWARS_PLUGINS"] = ",".join(
                p for p in os.environ.get("STACKWARS_PLUGINS", "").split(",") if p.strip() and p.strip() != earlier)
    return f"{path}:model"


def _dumps(obj: Any) -> bytes:
    """cloudpickle's bytes of ``obj``, a module object that is a subclass of ModuleType sent by its name as
    cloudpickle sends a plain module (``torch.classes`` is one: a factory that reads ``size.classes``
    names it, to cloudpickle, and plain pickling refuses it: "cannot pickle '_Classes' object")."""
    import importlib
    import io

    import cloudpickle

    class Pickler(cloudpickle.CloudPickler):
        def reducer_override(self, o):
            if isinstance(o, types.ModuleType) and type(o) is not types.ModuleType \
                    and sys.modules.get(getattr(o, "__name__", "")) is o:
                return importlib.import_module, (o.__name__,)
            return super().reducer_override(o)

    out = io.BytesIO()
    Pickler(out, protocol=cloudpickle.DEFAULT_PROTOCOL).dump(obj)
    return out.getvalue()


def _unsendable(model: Any, exc: BaseException) -> str:
    """What cannot be sent, named: the first of the Model's parts that cloudpickle refuses."""
    import dataclasses

    for f in dataclasses.fields(model):
        try:
            _dumps(getattr(model, f.name))
        except Exception as part:  # noqa: BLE001
            return (f"model {model.name!r} cannot be sent to the worker processes: its {f.name}= holds something "
                    f"that cannot be pickled ({type(part).__name__}: {part}). Open files, locks, threads and "
                    f"connections cannot go to another process: make them inside the factory, or put the model "
                    f"in a file and give 'file.py:NAME'")
    return (f"model {model.name!r} cannot be sent to the worker processes ({type(exc).__name__}: {exc}); put it in "
            f"a file and give 'file.py:NAME'")
