"""Environment fingerprint of a run, taken in the parent without importing a framework
(framework-side facts come from the probe worker)."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping

import psutil

from stackwars.version import __version__
from stackwars.harness.settings import available_cpus

PACKAGES = ("numpy", "torch", "jax", "jaxlib", "flax", "optax", "torch-mlir", "pandas")
# what a run's numbers depend on beside the code: among them the OpenMP runtimes' threads, how they wait between
# parallel regions (libgomp's OMP_WAIT_POLICY and GOMP_SPINCOUNT, Intel's KMP_BLOCKTIME: a PyTorch process's idle
# threads spin or sleep by them, and the suite itself runs passive) and where they are placed (OMP_PROC_BIND,
# OMP_PLACES, GOMP_CPU_AFFINITY, KMP_AFFINITY); and each framework's allocator settings (memory and speed)
ENV_VARS = ("STACKWARS_PLUGINS", "XLA_FLAGS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT",
            "KMP_BLOCKTIME", "OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY", "KMP_AFFINITY", "CUDA_VISIBLE_DEVICES",
            "JAX_PLATFORMS", "TORCHINDUCTOR_CACHE_DIR", "PYTORCH_CUDA_ALLOC_CONF", "XLA_PYTHON_CLIENT_PREALLOCATE",
            "XLA_PYTHON_CLIENT_ALLOCATOR", "XLA_PYTHON_CLIENT_MEM_FRACTION")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# instruction sets that decide a kernel's speed: PyTorch's bfloat16 GEMM ran at 957 GFLOP/s on
# one 2-core "AMD EPYC" VM and at 0.9 on another of that name with AVX2 only (the first's flags
# were not recorded; its rate needs bfloat16 dot products such as AVX-512's)
ISA_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
             "asimd", "sve", "sve2", "bf16", "i8mm")


def _cpu_kind(cpuinfo: str | None = None) -> str | None:
    """What tells apart two CPUs that give one model name: a hypervisor may show only "AMD EPYC"
    for hosts generations apart. The vendor's family and model numbers (x86) or implementer and
    part (Arm), and which of ``ISA_FLAGS`` it has, from /proc/cpuinfo's first processor; None
    where there is no such file."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as f:
                cpuinfo = f.read()
        except OSError:
            return None
    fields: dict[str, str] = {}
    for line in cpuinfo.strip().split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    if "cpu family" in fields:
        ident = f"family {fields['cpu family']} model {fields.get('model', '?')}"
    elif "CPU part" in fields:
        ident = f"implementer {fields.get('CPU implementer', '?')} part {fields['CPU part']}"
    else:
        return None
    have = set((fields.get("flags") or fields.get("Features") or "").split())
    return f"{ident}; {' '.join(f for f in ISA_FLAGS if f in have) or 'none of ' + '/'.join(ISA_FLAGS[:2])}"


def _version(pkg: str) -> str | None:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git(root: Path | None = None) -> tuple[str | None, bool | None]:
    """The project's own commit, and whether its tracked files differ from it; (None, None)
    where the project is not a git checkout of its own. A checkout copied without its .git
    into another repository's folder must not report that repository's commit (an H100 run
    named another project's commit this way): the git top level must be the project's root."""
    root = (root or Path(__file__).resolve().parents[2]).resolve()
    try:
        top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()
        if not top or Path(top).resolve() != root:
            return None, None
        rev = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        # --no-optional-locks: `git status` otherwise refreshes the index under .git/index.lock, and a
        # process killed meanwhile (a cell's timeout, a test's SIGKILL) leaves the lock behind, which
        # then refuses the user's next `git commit`
        dirty = subprocess.run(["git", "--no-optional-locks", "-C", str(root), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True, timeout=10,
                               check=True).stdout.strip()
        return rev, bool(dirty)
    except (OSError, subprocess.SubprocessError):
        return None, None


def _gpus() -> tuple[list[dict[str, Any]], str | None, str | None]:
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver, no library, no GPU: all mean "none"
        return [], None, None
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            gpus.append({"name": pynvml.nvmlDeviceGetName(h),
                         "memory_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(h).total)})
        return gpus, str(driver), f"{cuda // 1000}.{cuda % 1000 // 10}"
    finally:
        pynvml.nvmlShutdown()


def device_kind(gpu: str | None) -> dict[str, Any]:
    """The kind of machine a cell runs on, taken where it runs: the CPU (model, logical CPUs)
    and, for a GPU cell, the name NVML gives GPU ``gpu`` (an index as ``CUDA_VISIBLE_DEVICES``
    takes it), and the framework versions installed there. Two cells of one run on different
    kinds are not comparable (Env.machine)."""
    name = None
    if gpu is not None:
        try:
            import pynvml
            pynvml.nvmlInit()
            try:
                handle = (pynvml.nvmlDeviceGetHandleByUUID(gpu) if not gpu.isdigit()
                          else pynvml.nvmlDeviceGetHandleByIndex(int(gpu)))
                name = pynvml.nvmlDeviceGetName(handle)
            finally:
                pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - no NVML here: the GPU's kind is unknown, not invented
            name = None
    return {"cpu_model": _cpu_model(), "cpu_kind": _cpu_kind(), "cpu_count_logical": psutil.cpu_count(logical=True),
            "gpu": name, "versions": {p: _version(p) for p in ("torch", "jax")}}


def fingerprint(thread_budget: int | None = None, probe: Mapping[str, Any] | None = None) -> dict[str, Any]:
    rev, dirty = _git()
    gpus, driver, cuda = _gpus()
    versions = {"python": platform.python_version(), "stackwars": __version__}
    versions.update({p: _version(p) for p in PACKAGES})
    cpus = available_cpus()
    return {
        "cpu_model": _cpu_model(),
        "cpu_kind": _cpu_kind(),
        "cpu_count_logical": psutil.cpu_count(logical=True),
        "cpu_count_physical": psutil.cpu_count(logical=False),
        "cpus_available": len(cpus),
        "thread_budget": thread_budget or len(cpus),
        "memory_total_bytes": psutil.virtual_memory().total,
        "platform": platform.platform(),
        "python_executable": sys.executable,
        "versions": versions,
        "env": {k: os.environ[k] for k in ENV_VARS if k in os.environ},
        "gpus": gpus, "nvidia_driver": driver, "cuda_driver": cuda,
        "git_revision": rev, "git_dirty": dirty,
        "probe": dict(probe or {}),
    }


def device_key(env: Mapping[str, Any], device: str) -> str:
    """Identity of the device for stored peaks: the CPU model, its kind where known, and the
    thread budget; or the GPU."""
    if device == "cuda" and env.get("gpus"):
        return f"cuda:{env['gpus'][0]['name']}"
    kind = f" ({env['cpu_kind']})" if env.get("cpu_kind") else ""
    return f"cpu:{env.get('cpu_model')}{kind}:{env.get('thread_budget')}t"
