"""Autotuning study: where jax-jit's compile seconds go on a GPU, and what they buy.

    stackwars study autotune gemm --preset paper --device cuda

XLA does not report its autotuning time apart from the rest of compilation, so the study
measures it by difference: the same cell compiled with XLA's default autotuning
(``--xla_gpu_autotune_level=4``) and with autotuning off (level 0), each under exact float32
matmuls and under TF32 (JAX's own default on Ampere/Hopper GPUs). Every variant is a cell
in a fresh worker with cold caches; its compile time comes from the AOT stages
(``compile_s``) and its run time from the steady state. ``torch-compile`` (and, when asked,
``torch-compile-max-autotune``, which autotunes its GEMM templates) is measured under both
precisions beside it.

Per precision the findings give autotuning's cost (compile with it minus compile without)
and its gain (steady state without over with). The autotuning flags act on GPUs only: on a
CPU the two levels compile the same program, and the study says so rather than reading
noise as an effect.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from stackwars.errors import SpecError
from stackwars.records import CellSpec, Measurement, MeasureConfig

PRECISIONS = ("float32", "tf32")
JAX_LEVELS = (None, 0)  # XLA's default (4), off
BACKENDS = ("jax-jit", "torch-compile", "torch-compile-max-autotune")
ROW_KEYS = ("backend", "autotune", "matmul_precision", "compile_s", "first_call_s", "steady_median_s", "status")


def plan(workload: str, preset: str, phase: str, device: str, dtype: str,
         backends: Sequence[str]) -> list[tuple[CellSpec, str]]:
    """(cell, matmul precision) pairs: the variants of each backend."""
    bad = [b for b in backends if b not in BACKENDS]
    if bad:
        raise SpecError(f"the autotune study covers {', '.join(BACKENDS)}; got {', '.join(bad)}")
    out = []
    for precision in PRECISIONS:
        for b in backends:
            levels = JAX_LEVELS if b == "jax-jit" else (None,)
            for level in levels:
                options = {} if level is None else {"xla_autotune_level": level}
                out.append((CellSpec(workload, preset, phase, b, device, dtype, options=tuple(options.items())),
                            precision))
    return out


def autotune_label(spec: CellSpec) -> str:
    level = dict(spec.options).get("xla_autotune_level")
    if spec.backend == "jax-jit":
        return "XLA default (4)" if level is None else f"level {level}" + (" (off)" if level == 0 else "")
    return "max-autotune" if spec.backend == "torch-compile-max-autotune" else "none (Inductor default)"


def row(spec: CellSpec, precision: str, m: Measurement) -> dict[str, Any]:
    r = m.to_row()
    compile_s = None
    if m.compile is not None:
        compile_s = (m.compile.breakdown or {}).get("compile_s", m.compile.total_s)
    return {"backend": spec.backend, "autotune": autotune_label(spec), "matmul_precision": precision,
            "compile_s": compile_s, "first_call_s": m.first_call_s, "steady_median_s": r["steady_median_s"],
            "status": m.status, "error": m.error, "variant": f"{autotune_label(spec)}/{precision}",
            "xla_gpu_flags": (m.settings.get("applied") or {}).get("xla_gpu_flags")}


def run(cells: Sequence[tuple[CellSpec, str]], config: MeasureConfig, probe: Mapping[str, Any],
        measure: Callable[..., Measurement], on_row: Callable[[dict[str, Any]], None] | None = None
        ) -> list[dict[str, Any]]:
    """``measure(spec, config, probe, peak) -> Measurement``: runner.measure_one, injected."""
    rows = []
    for spec, precision in cells:
        r = row(spec, precision, measure(spec, replace(config, matmul_precision=precision), probe, None))
        rows.append(r)
        if on_row:
            on_row(r)
    return rows


def findings(rows: Sequence[Mapping[str, Any]], device: str) -> list[str]:
    """What autotuning costs and buys, per precision, from the jax-jit rows."""
    out = []
    for precision in PRECISIONS:
        by = {r["autotune"]: r for r in rows if r["backend"] == "jax-jit" and r["matmul_precision"] == precision
              and r["status"] in ("ok", "parity_fail")}
        on, off = by.get("XLA default (4)"), by.get("level 0 (off)")
        if not on or not off or on["compile_s"] is None or off["compile_s"] is None:
            continue
        cost = on["compile_s"] - off["compile_s"]
        gain = off["steady_median_s"] / on["steady_median_s"] if on["steady_median_s"] else None
        if device != "cuda":
            out.append(f"{precision}: compile {on['compile_s']:.3f} s (default) vs {off['compile_s']:.3f} s (level 0); "
                       "XLA's autotuning flags act on GPUs only, so on a CPU both compile the same program and "
                       "any difference is noise")
            continue
        text = (f"{precision}: XLA's autotuning adds {cost:.2f} s to jax-jit's compile "
                f"({on['compile_s']:.2f} s vs {off['compile_s']:.2f} s without)")
        if gain is not None:
            text += f"; without it the step runs {gain:.2f}x as long"
        out.append(text)
    if device != "cuda" and not out:
        out.append("the autotuning flags act on GPUs only")
    return out
