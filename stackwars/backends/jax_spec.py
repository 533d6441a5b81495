"""The JAX backends' spec: XLA flags that must be in the environment before jax is imported."""

from __future__ import annotations

from typing import Any, Mapping

from stackwars.backends.base import BackendSpec
from stackwars.errors import SpecError

AUTOTUNE_LEVELS = (0, 1, 2, 3, 4)


COMMAND_BUFFERS = ("on", "off")
# what XLA forms command buffers (CUDA graphs) of, as openxla's default has it: "on" sets it
# explicitly, "off" empties it (XLA then launches every kernel itself)
COMMAND_BUFFER_DEFAULT = "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN"


class JaxSpec(BackendSpec):
    """Options, applied through XLA_FLAGS in the worker before jax is imported:
    ``xla_autotune_level``: XLA's GPU autotuning level for the cell (None: XLA's default, 4; 0
    turns autotuning off); ``xla_command_buffers``: "off" (no CUDA graphs: every kernel
    launched by XLA) or "on" (XLA's default set, stated), None: XLA's default (on)."""

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
        buffers = out.get("xla_command_buffers")
        if buffers is not None and buffers not in COMMAND_BUFFERS:
            raise SpecError(f"xla_command_buffers={buffers!r}; allowed: {', '.join(COMMAND_BUFFERS)}")
        return out

    def process_env(self, options: Mapping[str, Any], device: str) -> dict[str, str]:
        resolved = self.resolve_options(options)
        flags = []
        if resolved.get("xla_autotune_level") is not None:
            flags.append(f"--xla_gpu_autotune_level={resolved['xla_autotune_level']}")
        if resolved.get("xla_command_buffers") is not None:
            on = resolved["xla_command_buffers"] == "on"
            flags.append(f"--xla_gpu_enable_command_buffer={COMMAND_BUFFER_DEFAULT if on else ''}")
        return {"XLA_FLAGS": " ".join(flags)} if flags else {}
