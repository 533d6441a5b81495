"""stackwars: JAX or PyTorch, which execution mode, for this workload, and why.

Python API: ``stackwars.Model`` describes your own model (a PyTorch module, a JAX model or
both) for ``stackwars run file.py:NAME``; ``stackwars.load_results(db)`` returns every stored
cell as a DataFrame.
"""

__version__ = "0.1.0"


def load_results(db=None):
    """All cells of the results database as a pandas DataFrame (one row per cell)."""
    from stackwars.store.results import load_results as _load

    return _load(db)


def __getattr__(name):
    if name == "Model":  # imported on first use: ``import stackwars`` stays light
        from stackwars.model import Model

        return Model
    raise AttributeError(f"module 'stackwars' has no attribute {name!r}")
