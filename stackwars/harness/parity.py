"""Compare a cell's outputs with the workload's float64 reference.

Metric, per output: max|out - ref| / scale, where scale = max|ref| of that output, but
never below ``floor`` x the largest max|ref| among outputs of the same group (the text
before the first '.': all ``update.*`` outputs form one group). The floor exists for
outputs that are analytically zero, such as the gradient of attention's key bias
(softmax ignores a constant added to a row of scores): both sides then hold pure
rounding noise, which no relative measure of that output alone can judge. The cell's
figure is the maximum over outputs; NaN or a shape mismatch is an infinite error.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from stackwars.records import Parity

FLOOR = 0.05


def _group(key: str) -> str:
    return key.split(".", 1)[0]


def compare(outputs: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray],
            tolerance: float, floor: float = FLOOR) -> Parity:
    missing = sorted(set(reference) - set(outputs))
    extra = sorted(set(outputs) - set(reference))
    per: dict[str, float] = {}
    for k in missing + extra:
        per[k] = float("inf")
    group_scale: dict[str, float] = {}
    for k, r in reference.items():
        g = _group(k)
        group_scale[g] = max(group_scale.get(g, 0.0), float(np.max(np.abs(r))) if np.size(r) else 0.0)
    for k in sorted(set(reference) & set(outputs)):
        out, ref = np.asarray(outputs[k], dtype=np.float64), np.asarray(reference[k], dtype=np.float64)
        if out.shape != ref.shape or not np.all(np.isfinite(out)):
            per[k] = float("inf")
            continue
        scale = max(float(np.max(np.abs(ref))) if ref.size else 0.0, floor * group_scale[_group(k)])
        diff = float(np.max(np.abs(out - ref))) if ref.size else 0.0
        per[k] = diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))
    worst = max(per.values()) if per else None
    return Parity(max_rel_err=worst, tolerance=tolerance, per_output=per,
                  metric=f"max|out-ref| / max(max|ref|, {floor:g} x group max|ref|), max over outputs")
