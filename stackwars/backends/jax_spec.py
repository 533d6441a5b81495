"""The JAX backends' spec: XLA flags that must be in the environment before jax is imported."""

from __future__ import annotations

from typing import Any, Mapping

from stackwars.backends.base import BackendSpec
from stackwars.errors import SpecError

AUTOTUNE_LEVELS = (0, 1, 2, 3, 4)


class JaxSpec(BackendSpec):
    """Option ``xla_autotune_level``: XLA's GPU autotuning level for the cell (None: XLA's
    default, 4; 0 turns autotuning off). Applied through XLA_FLAGS in the worker."""

    def resolve_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        out = super().resolve_options(options)
        level = out.get("xla_autotune_level")
        if level is not None:
            try:
                level = int(level)
            except (TypeError, ValueError):
                level = None
            if level not in AUTOTUNE_LEVELS:
                raise SpecError(f"xla_autotune_level={options.get('xla_autotune_level')!r}; allowed: "
                                f"{', '.join(map(str, AUTOTUNE_LEVELS))}")
            out["xla_autotune_level"] = level
        return out

    def process_env(self, options: Mapping[str, Any], device: str) -> dict[str, str]:
        level = self.resolve_options(options).get("xla_autotune_level")
        return {} if level is None else {"XLA_FLAGS": f"--xla_gpu_autotune_level={level}"}
