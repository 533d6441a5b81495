"""Worker target of `stackwars ir`: dump the requested stages of one cell's program."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from stackwars import registry
from stackwars.records import CellSpec
from stackwars.workloads.base import param_dtype, round_all


def dump_cell(spec: Mapping[str, Any], stages: Mapping[str, list[str]], out_dir: str,
              matmul_precision: str = "float32", seed: int = 0) -> dict[str, Any]:
    """``stages``: framework -> stage names. Writes one file per stage into ``out_dir``."""
    cell = CellSpec.from_dict(spec)
    workload = registry.workload(cell.workload)
    cfg = workload.config(cell.preset, dict(cell.overrides))
    params, batch = workload.init(cfg, seed)
    params = round_all(params, param_dtype(cell.dtype, cell.phase))
    batch = round_all(batch, cell.dtype)
    settings = {"matmul_precision": matmul_precision}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"status": "ok", "cell": cell.key, "dir": str(out)}
    if stages.get("jax"):
        from stackwars.ir import jax_ir
        full = jax_ir.dump(workload, cfg, cell.phase, params, batch, cell.device, cell.dtype, settings, out)
        result["jax"] = {s: full[s] for s in stages["jax"]}
    if stages.get("torch"):
        from stackwars.ir import torch_ir
        result["torch"] = torch_ir.dump(workload, cfg, cell.phase, params, batch, cell.device, cell.dtype,
                                        settings, out, stages["torch"])
    (out / "summary.json").write_text(json.dumps(result, indent=1, default=str))
    return result
