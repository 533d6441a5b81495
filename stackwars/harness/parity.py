"""Compare a cell's outputs with the workload's float64 reference.

Metric, per output: max|out - ref| / scale, where scale = max|ref| of that output, but
never below ``floor`` x the largest max|ref| among outputs of the same group (the text
before the first '.': all ``update.*`` outputs form one group). The floor exists for
outputs that are analytically zero, such as the gradient of attention's key bias
(softmax ignores a constant added to a row of scores): both sides then hold pure
rounding noise, which no relative measure of that output alone can judge. The cell's
figure is the maximum over outputs; NaN or a shape mismatch is an infinite error.

AdamW: the first step moves each parameter by about -lr * sign(gradient), so an element
whose gradient lies below the float noise floor has no defined direction (an analytically
zero gradient becomes +-lr on either side). A reference may therefore supply its
gradients (``grad.<name>``); elements of ``update.<name>`` whose reference gradient is at
most ``tolerance`` x the tensor's largest are left out, and the fraction left out is
recorded. A whole row (all that one index of the first axis holds, more than one element)
with exactly zero gradient in a tensor whose gradient is not noise (an embedding row no
input used) stays in: weight decay alone moves it, deterministically. A lone exact zero
does not: cancellation gives 0.0 in float64 where float32 leaves 1e-10 of either sign.
Everything else must agree as usual, so a wrong gradient sign still fails.
The floor is relative to the larger of the tensor's own largest gradient and 1% of the
model's largest (a tensor whose gradient is analytically zero, such as attention's key
bias, holds only noise), and never below ``grad_floor`` when the reference gives one
(near AdamW's epsilon, g / (|g| + eps) is sensitive to the gradient's rounding).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping

import numpy as np

from stackwars.records import Parity
from stackwars.workloads.base import host_threads

FLOOR = 0.05


def _group(key: str) -> str:
    return key.split(".", 1)[0]


CHUNK = 1 << 18  # elements looked at at once: float64 temporaries of 2 MiB, in a core's cache


def _workers() -> int:
    return host_threads()


def _in_threads(part: Any, starts: range) -> list:
    """``part`` over each slice start, in threads where there are several (numpy releases the
    GIL). Slices of CHUNK elements: on the 2-core VM the comparison of GPT-2's 412 million
    logits took 0.50-0.65 s in slices of 2 MiB against 1.04-1.28 s in slices of 32 MiB and
    more, and max|ref| 0.6 s in one thread."""
    if len(starts) > 1 and _workers() > 1:
        with ThreadPoolExecutor(max_workers=min(_workers(), len(starts))) as pool:
            return list(pool.map(part, starts))
    return [part(i) for i in starts]


def _absmax(x: np.ndarray) -> float:
    """max|x| a slice at a time, without an |x| temporary; NaN where x holds one."""
    if not np.size(x):
        return 0.0
    flat = np.ravel(x)

    def part(i: int) -> float:
        c = flat[i:i + CHUNK]
        return float(max(np.max(c), -np.min(c)))

    found = _in_threads(part, range(0, flat.size, CHUNK))
    return float("nan") if any(math.isnan(v) for v in found) else max(found)


def _max_error(out: np.ndarray, ref: np.ndarray, g: np.ndarray | None, threshold: float | None,
               row_rule: bool) -> tuple[float | None, int]:
    """max|out - ref| in float64 over the elements kept (all, or those whose reference
    gradient exceeds ``threshold``, plus whole all-zero rows with ``row_rule``), and how many
    were kept; None when ``out`` holds NaN or infinity (``ref`` is finite: the caller checks).
    Done a slice at a time, so the temporaries stay in cache (a fresh worker also pays a page
    fault for every page it allocates), and the slices in threads (``_in_threads``). The row
    rule needs whole rows (a slice is whole rows of the first axis); without it the flat data
    is cut, since a tensor with few long rows (GPT-2's logits: 8 rows of 51 million) cut by
    rows made 400 MB temporaries and fed 8 threads at most."""
    rows = out.shape[0] if out.ndim else 1
    if not row_rule:
        rows = out.size if out.size else 1  # one element a row: the slices cut the flat data
    o2, r2 = out.reshape(rows, -1), ref.reshape(rows, -1)
    g2 = g.reshape(rows, -1) if g is not None else None
    step = max(1, CHUNK // max(1, o2.shape[1]))

    def part(i: int) -> tuple[float, int]:
        err = np.subtract(o2[i:i + step], r2[i:i + step], dtype=np.float64)
        np.abs(err, out=err)
        kept = err.size
        if g2 is not None:
            gc = np.abs(g2[i:i + step])
            keep = gc > threshold
            if row_rule:
                keep |= np.all(gc == 0, axis=1, keepdims=True)
            kept = int(np.count_nonzero(keep))
            # left-out elements count as agreeing; NaN or infinity times 0 is still NaN, on purpose (the
            # caller reports it), so numpy's "invalid value" warning would only say it again in the log
            with np.errstate(invalid="ignore"):
                err *= keep
        return (float(np.max(err)) if err.size else 0.0), kept

    parts = _in_threads(part, range(0, rows, step))
    kept = sum(k for _, k in parts)
    # a NaN anywhere in the output makes its slice's max NaN, an infinity makes it infinite (and
    # Python's max() would pass over a NaN: each slice is looked at)
    if not all(math.isfinite(d) for d, _ in parts):
        return None, kept
    return max((d for d, _ in parts), default=0.0), kept


def compare(outputs: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray],
            tolerance: float, floor: float = FLOOR, reference_name: str = "float64 numpy",
            tolerances: Mapping[str, float] | None = None) -> Parity:
    """One tensor at a time and a slice of it at a time, in float64 (``out - ref`` promotes;
    neither side is copied whole): a model's train step compares hundreds of millions of
    elements.

    ``tolerances``: each output's own (an output not in it has ``tolerance``); the cell's figure
    is then the output nearest its own tolerance (largest error / tolerance), whose error and
    tolerance the Parity carries, so that one rule (error <= tolerance) still judges it and a
    stored row. ``tolerance`` also sets AdamW's masking threshold (above)."""
    grads = {k[len("grad."):]: v for k, v in reference.items() if k.startswith("grad.")}
    abs_floor = float(reference.get("grad_floor", 0.0))
    gmaxes = {k: _absmax(g) for k, g in grads.items()}
    model_max = max(gmaxes.values(), default=0.0)
    reference = {k: v for k, v in reference.items() if not k.startswith("grad.") and k != "grad_floor"}
    excluded: dict[str, float] = {}
    missing = sorted(set(reference) - set(outputs))
    extra = sorted(set(outputs) - set(reference))
    per: dict[str, float] = {}
    why: list[str] = []  # what made an output fail outright (not a figure against the tolerance)
    for k in missing + extra:
        per[k] = float("inf")
        why.append(f"{k}: {'missing from the outputs' if k in missing else 'not in the reference'}")
    ref_max = {k: _absmax(np.asarray(r)) for k, r in reference.items()}
    group_scale: dict[str, float] = {}
    for k, m in ref_max.items():
        group_scale[_group(k)] = max(group_scale.get(_group(k), 0.0), m)
    for k in sorted(set(reference) & set(outputs)):
        out, ref = np.asarray(outputs[k]), np.asarray(reference[k])
        if out.shape != ref.shape:
            per[k] = float("inf")
            why.append(f"{k}: shape {out.shape} against the reference's {ref.shape}")
            continue
        if not math.isfinite(ref_max[k]):  # NaN or infinity in the reference: nothing to measure against
            per[k] = float("inf")
            why.append(f"{k}: the reference holds NaN or infinity")
            continue
        scale = max(ref_max[k], floor * group_scale[_group(k)])
        g = grads.get(k[len("update."):]) if k.startswith("update.") else None
        threshold = row_rule = None
        if g is not None and g.shape == ref.shape and g.size:
            # a direction the arithmetic can resolve, or a whole untouched row (module docstring)
            gmax = gmaxes[k[len("update."):]]
            threshold = max(tolerance * max(gmax, 0.01 * model_max), abs_floor)
            # a row is everything one index of the first axis holds (an embedding row, an output
            # unit, a convolution filter): a 1x1 convolution's last axis would make every lone
            # zero a "row"
            row_rule = g.ndim >= 2 and g[0].size > 1 and gmax > 0.01 * model_max
        diff, kept = _max_error(out, ref, g if threshold is not None else None, threshold, bool(row_rule))
        if diff is None:  # NaN or infinity in the output
            per[k] = float("inf")
            why.append(f"{k}: the output holds NaN or infinity")
            continue
        if threshold is not None:
            excluded[k] = float(1.0 - kept / out.size)
        per[k] = diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))
    worst = max(per.values()) if per else None
    metric = f"max|out-ref| / max(max|ref|, {floor:g} x group max|ref|), max over outputs"
    binding, own = "", {}
    if tolerances is not None and per:
        own = {k: float(tolerances.get(k, tolerance)) for k in per}
        # the output nearest its own tolerance; an error or a tolerance that is not finite, or a
        # tolerance of zero, binds first (each is a failure)
        binding = max(sorted(per), key=lambda k: per[k] / own[k] if math.isfinite(per[k]) and math.isfinite(own[k])
                      and own[k] > 0 else math.inf)
        worst, tolerance = per[binding], own[binding]
        metric = (f"max|out-ref| / max(max|ref|, {floor:g} x group max|ref|), each output against its own "
                  f"tolerance; the figure is the output nearest its tolerance ({binding})")
    if excluded:
        metric += "; AdamW updates compared where |reference gradient| > tolerance x its max"
    if not math.isfinite(tolerance):
        why.append(f"the tolerance is not finite ({tolerance})")
    return Parity(max_rel_err=worst, tolerance=tolerance, per_output=per, metric=metric,
                  reference=reference_name, excluded=excluded, failure="; ".join(why), tolerances=own,
                  binding=binding)
