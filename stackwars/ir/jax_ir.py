"""JAX's forms of a cell's step: jaxpr -> StableHLO (before XLA) -> optimized HLO (after).

The function is the one ``jax-jit`` compiles (``JaxBackend.program``), taken through
the AOT stages: ``jit(f).trace(*args)`` (jaxpr), ``.lower()`` (StableHLO text),
``.compile()`` (optimized HLO text, XLA's cost and memory analyses).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stackwars import registry
from stackwars.ir import stats

STAGES = ("jaxpr", "stablehlo", "hlo")


def dump(workload, cfg, phase, params, batch, device, dtype, settings, out: Path) -> dict[str, Any]:
    import jax

    backend = registry.backend("jax-jit").load()
    backend.configure(settings)
    prog = backend.program(workload, cfg, phase, params, batch, device, dtype)
    traced = jax.jit(prog.fn, donate_argnums=prog.donate).trace(*prog.args)
    lowered = traced.lower()
    compiled = lowered.compile()
    texts = {"jaxpr": str(traced.jaxpr), "stablehlo": lowered.as_text(), "hlo": compiled.as_text()}
    files = {"jaxpr": "jax.jaxpr.txt", "stablehlo": "jax.stablehlo.mlir", "hlo": "jax.hlo.txt"}
    for stage, text in texts.items():
        (out / files[stage]).write_text(text)
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    mem = compiled.memory_analysis()
    analysis = {"cost": {k: float(v) for k, v in (cost or {}).items() if not k.startswith("utilization")},
                "memory": {f: int(getattr(mem, f)) for f in dir(mem) if f.endswith("_in_bytes")} if mem else {}}
    (out / "jax.analysis.json").write_text(json.dumps(analysis, indent=1))
    return {
        "jaxpr": {**stats.jaxpr(traced.jaxpr), "file": files["jaxpr"]},
        "stablehlo": {**stats.stablehlo(texts["stablehlo"]), "file": files["stablehlo"]},
        "hlo": {**stats.hlo(texts["hlo"]), "file": files["hlo"], "xla_flops": analysis["cost"].get("flops"),
                "xla_temp_bytes": analysis["memory"].get("temp_size_in_bytes")},
    }
