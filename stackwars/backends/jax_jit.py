"""jax-jit: the whole step under jax.jit, compiled by XLA.

The first call runs the AOT stages explicitly, ``jit(f).trace(*args)`` ->
``.lower()`` -> ``.compile()``, timing each, then executes the ``Compiled`` object;
later calls reuse it (the same C++ fast path as calling the jitted function). XLA's
cost and memory analyses of the compiled executable are recorded with the cell.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import time
from typing import Any, Callable

import jax

from stackwars.backends.jax_common import COMPILE_EVENT, JaxBackend
from stackwars.harness import tmp
from stackwars.records import CompileStats


def jaxpr_size(closed: Any) -> int:
    """Equations in a jaxpr, counting those inside sub-jaxprs (a scan's body once, however
    many steps it runs; an unrolled loop's body once per step)."""
    from jax._src import core

    def count(jaxpr) -> int:
        return sum(1 + sum(count(sub) for sub in core.subjaxprs(_OneEquation(eqn))) for eqn in jaxpr.eqns)

    return count(getattr(closed, "jaxpr", closed))


# Source locations in optimized HLO: the tables a module carries and each instruction's metadata.
_LOCATION_TABLES = frozenset({"FileNames", "FunctionNames", "FileLocations", "StackFrames"})
_METADATA = re.compile(r', metadata=\{(?:[^{}"]|"(?:\\.|[^"\\])*")*\}')


def program_sha(hlo_text: str) -> str:
    """A fingerprint of what the optimized program runs: its instructions, layouts, fusions and
    the backend's choices, without the source locations. Those are not the program: an
    executable read back from JAX's persistent cache numbers its stack frames in another order
    than the one just compiled (measured on jaxlib 0.10.2's CPU client), so fingerprinting them
    called a cold and a warm process's identical programs different."""
    kept, table = [], False
    for text in hlo_text.splitlines():
        if text.strip() in _LOCATION_TABLES:
            table = True
        elif table and not text.strip():
            table = False
        elif not table:
            kept.append(_METADATA.sub("", text))
    return hashlib.sha256("\n".join(kept).encode()).hexdigest()[:12]


class _OneEquation:
    """The one-equation jaxpr that jax's ``subjaxprs`` walks (it reads only ``eqns``)."""

    def __init__(self, eqn):
        self.eqns = [eqn]


def stablehlo_size(text: str) -> int:
    """Operations in a StableHLO module's text (``stablehlo.*`` and control-flow ops)."""
    return len(re.findall(r"\b(?:stablehlo|chlo|mhlo)\.[a-z_]+", text))


def command_buffers(optimized_hlo: str) -> int:
    """Command buffers outlined at HLO level (XLA before its thunk pass): the command-buffer
    scheduling pass put each run of at least ``xla_gpu_graph_min_graph_size`` capturable
    kernels into a computation named ``command_buffer`` (``.N`` when there are several)."""
    return len(set(re.findall(r"%?\b(command_buffer(?:\.\d+)?)\s*\(", optimized_hlo)))


THUNK_DUMP = "*thunk_sequence_after_thunk_passes*.txt"


def thunk_command_buffers(dump_dir: str) -> int | None:
    """Command buffers in the thunk sequence XLA runs, from its dump (None: no such dump).
    Newer XLA forms them on the thunk sequence, after the HLO is final: jaxlib 0.11.2's CUDA
    plugin holds only ``CommandBufferConversionPass`` (command_buffer_conversion_pass.cc, pass
    "command-buffer-conversion", run on a ``ThunkSequence``; flag
    ``xla_gpu_experimental_enable_command_buffer_on_thunks``, default true) and no HLO-level
    command-buffer scheduling, so its optimized HLO never holds a ``command_buffer``
    computation, whatever it replays. Each ``kCommandBuffer`` thunk is one graph."""
    files = glob.glob(os.path.join(dump_dir, "**", THUNK_DUMP), recursive=True)
    if not files:
        return None
    return sum(len(re.findall(r"\bkCommandBuffer\b", open(f, errors="replace").read())) for f in files)


def count_command_buffers(lowered: Any, optimized_hlo: str) -> dict[str, Any]:
    """What XLA replays as graphs on a GPU, read from the program: the same lowered program
    compiled once more, untimed, with XLA's dump on, its thunk sequence counted; where that
    XLA writes no thunk sequence (one that outlines command buffers at HLO level), the
    optimized HLO's ``command_buffer`` computations."""
    folder = tmp.mkdtemp("xla-dump")  # owner-tagged: swept if this worker is killed meanwhile
    why = None
    try:
        lowered.compile(compiler_options={"xla_dump_to": folder})
        n = thunk_command_buffers(folder)
        if n is not None:
            return {"xla_command_buffers": n, "xla_command_buffers_source": "kCommandBuffer thunks in XLA's thunk "
                    "sequence after its thunk passes (a second, untimed compile with xla_dump_to)"}
        why = "no thunk-sequence dump (an XLA that outlines command buffers at HLO level)"
    except Exception as exc:  # noqa: BLE001 - the count falls back to the HLO, saying why
        why = f"the dumping compile failed: {type(exc).__name__}: {exc}"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {"xla_command_buffers": command_buffers(optimized_hlo),
            "xla_command_buffers_source": f"command_buffer computations in the optimized HLO ({why})"}


class JaxJit(JaxBackend):

    def wrap(self, fn: Callable, donate: tuple[int, ...] = ()) -> Callable:
        jitted = jax.jit(fn, donate_argnums=donate)
        self.stages: dict[str, Any] = {}
        self.donated = donate

        def call(*args):
            compiled = self.stages.get("compiled")
            if compiled is None:
                t0 = time.perf_counter()
                traced = jitted.trace(*args)
                t1 = time.perf_counter()
                lowered = traced.lower()
                t2 = time.perf_counter()
                compiled = lowered.compile()
                t3 = time.perf_counter()
                self.stages.update(compiled=compiled, lowered=lowered,
                                   times={"trace_s": t1 - t0, "lower_s": t2 - t1, "compile_s": t3 - t2},
                                   ir_size={"jaxpr_eqns": jaxpr_size(traced.jaxpr),
                                            "stablehlo_ops": stablehlo_size(lowered.as_text())})
            return compiled(*args)

        return call

    def program_text(self, prog) -> tuple[str, str]:
        compiled = self.stages.get("compiled")
        if compiled is None:
            return super().program_text(prog)
        return compiled.as_text(), "the compiled executable's optimized HLO (custom calls)"

    def prepare(self, *args, **kwargs):
        prepared = super().prepare(*args, **kwargs)
        prepared.compile_stats = self._stats
        prepared.memory_analysis = self._memory
        prepared.notes["donate_argnums"] = list(self.donated)
        return prepared

    def _stats(self) -> CompileStats | None:
        times = self.stages.get("times")
        if times is None:
            return None
        extra: dict[str, Any] = {}
        try:
            cost = self.stages["compiled"].cost_analysis()
            cost = cost[0] if isinstance(cost, (list, tuple)) else cost
            extra["xla_cost_analysis"] = {k: float(v) for k, v in (cost or {}).items()
                                          if k in ("flops", "transcendentals", "bytes accessed")}
        except Exception as exc:  # backends may not implement it
            extra["xla_cost_analysis_error"] = repr(exc)
        extra["persistent_cache"] = dict(self.events.cache)
        if self.device.platform == "gpu":  # what XLA replays as graphs, read from the program itself
            extra.update(count_command_buffers(self.stages["lowered"], self.stages["compiled"].as_text()))
        extra["ir_size"] = dict(self.stages.get("ir_size") or {})
        # the optimized program, autotuned choices included: two processes with the same ran the same kernels
        extra["program_sha"] = program_sha(self.stages["compiled"].as_text())
        return CompileStats(
            total_s=sum(times.values()),
            breakdown=dict(times),
            graphs=1,
            recompiles=self.events.after_first(COMPILE_EVENT),
            source="jax.stages AOT: trace/lower/compile wall time; recompiles from jax.monitoring",
            extra=extra,
        )

    def _memory(self) -> dict[str, int]:
        compiled = self.stages.get("compiled")
        analysis = compiled.memory_analysis() if compiled is not None else None
        if analysis is None:
            return {}
        fields = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
                  "temp_size_in_bytes", "generated_code_size_in_bytes")
        return {f: int(getattr(analysis, f)) for f in fields if hasattr(analysis, f)}
