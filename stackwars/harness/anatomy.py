"""Memory anatomy of a train step: parameters, gradients, optimizer state, inputs,
activations and temporaries, each with how it was obtained.

Every part says ``how``: ``measured`` (bytes of live arrays, a compiler's memory analysis,
or the PyTorch profiler's categorised memory timeline) or ``analytical`` (from the shapes:
one gradient per parameter). The
parts add up to ``sum_bytes``; where an independent peak exists (a device allocator's
peak, a compiler's total) it is set beside the sum with the relative gap and the margin
the gap is held to. The framework code lives in the backends; this module only
assembles and checks.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

ORDER = ("parameters", "gradients", "optimizer_state", "state", "inputs", "activations", "temporaries", "outputs",
         "unattributed")

MEASURED, ANALYTICAL = "measured", "analytical"


def part(nbytes: int | float, how: str, source: str) -> dict[str, Any]:
    return {"bytes": int(nbytes), "how": how, "source": source}


def nbytes(arrays: Iterable[Any]) -> int:
    """Bytes of live arrays (numpy, JAX or torch: anything with ``nbytes`` or numel x element size)."""
    total = 0
    for a in arrays:
        if a is None:
            continue
        n = getattr(a, "nbytes", None)
        total += int(n) if n is not None else int(a.numel() * a.element_size())
    return total


def assemble(parts: Mapping[str, Mapping[str, Any]], source: str, peak: int | None = None,
             peak_source: str | None = None, margin: float | None = None,
             not_measured: Iterable[str] = ()) -> dict[str, Any]:
    """The anatomy record: parts in a fixed order, their sum, and the check against ``peak``."""
    ordered = {k: dict(parts[k]) for k in ORDER if k in parts}
    ordered.update({k: dict(v) for k, v in parts.items() if k not in ordered})
    total = sum(p["bytes"] for p in ordered.values())
    out: dict[str, Any] = {"source": source, "parts": ordered, "sum_bytes": total, "not_measured": list(not_measured)}
    if peak:
        gap = (total - peak) / peak
        out["peak"] = {"bytes": int(peak), "source": peak_source, "relative_gap": gap, "margin": margin,
                       "within_margin": None if margin is None else abs(gap) <= margin}
    return out
