"""stackwars: JAX or PyTorch, which execution mode, for this workload, and why.

Python API: ``stackwars.run(...)`` measures as ``stackwars run`` does and returns the answer
(a ``Result``: the verdict as typed rows, the cells as a DataFrame, JSON, ``explain()``, an inline
view in a notebook); ``stackwars.verdict(run_ids, db=...)`` reads stored runs into the same
object; ``stackwars.Model`` describes your own model (a PyTorch module, a JAX model or both),
in a file for ``stackwars run file.py:NAME`` or in a notebook cell for ``stackwars.run(model)``;
``stackwars.load_results(db)`` returns every stored cell as a DataFrame.

The package's face is the top of the house: importing it (as every import of a submodule
does, in the parent and in each worker) installs discovery into the registry, which
imports no plugin itself (docs/contributing.md, "Layers").
"""

from stackwars import discovery as _discovery
from stackwars import registry as _registry
from stackwars.version import __version__  # noqa: F401 - the package's version, as stackwars.__version__

_registry.use_discovery(_discovery.discover, _discovery.resolve_file)


def load_results(db=None):
    """All cells of the results database as a pandas DataFrame (one row per cell)."""
    from stackwars.store.results import load_results as _load  # pandas only when asked for

    return _load(db)


def run(*workloads, **options):
    """Measure ``workloads`` as ``stackwars run`` does and return a ``Result``: the same options by their
    Python names, with the same defaults (``stackwars.api.run`` says it all)."""
    from stackwars.api import run as _run  # upward: the command line's floor (typer, rich) only when called

    return _run(*workloads, **options)


def verdict_call(run_ids=None, db=None, threshold=None):
    """``stackwars.verdict(run_ids, db=...)``: stored runs read as ``stackwars verdict`` reads them, a
    ``Result`` (``stackwars.api.verdict``). The package ``stackwars.verdict`` answers the call with this."""
    from stackwars.api import verdict as _verdict  # upward: the command line's floor (typer, rich) only when called

    return _verdict(run_ids, db=db, threshold=threshold)


def __getattr__(name):
    if name == "Model":  # imported on first use: ``import stackwars`` stays light
        from stackwars.model import Model

        return Model
    if name == "verdict":  # the package stackwars.verdict, callable: stackwars.verdict(run_ids, db=...)
        import stackwars.verdict as verdict  # the verdict's rooms (floor 7), light: no framework

        return verdict
    if name in ("Result", "VerdictRow", "RunInterrupted"):
        import stackwars.api as api  # upward: the command line's floor only when its objects are asked for

        return getattr(api, name)
    raise AttributeError(f"module 'stackwars' has no attribute {name!r}")
