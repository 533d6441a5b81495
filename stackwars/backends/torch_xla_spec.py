"""Availability of torch-mlir-xla, decided in the parent without importing a framework."""

from __future__ import annotations

from typing import Any, Mapping

from stackwars.backends.base import BackendSpec


class TorchXlaSpec(BackendSpec):
    """Needs jax as the runtime, and torch-mlir unless it runs an exported file."""

    def availability(self, probe: Mapping[str, Any], device: str, options: Mapping[str, Any] | None = None):
        ok, why = super().availability(probe, device, options)
        if not ok:
            return ok, why
        jax_info = probe.get("jax") or {}
        if not jax_info.get("importable"):
            return False, f"jax (the XLA runtime here) is not installed ({jax_info.get('error', 'import failed')})"
        if device == "cuda" and not jax_info.get("cuda"):
            return False, f"jax sees no CUDA device ({jax_info.get('cuda_reason', 'none found')})"
        if not (options or {}).get("stablehlo") and not (probe.get("torch_mlir") or {}).get("importable"):
            return False, "torch-mlir is not installed (optional: pip install torch-mlir), and no --stablehlo file"
        return True, ""
