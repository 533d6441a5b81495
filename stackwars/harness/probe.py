"""What this machine can run: frameworks, versions, devices. Runs in a worker so the
parent never initialises CUDA or lets JAX reserve GPU memory.

No platform is forced on the probe (the worker removes JAX_PLATFORMS): it reports each
framework's devices as the framework sees them. Where a framework sees no GPU, the
reason is the framework's own words.

The parent keeps the answer between commands (``cache_key``, ``read_cached``, ``keep``): the
same machine, install and environment give the same answer, read back in milliseconds.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping


def _torch() -> dict[str, Any]:
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - report any import failure as unavailable
        return {"importable": False, "error": f"{type(exc).__name__}: {exc}"}
    info: dict[str, Any] = {"importable": True, "version": torch.__version__,
                            "cuda_build": torch.version.cuda, "num_threads": torch.get_num_threads()}
    if torch.cuda.is_available():
        info["cuda"] = True
        info["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        info["compute_capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
        info["cudnn"] = torch.backends.cudnn.version()
    else:
        info["cuda"] = False
        info["cuda_reason"] = "CPU-only build of torch" if torch.version.cuda is None else "no CUDA device visible"
    return info


def _jax() -> dict[str, Any]:
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        import jax
        import jaxlib
    except Exception as exc:  # noqa: BLE001
        return {"importable": False, "error": f"{type(exc).__name__}: {exc}"}
    info: dict[str, Any] = {"importable": True, "version": jax.__version__, "jaxlib": jaxlib.__version__,
                            "jax_platforms_env": os.environ.get("JAX_PLATFORMS")}
    try:
        gpus = jax.devices("gpu")
        info.update(cuda=True, devices=[d.device_kind for d in gpus],
                    compute_capability=getattr(gpus[0], "compute_capability", None))
        try:
            from jax._src.lib import cuda_versions
            info["cudnn"] = cuda_versions.cudnn_get_version() if cuda_versions else None
        except Exception:  # noqa: BLE001 - the version is a nicety, the device is what matters
            pass
    except RuntimeError as exc:
        info.update(cuda=False, cuda_reason=str(exc).splitlines()[0][:300])
    info["default_backend"] = jax.default_backend()
    info["cpu_devices"] = len(jax.devices("cpu"))
    return info


def _mlir() -> dict[str, Any]:
    try:
        import torch_mlir  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        return {"importable": False, "error": f"{type(exc).__name__}: {exc}"}
    return {"importable": True}


def probe_torch() -> dict[str, Any]:
    """PyTorch's side (torch-mlir needs PyTorch): a worker of its own, beside JAX's."""
    return {"status": "ok", "torch": _torch(), "torch_mlir": _mlir()}


def probe_jax() -> dict[str, Any]:
    return {"status": "ok", "jax": _jax()}


def probe() -> dict[str, Any]:
    """Both sides in this process (``--inline``)."""
    return {**probe_torch(), **probe_jax()}


# ---- the parent's side: the probe's answer kept between commands ---------------------------------
# The probe costs two fresh interpreters importing PyTorch and JAX (5.3 s wall, 6.2 s of CPU on
# the 2-core VM; on a GPU host, each framework's CUDA start as well), before any command that
# plans cells can start. What it finds changes only with what ``cache_key`` holds, so its
# answer is kept in the user's cache folder and read back while the key is unchanged and the
# answer under a day old. The run's environment record says which (``probed``).
PROBE_CACHE_ENV = "STACKWARS_PROBE_CACHE"  # "0": probe every time, keep nothing
CACHE_MAX_AGE_S = 86400.0
# the variables a framework reads where it looks for its devices, libraries and threads
KEY_ENV_PREFIXES = ("CUDA_", "NVIDIA_", "JAX_", "XLA_", "TF_", "TPU_", "HIP_", "ROCR_", "GPU_", "OMP_", "MKL_",
                    "OPENBLAS_", "KMP_", "TORCH", "PYTORCH_", "LD_", "PYTHON", "STACKWARS_PLUGINS")


def cache_key() -> dict[str, Any]:
    """What the probe's answer depends on, known without importing a framework: this host and
    its boot (a driver changes with a reboot), its GPUs and driver as NVML sees them, the
    interpreter, the installed packages (each package folder's modification time: an install,
    upgrade or removal changes it), the frameworks' versions, the environment variables a
    framework reads, the CPUs this process may use, and the probe's own code."""
    import hashlib
    import platform
    import sys

    from stackwars.version import __version__
    from stackwars.harness.env import PACKAGES, _gpus, _version

    def boot_id() -> str | None:
        try:
            with open("/proc/sys/kernel/random/boot_id") as f:
                return f.read().strip()
        except OSError:
            return None

    def mtime(path: str) -> int | None:
        try:
            return os.stat(path).st_mtime_ns
        except OSError:
            return None

    packages = [p for p in sys.path if os.path.basename(p.rstrip(os.sep)) in ("site-packages", "dist-packages")]
    gpus, driver, cuda = _gpus()
    with open(__file__, "rb") as f:
        code = hashlib.sha256(f.read()).hexdigest()
    return {"host": platform.node(), "boot": boot_id(), "gpus": [g["name"] for g in gpus], "nvidia_driver": driver,
            "cuda_driver": cuda, "python": sys.executable, "python_version": sys.version,
            "packages": {p: mtime(p) for p in packages}, "versions": {p: _version(p) for p in PACKAGES},
            "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(KEY_ENV_PREFIXES)},
            "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "stackwars": __version__, "probe_code": code}


def _cache_file(key: Mapping[str, Any]) -> Path:
    import hashlib

    from stackwars.harness.tmp import cache_root

    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    return cache_root() / "probe" / f"{digest}.json"


def cacheable(found: Mapping[str, Any], gpus_seen: bool) -> bool:
    """Only an answer that will be the same next time is kept: not one where a side's worker
    failed or a framework failed to import for any reason but not being installed, nor one
    where NVML sees a GPU that an importable CUDA-capable framework did not (a busy or
    half-initialised device may answer differently a minute later)."""
    if found.get("status") != "ok":
        return False
    for side in ("torch", "jax", "torch_mlir"):
        info = found.get(side) or {}
        if not info.get("importable") and not str(info.get("error", "")).startswith("ModuleNotFoundError"):
            return False
        capable = side == "jax" or (side == "torch" and info.get("cuda_build"))
        if gpus_seen and info.get("importable") and capable and not info.get("cuda"):
            return False
    return True


def read_cached(key: Mapping[str, Any], now: float) -> dict[str, Any] | None:
    """The kept answer for ``key``, marked as read back (``probed``), or None: none kept, caching
    off (``STACKWARS_PROBE_CACHE=0``), older than ``CACHE_MAX_AGE_S``, or unreadable."""
    if os.environ.get(PROBE_CACHE_ENV) == "0":
        return None
    try:
        with open(_cache_file(key)) as f:
            kept = json.load(f)
        age = now - float(kept["probed_at"])
        if kept["key"] != json.loads(json.dumps(key)) or not 0 <= age < CACHE_MAX_AGE_S:
            return None
        return {**kept["found"], "probed": {"at": _iso(kept["probed_at"]), "from_cache": True, "age_s": round(age, 1)}}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def keep(key: Mapping[str, Any], found: Mapping[str, Any], probed_at: float) -> dict[str, Any]:
    """``found`` marked as probed now; kept for the next command where ``cacheable`` (a cache
    folder that cannot be written costs the next command a probe, nothing else)."""
    marked = {**found, "probed": {"at": _iso(probed_at), "from_cache": False}}
    if os.environ.get(PROBE_CACHE_ENV) == "0" or not cacheable(found, bool(key.get("gpus"))):
        return marked
    import tempfile

    path = _cache_file(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".probe-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"key": key, "probed_at": probed_at, "found": dict(found)}, f)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except OSError:
        pass
    return marked


def _iso(epoch: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).isoformat(timespec="seconds")
