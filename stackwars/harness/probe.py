"""What this machine can run: frameworks, versions, devices. Runs in a worker so the
parent never initialises CUDA or lets JAX reserve GPU memory.

No platform is forced on the probe (the worker removes JAX_PLATFORMS): it reports each
framework's devices as the framework sees them. Where a framework sees no GPU, the
reason is the framework's own words.
"""

from __future__ import annotations

import os
from typing import Any


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
