"""gemm small forward: is anything besides the compiled program different between jax-jit and
torch-mlir-xla? In one process, on the same inputs:

1. jax-jit's executable (``jax.jit(f).lower(...).compile()``, called like the harness calls it);
2. torch-mlir-xla's: PyTorch's program exported to StableHLO by stackwars' exporter, compiled
   with ``client.compile_and_load`` and executed with ``execute_sharded``, as the backend does;
3. JAX's own StableHLO compiled and executed the second way (isolates the call path from
   the program).

Writes both optimized HLO modules next to ``--out`` and prints the median of round medians,
the three timed in alternation (round robin, 20 calls a round). Run from the repository:

    .venv/bin/python scripts/same-compiler-gemm.py --out results/verdict-cpu/same-compiler-gemm
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True, help="prefix for the .hlo files")
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()

    import jax
    import jax.numpy as jnp
    import numpy as np

    from stackwars import registry
    from stackwars.ir.torch_export import export

    wl = registry.workload("gemm")
    cfg = wl.config("small", {})
    params, batch = wl.init(cfg, 0)
    dev = jax.devices("cpu")[0]
    p = {k: jax.device_put(v.astype(np.float32), dev) for k, v in params.items()}
    b = {k: jax.device_put(v.astype(np.float32), dev) for k, v in batch.items()}
    lowered = jax.jit(lambda p, b: jnp.matmul(b["a"], p["b"], precision="highest")).lower(p, b)
    compiled = lowered.compile()
    exp, _ = export(wl, cfg, "forward", params, batch, "float32", "float32", {"workload": "gemm"})
    exe_torch = dev.client.compile_and_load(exp.text, [dev])
    exe_jax = dev.client.compile_and_load(lowered.as_text(), [dev])
    args_torch = [jax.device_put(params["b"].astype(np.float32), dev)] + \
        [jax.device_put(batch[k].astype(np.float32), dev) for k in sorted(batch)]
    args_jax = [p["b"], b["a"]]  # jit drops the unused target; PyTorch's export keeps it as an argument
    args.out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{args.out}.jax-jit.hlo").write_text(compiled.as_text())
    Path(f"{args.out}.torch-mlir-xla.hlo").write_text(exe_torch.hlo_modules()[0].to_string())
    print("torch-mlir-xla arguments:", exp.arg_names, "| jax-jit arguments: p['b'], b['a']")
    runs = {
        "jax-jit (jax.stages.Compiled)": lambda: compiled(p, b),
        "torch-mlir-xla (compile_and_load)": lambda: exe_torch.execute_sharded(args_torch)
        .disassemble_into_single_device_arrays()[0][0],
        "JAX's StableHLO via compile_and_load": lambda: exe_jax.execute_sharded(args_jax)
        .disassemble_into_single_device_arrays()[0][0],
    }
    for fn in runs.values():
        for _ in range(5):
            jax.block_until_ready(fn())
    rounds: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.rounds):
        for k, fn in runs.items():
            ts = []
            for _ in range(20):
                t0 = time.perf_counter()
                jax.block_until_ready(fn())
                ts.append(time.perf_counter() - t0)
            rounds[k].append(statistics.median(ts))
    for k, v in rounds.items():
        print(f"{k:40s} median of {args.rounds} round medians {statistics.median(v) * 1e3:.3f} ms "
              f"(min {min(v) * 1e3:.3f}, max {max(v) * 1e3:.3f})")


if __name__ == "__main__":
    main()
