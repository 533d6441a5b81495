"""stackwars: JAX or PyTorch, which execution mode, for this workload, and why.

Python API: ``stackwars.Model`` describes your own model (a PyTorch module, a JAX model or
both) for ``stackwars run file.py:NAME``; ``stackwars.load_results(db)`` returns every stored
cell as a DataFrame.

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


def __getattr__(name):
    if name == "Model":  # imported on first use: ``import stackwars`` stays light
        from stackwars.model import Model

        return Model
    raise AttributeError(f"module 'stackwars' has no attribute {name!r}")
