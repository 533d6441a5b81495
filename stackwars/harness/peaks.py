"""Achievable device peaks, measured (not datasheet): a large GEMM and a streaming pass.

``measure_peak`` runs inside a worker for one framework, device and dtype and returns
the rate of a steady state timed with the same ``Timer`` as every cell:

* GEMM: C = A @ B on n x n matrices, 2n^3 FLOPs per call;
* stream: y = x + 1 over a large buffer, counting bytes read plus bytes written.

Each is measured in ``ROUNDS`` rounds; the peak is the best round's median (a peak is what
the machine can do, so a round slowed by something else must not lower it), and every
round records what other processes took of the worker's CPUs meanwhile (``contention``). A
CPU measurement whose every round was contended is flagged: a peak measured under load
(106.5 GFLOP/s stored where a quiet machine gives 173) made half the cells' rooflines read
over 100%. The run keeps, per dtype, the higher of the two frameworks' figures.
"""

from __future__ import annotations

import math
from typing import Any

from stackwars.harness.timer import Timer

SIZES = {  # (gemm n, stream elements)
    ("cpu", "float32"): (2048, 64 * 2**20),
    ("cpu", "bfloat16"): (1024, 64 * 2**20),
    ("cuda", "float32"): (8192, 256 * 2**20),
    ("cuda", "bfloat16"): (8192, 256 * 2**20),
}


ROUNDS = 3
SAMPLES = (3, 10)  # samples a round: 10, or as few as 3 where a call is slow (see _rate)


def _rate(timer: Timer, work: float, min_time_s: float, rounds: int = ROUNDS) -> dict[str, Any]:
    """The best round's median rate. A round takes ``min_time_s / rounds`` and at least 3
    samples, 10 where they fit: a call far slower than the budget (PyTorch's bfloat16 GEMM
    on a CPU without bfloat16 instructions: 2.6 s a call at n = 1024 on a 2-core Zen 3 VM)
    otherwise took 30 samples after 4 calls before them, 88 s for that GEMM alone, where 9
    after 2 keep a median of 3 in every round."""
    from stackwars.harness.contention import ForeignLoad

    first, _ = timer.once()  # compile / first touch
    est = min(timer.warmup(1 if first > min_time_s else 3))
    number = Timer.choose_number(est, 1e-3)
    per_round_s = min_time_s / rounds
    low, high = SAMPLES
    min_samples = max(low, min(high, math.ceil(per_round_s / (est * number)) if est > 0 else high))
    per_round = []
    for _ in range(rounds):
        load = ForeignLoad().start()
        steady = timer.steady(min_samples=min_samples, min_time_s=per_round_s, max_samples=10_000, number=number)
        others = load.stop()
        samples = sorted(steady.samples)
        per_round.append({"median_per_s": work / samples[len(samples) // 2], "best_per_s": work / samples[0],
                          "samples": len(samples), "contention": others["fraction"],
                          "contended": others["contended"]})
    best = max(per_round, key=lambda r: r["median_per_s"])
    return {"median_per_s": best["median_per_s"], "best_per_s": max(r["best_per_s"] for r in per_round),
            "samples": sum(r["samples"] for r in per_round), "rounds": per_round,
            "contended": all(r["contended"] for r in per_round)}


def _torch(device: str, dtype: str, precision: str, threads: int | None, min_time_s: float) -> dict[str, Any]:
    import torch

    if threads:
        torch.set_num_threads(threads)
    torch.set_float32_matmul_precision("highest" if precision == "float32" else "high")
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    dt = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
    n, elems = SIZES[(device, dtype)]
    dev = torch.device(device)
    sync = (lambda outs: torch.cuda.synchronize(dev)) if device == "cuda" else (lambda outs: None)
    g = torch.Generator(device="cpu").manual_seed(0)
    a, b = (torch.randn(n, n, generator=g).to(dev, dt) for _ in range(2))
    c = torch.empty(n, n, device=dev, dtype=dt)
    gemm = _rate(Timer(lambda: torch.mm(a, b, out=c), sync), 2.0 * n ** 3, min_time_s)
    x = torch.randn(elems, generator=g).to(dev, dt)
    y = torch.empty_like(x)
    stream = _rate(Timer(lambda: torch.add(x, 1.0, out=y), sync), 2.0 * x.numel() * x.element_size(), min_time_s)
    return {"gemm_n": n, "gemm": gemm, "stream_elements": elems, "stream": stream}


def _jax(device: str, dtype: str, precision: str, min_time_s: float) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    import numpy as np

    jax.config.update("jax_default_matmul_precision", "float32" if precision == "float32" else "tensorfloat32")
    dt = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}[dtype]
    n, elems = SIZES[(device, dtype)]
    dev = jax.devices("gpu" if device == "cuda" else "cpu")[0]
    rng = np.random.default_rng(0)
    a, b = (jax.device_put(rng.standard_normal((n, n), dtype=np.float32).astype(dt), dev) for _ in range(2))
    mm = jax.jit(lambda a, b: a @ b)
    sync = jax.block_until_ready
    gemm = _rate(Timer(lambda: mm(a, b), sync), 2.0 * n ** 3, min_time_s)
    x = jax.device_put(rng.standard_normal(elems, dtype=np.float32).astype(dt), dev)
    add = jax.jit(lambda x: x + 1)
    stream = _rate(Timer(lambda: add(x), sync), 2.0 * x.size * x.dtype.itemsize, min_time_s)
    return {"gemm_n": n, "gemm": gemm, "stream_elements": elems, "stream": stream}


def measure_peak(framework: str, device: str, dtype: str, matmul_precision: str = "float32",
                 threads: int | None = None, min_time_s: float = 1.0) -> dict[str, Any]:
    if framework == "torch":
        out = _torch(device, dtype, matmul_precision, threads, min_time_s)
    elif framework == "jax":
        out = _jax(device, dtype, matmul_precision, min_time_s)
    else:
        raise ValueError(f"unknown framework {framework!r}")
    return {"status": "ok", "framework": framework, "device": device, "dtype": dtype,
            "matmul_precision": matmul_precision, **out}
