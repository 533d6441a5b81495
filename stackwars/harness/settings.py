"""Process-level settings a worker applies before importing a framework.

* Thread budget: the worker is pinned (sched_setaffinity) to ``threads`` CPUs, and
  OMP/MKL/OpenBLAS are told the same number. XLA sizes its CPU thread pool from the
  schedulable CPUs, so pinning is what gives JAX and PyTorch the same budget; the
  PyTorch backend additionally calls torch.set_num_threads.
* Compile caches: Inductor/Triton caches (environment) and the JAX persistent cache
  (set by the JAX backend) point into ``cache_dir``: the cell's own folder in the run (empty
  for its first process, warm for its later ones: runner.cell_cache), a fresh one per
  process, or the user's --warm-cache directory.
* JAX on a GPU: preallocation off, so device-memory peaks mean what they say, and XLA's
  allocator may grow to ``JAX_GPU_MEMORY_FRACTION`` of the device (its own default is 75%,
  while PyTorch's caching allocator may take all of it: JAX cells would read ``oom`` at sizes
  PyTorch fits). A fraction the user set is kept; the pre-flight check holds JAX cells to it.
* JAX_PLATFORMS pins JAX to the cell's device (a CPU cell never initialises the GPU).
  ``device=None`` (the machine probe) forces no platform: JAX_PLATFORMS is removed, so
  the probe reports every platform JAX can initialise, whatever the parent's environment.
* ``env``: variables a backend needs before its framework is imported (XLA_FLAGS
  additions such as the GPU autotuning level); XLA_FLAGS are appended, others replaced.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

NO_PLATFORM = "unset: no platform forced (every platform the framework can initialise)"
# the source of a run's own compile cache of one cell (runner.cell_cache): a process that finds it
# warm is there for its steady state (only cold processes give a run's first-call figures)
RUN_CELL_CACHE = "the cell's own, kept between its processes in this run"
# what XLA's GPU allocator may take of the device's memory: all but what the CUDA context, cuDNN and
# NCCL hold outside it (about 1-2 GiB of an 80 GiB H100); XLA's own default is 0.75
JAX_GPU_MEMORY_FRACTION = "0.95"


def jax_memory_fraction() -> float:
    """The fraction a JAX worker on a GPU runs under: the user's, else ours."""
    from stackwars.parse import env_number

    value = env_number("XLA_PYTHON_CLIENT_MEM_FRACTION")
    return float(JAX_GPU_MEMORY_FRACTION) if value is None else value


def device_env(device: str | None) -> dict[str, str]:
    """The JAX allocator's variables for a worker on ``device`` (before JAX is imported)."""
    env = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    if device == "cuda":
        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION") \
            or JAX_GPU_MEMORY_FRACTION
    return env


def available_cpus() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def environment(threads: int | None, device: str | None, cache_dir: str | None,
                env: Mapping[str, str] | None = None, cpus: list[int] | None = None,
                base: Mapping[str, str] | None = None) -> tuple[dict[str, str], list[int]]:
    """The environment a worker runs under (``base``, by default this process's, with the
    settings below written in) and the CPUs it is pinned to: a pure function, so that a fork
    server (forkserver.py) can be started with exactly what its children will read at import."""
    out = dict(os.environ if base is None else base)
    cpus = sorted(set(cpus) & set(available_cpus())) or available_cpus() if cpus else available_cpus()
    n = min(threads or len(cpus), len(cpus))
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        out[var] = str(n)
    if cache_dir:
        out["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache_dir, "inductor")
        out["TRITON_CACHE_DIR"] = os.path.join(cache_dir, "triton")
    if device is None:
        out.pop("JAX_PLATFORMS", None)
    else:
        out["JAX_PLATFORMS"] = "cuda" if device == "cuda" else "cpu"
    out.update(device_env(device))
    for key, value in (env or {}).items():
        if key == "XLA_FLAGS":
            value = " ".join(filter(None, (out.get("XLA_FLAGS", ""), value)))
        out[key] = value
    return out, cpus[:n]


def apply(threads: int | None, device: str | None, cache_dir: str | None,
          env: Mapping[str, str] | None = None, cpus: list[int] | None = None,
          prepared: bool = False) -> dict[str, Any]:
    """``cpus``: the cores an executor gave this worker (its share of the host, disjoint from
    every other worker's); by default every core this process may use. ``prepared``: the
    process already runs under ``environment``'s result (a fork server's child, started with
    it): only the pinning is left to do."""
    wanted, pinned = environment(threads, device, cache_dir, env, cpus)
    if prepared:
        wanted = dict(os.environ)
    applied: dict[str, Any] = {}
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, pinned)
        applied["cpu_affinity"] = pinned
    applied["threads"] = len(pinned)
    if cache_dir:
        applied["cache_dir"] = cache_dir
    for key in set(os.environ) - set(wanted):
        del os.environ[key]
    os.environ.update(wanted)
    applied["jax_platforms"] = os.environ["JAX_PLATFORMS"] if device is not None else NO_PLATFORM
    if env:
        applied["env"] = {k: os.environ[k] for k in env}
    return applied
