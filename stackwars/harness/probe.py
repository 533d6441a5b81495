"""What this machine can run: frameworks, versions, devices. Runs in a worker so the
parent never initialises CUDA or lets JAX reserve GPU memory."""

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
    info: dict[str, Any] = {"importable": True, "version": jax.__version__, "jaxlib": jaxlib.__version__}
    try:
        gpus = jax.devices("gpu")
        info.update(cuda=True, devices=[d.device_kind for d in gpus])
    except RuntimeError as exc:
        info.update(cuda=False, cuda_reason=str(exc).splitlines()[0][:200])
    info["cpu_devices"] = len(jax.devices("cpu"))
    return info


def _mlir() -> dict[str, Any]:
    try:
        import torch_mlir  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        return {"importable": False, "error": f"{type(exc).__name__}: {exc}"}
    return {"importable": True}


def probe() -> dict[str, Any]:
    return {"status": "ok", "torch": _torch(), "jax": _jax(), "torch_mlir": _mlir()}
