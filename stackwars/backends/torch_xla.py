"""torch-mlir-xla: the PyTorch program compiled and run by XLA, the compiler JAX uses.

The twin's program is exported to StableHLO with its parameters as arguments
(``ir/torch_export.py``: make_fx + torch-mlir), compiled with XLA through JAX's PJRT
client (``Client.compile_and_load``) and executed with its arguments as device arrays.
So ``jax-jit`` and ``torch-mlir-xla`` differ only in the program each framework hands to
the same compiler. With the ``stablehlo`` option the cell runs an exported file
instead (torch-mlir is then not needed: export on one machine, run on another). The
``torch_xla`` package itself is not used; ``settings.backend.path`` says what ran.

First call: export (torch trace + MLIR import; or reading the file) + XLA compile +
execute, each part timed. A train step threads (new parameters, loss) from call to call;
nothing is donated, so each step allocates its outputs.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

import numpy as np

from stackwars.backends.base import Backend, Prepared
from stackwars.backends.jax_common import configure_jax, to_device_array
from stackwars.backends.torch_common import configure_torch, to_numpy, to_tensor
from stackwars.ir.torch_export import TorchExport, export, require_torch_mlir, state_buffers
from stackwars.records import CompileStats
from stackwars.workloads.base import initial_values, param_dtype, update_of

PATH = "torch-mlir StableHLO -> XLA (jaxlib PJRT client)"


class TorchXla(Backend):
    def configure(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        self.precision = settings.get("matmul_precision", "float32")
        return {**configure_torch(settings), **configure_jax(settings), "path": PATH}

    def init_device(self, device: str) -> dict[str, Any]:
        from stackwars.backends.jax_common import init_jax_device
        return init_jax_device(device)  # XLA runs the program; PyTorch only traces it on the CPU

    def prepare(self, workload, cfg, phase, params, batch, device, dtype) -> Prepared:
        import jax

        self.device = jax.devices("gpu" if device == "cuda" else "cpu")[0]
        expected = {"workload": workload.name, "config": cfg.as_dict(), "phase": phase, "dtype": dtype,
                    "matmul_precision": self.precision}
        file = self.options.get("stablehlo")
        exp: TorchExport | None = None
        if file:
            t0 = time.perf_counter()
            exp = TorchExport.load(file)
            exp.check_matches(expected)
            self.read_s = time.perf_counter() - t0
        else:
            require_torch_mlir()  # absent: `unsupported` now, with the install hint, before any timing
        twin = workload.twin("torch")
        pdtype = param_dtype(dtype, phase)
        model = twin.build(cfg, {k: to_tensor(v, pdtype, "cpu") for k, v in params.items()})
        names = [n for n, _ in model.named_parameters()]
        canonical = twin.canonical(model)
        bnames = state_buffers(model, canonical)  # BatchNorm statistics travel as state
        state = [to_device_array(to_numpy(p), pdtype, self.device) for _, p in model.named_parameters()]
        state += [to_device_array(to_numpy(canonical[k]), pdtype, self.device) for k in bnames]
        if phase == "train-step" and workload.optimizer(cfg).name == "adamw":  # moments and step count
            state += [to_device_array(np.zeros(s.shape, np.float32), "float32", self.device) for s in state[:len(names)]] * 2
            state += [to_device_array(np.zeros((), np.float32), "float32", self.device)]
        inputs = [to_device_array(batch[k], dtype, self.device) for k in sorted(batch)]
        self.stages: dict[str, Any] = {}

        def compile_once() -> Any:
            nonlocal exp
            times: dict[str, float] = {}
            if exp is None:
                exp, _ = export(workload, cfg, phase, params, batch, dtype, self.precision, expected)
                times.update(exp.timings)
            else:
                times["read_file_s"] = self.read_s
            t0 = time.perf_counter()
            exe = self.device.client.compile_and_load(exp.text, [self.device])
            times["xla_compile_s"] = time.perf_counter() - t0
            self.stages.update(exe=exe, times=times, export=exp)
            return exe

        def execute() -> list:
            exe = self.stages.get("exe") or compile_once()
            result = exe.execute_sharded(state + inputs)
            return [o[0] for o in result.disassemble_into_single_device_arrays()]

        notes = {"param_dtype": pdtype, "compute_dtype": dtype, "path": PATH, "stablehlo_file": file,
                 "donation": "none (outputs newly allocated each step)"}
        if workload.attention_geometry(cfg) is not None:
            notes["attention"] = {"requested": cfg.attention, "implementation": "exported",
                                  "reason": "the PyTorch program traced to ATen (SDPA through its math "
                                            "decomposition unless naive), compiled by XLA"}
        if phase == "forward":
            def call():
                return execute()[0]

            return Prepared(call, lambda out: {"out": np.asarray(out, dtype=np.float64)},
                            lambda outs: jax.block_until_ready(outs), compile_stats=self._stats,
                            memory_analysis=self._memory, notes=notes)

        initial = initial_values(params, {k: v.detach() for k, v in twin.canonical(model).items()},
                                 lambda v: v.to("cpu", copy=True).float().numpy())

        def call():
            outs = execute()
            state[:] = outs[:-1]  # new parameters feed the next step
            return outs

        def parity(outs):
            import torch
            with torch.no_grad():  # load the new parameters and statistics, read them back canonically
                targets = [p for _, p in model.named_parameters()] + [canonical[k] for k in bnames]
                for t, new in zip(targets, outs):
                    t.copy_(torch.from_numpy(np.array(new, dtype=np.float32)))
            result = {"loss": np.asarray(outs[-1], dtype=np.float64)}
            for k, v in twin.canonical(model).items():
                result[f"update.{k}"] = update_of(v.detach().float().numpy(), initial[k])
            return result

        notes["optimizer"] = f"functional {workload.optimizer(cfg).name} inside the exported step"
        return Prepared(call, parity, lambda outs: jax.block_until_ready(outs[-1]), compile_stats=self._stats,
                        memory_analysis=self._memory, notes={**notes, "parameters": len(names)})

    def cache_flusher(self, device: str):
        from stackwars.backends.jax_common import jax_cache_flusher
        return jax_cache_flusher(self, device)  # the program runs on XLA's device buffers

    def profile(self, prepared: Prepared, steps: int, path: str) -> dict[str, Any]:
        from stackwars.backends.jax_common import trace_jax
        # XLA runs the program through JAX's client: JAX's profiler sees its ops
        return trace_jax(prepared, steps, path, self.device.platform == "gpu")

    def _stats(self) -> CompileStats | None:
        times = self.stages.get("times")
        if times is None:
            return None
        extra: dict[str, Any] = {"path": PATH}
        try:
            cost = self.stages["exe"].cost_analysis()
            cost = cost[0] if isinstance(cost, (list, tuple)) else cost
            extra["xla_cost_analysis"] = {k: float(v) for k, v in (cost or {}).items()
                                          if k in ("flops", "transcendentals", "bytes accessed")}
        except Exception as exc:  # noqa: BLE001 - not every PJRT backend reports costs
            extra["xla_cost_analysis_error"] = repr(exc)
        return CompileStats(total_s=sum(times.values()), breakdown=dict(times), graphs=1, recompiles=0,
                            source="wall time of export (make_fx, torch-mlir) and PJRT compile_and_load",
                            extra=extra)

    def _memory(self) -> dict[str, int]:
        exe = self.stages.get("exe")
        if exe is None:
            return {}
        stats = exe.get_compiled_memory_stats()
        fields = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
                  "temp_size_in_bytes", "generated_code_size_in_bytes")
        return {f: int(getattr(stats, f)) for f in fields if hasattr(stats, f)}
