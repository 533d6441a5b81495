"""PyTorch's forms of a cell's step: Dynamo FX -> AOTAutograd -> Inductor, and StableHLO.

fx / aot / inductor come from one real ``torch.compile`` of the cell (the
``torch-compile`` backend's own call, with a Dynamo backend that records each stage and
then hands over to Inductor):

* ``fx``: the graph(s) Dynamo captured, with graph-break reasons from Dynamo's counters;
* ``aot``: what AOTAutograd hands Inductor: the forward and backward graphs of a train
  step (the inference graph of a forward), after partitioning;
* ``inductor``: the graph after Inductor's post-grad passes (recorded by a custom pass)
  and the code it generated (C++ on the CPU, Triton on a GPU).

Compile caches are disabled for the dump so every stage really runs.
``stablehlo`` is the functional program through torch-mlir (``torch_export``); ``hlo``
is what XLA makes of it (compiled by JAX's PJRT client, as the ``torch-mlir-xla`` backend
does): the same compiler as ``jax-jit``, so the two optimized modules compare directly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stackwars import registry
from stackwars.ir import stats

STAGES = ("fx", "aot", "inductor", "stablehlo", "hlo")


class _Recorder:
    def __init__(self) -> None:
        # (readable source for the file, node listing for the statistics)
        self.dynamo: list[tuple[str, str]] = []
        self.aot: list[tuple[str, str, str]] = []
        self.post_grad: list[str] = []

    def backend(self, gm, example_inputs):
        from torch._inductor.compile_fx import compile_fx, compile_fx_inner

        self.dynamo.append((gm.print_readable(print_output=False), str(gm.graph)))

        def inner(gm, example_inputs, **kwargs):
            kind = "backward" if kwargs.get("is_backward") else "inference" if kwargs.get("is_inference") else "forward"
            self.aot.append((kind, gm.print_readable(print_output=False), str(gm.graph)))
            return compile_fx_inner(gm, example_inputs, **kwargs)

        return compile_fx(gm, example_inputs, inner_compile=inner)

    def post_grad_pass(self):
        from torch._inductor.custom_graph_pass import CustomGraphPass

        recorder = self

        class Record(CustomGraphPass):
            def __call__(self, graph) -> None:
                recorder.post_grad.append(str(graph))

            def uuid(self):
                return "stackwars-ir-record"

        return Record()


def _compile_stages(workload, cfg, phase, params, batch, device, dtype, settings, out: Path) -> dict[str, Any]:
    import torch
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    from torch._inductor.utils import run_and_get_code

    rec = _Recorder()
    inductor_config.fx_graph_cache = False
    functorch_config.enable_autograd_cache = False
    inductor_config.post_grad_custom_post_pass = rec.post_grad_pass()
    # the optimizer step stays eager (PyTorch's own rule): the dump is the model's forward and
    # backward as Dynamo, AOTAutograd and Inductor see them, one graph, not the optimizer's code
    backend = registry.backend("torch-compile").load({"optimizer_impl": "default"})
    backend.configure(settings)
    backend.wrap = lambda fn: torch.compile(fn, backend=rec.backend)
    prepared = backend.prepare(workload, cfg, phase, params, batch, device, dtype)
    _, codes = run_and_get_code(prepared.call)  # the first call compiles (and, for a train step, the backward)
    compile_stats = prepared.compile_stats()
    result: dict[str, Any] = {}
    fx_files, fx_summ = [], []
    for i, (readable, nodes) in enumerate(rec.dynamo):
        name = f"torch.fx.{i}.py"
        (out / name).write_text(readable)
        fx_files.append(name)
        fx_summ.append(stats.fx(nodes))
    result["fx"] = {"graphs": len(rec.dynamo), "files": fx_files, "per_graph": fx_summ,
                    "ops": _merge(s["ops"] for s in fx_summ), "n_ops": sum(s["n_ops"] for s in fx_summ),
                    "placeholders": sum(s["placeholders"] for s in fx_summ),
                    "get_attr": sum(s["get_attr"] for s in fx_summ),
                    "graph_breaks": compile_stats.graph_breaks if compile_stats else None,
                    "break_reasons": list(compile_stats.break_reasons) if compile_stats else []}
    aot_files, aot_summ = [], {}
    for i, (kind, readable, nodes) in enumerate(rec.aot):
        name = f"torch.aot.{i}.{kind}.py"
        (out / name).write_text(readable)
        aot_files.append(name)
        aot_summ[f"{i}.{kind}"] = stats.fx(nodes)
    result["aot"] = {"graphs": [k for k, _, _ in rec.aot], "files": aot_files, "per_graph": aot_summ,
                     "ops": _merge(s["ops"] for s in aot_summ.values()),
                     "n_ops": sum(s["n_ops"] for s in aot_summ.values())}
    ind_files, kernels, extern = [], 0, {}
    for i, text in enumerate(rec.post_grad):
        name = f"torch.inductor.{i}.post_grad.txt"
        (out / name).write_text(text)
        ind_files.append(name)
    per_code = []
    for i, code in enumerate(codes):
        name = f"torch.inductor.{i}.output_code.py"
        (out / name).write_text(code)
        ind_files.append(name)
        s = stats.inductor_code(code)
        per_code.append(s)
        kernels += s["kernels"]
        for k, v in s["extern_calls"].items():
            extern[k] = extern.get(k, 0) + v
    post = [stats.fx(t) for t in rec.post_grad]
    result["inductor"] = {"files": ind_files, "kernels": kernels, "extern_calls": extern,
                          "kernel_names": [k for s in per_code for k in s["cpp_kernels"] + s["triton_kernels"]],
                          "ops": _merge(s["ops"] for s in post), "n_ops": sum(s["n_ops"] for s in post),
                          "language": "Triton" if device == "cuda" else "C++"}
    return result


def _merge(histograms) -> dict[str, int]:
    total: dict[str, int] = {}
    for h in histograms:
        for k, v in h.items():
            total[k] = total.get(k, 0) + v
    return dict(sorted(total.items(), key=lambda kv: -kv[1]))


def dump(workload, cfg, phase, params, batch, device, dtype, settings, out: Path, stages) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if set(stages) & {"fx", "aot", "inductor"}:
        full = _compile_stages(workload, cfg, phase, params, batch, device, dtype, settings, out)
        result.update({s: full[s] for s in stages if s in full})
    if {"stablehlo", "hlo"} & set(stages):
        from stackwars.ir.torch_export import export
        exp, _ = export(workload, cfg, phase, params, batch, dtype, settings.get("matmul_precision", "float32"),
                        {"workload": workload.name, "config": cfg.as_dict()})
        exp.save(out, "torch.stablehlo")
        if "stablehlo" in stages:
            result["stablehlo"] = {**stats.stablehlo(exp.text), "file": "torch.stablehlo.mlir",
                                   "timings": exp.timings}
        if "hlo" in stages:
            import jax
            device = jax.devices("gpu" if device == "cuda" else "cpu")[0]
            text = device.client.compile_and_load(exp.text, [device]).hlo_modules()[0].to_string()
            (out / "torch.hlo.txt").write_text(text)
            result["hlo"] = {**stats.hlo(text), "file": "torch.hlo.txt"}
    return result
