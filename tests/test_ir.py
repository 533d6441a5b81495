"""IR dumps for every workload x phase (counts checked by hand), the parsers, torch-mlir-xla."""

import json
import sys

import pytest

from stackwars.harness.measure import measure_cell
from stackwars.harness.worker import execute
from stackwars.ir import stats
from stackwars.ir.dump import dump_cell
from stackwars.records import CellSpec, Measurement, MeasureConfig

# matrix products by hand: gemm 1 (+ dB); ffn 2 (+ dW2, dH, dW1); mha 4 projections + QK^T + PV
# (+ dWo, dO, dP, dV, dQ, dK, dWq, dWk, dWv: the input x needs no gradient)
DOTS = {("gemm", "forward"): 1, ("gemm", "train-step"): 2, ("ffn", "forward"): 2, ("ffn", "train-step"): 5,
        ("mha", "forward"): 6, ("mha", "train-step"): 15}
FAST = MeasureConfig(warmup=1, min_samples=2, min_time_s=0.0)
needs_mlir = pytest.mark.skipif(
    __import__("importlib").util.find_spec("torch_mlir") is None, reason="torch-mlir (optional) not installed")


@needs_mlir
@pytest.mark.parametrize("workload,phase", sorted(DOTS))
def test_every_stage_of_every_workload(workload, phase, tmp_path):
    r = dump_cell(CellSpec(workload, "tiny", phase, "jax-jit").to_dict(),
                  {"jax": ["jaxpr", "stablehlo", "hlo"], "torch": ["fx", "aot", "inductor", "stablehlo", "hlo"]},
                  str(tmp_path))
    j, t = r["jax"], r["torch"]
    assert j["stablehlo"]["ops"]["stablehlo.dot_general"] == DOTS[(workload, phase)]
    assert t["stablehlo"]["ops"]["stablehlo.dot_general"] == DOTS[(workload, phase)]
    assert j["jaxpr"]["ops"]["dot_general"] == DOTS[(workload, phase)]
    # parameters are arguments, not constants baked into the program, on both sides
    nparams = {"gemm": 1, "ffn": 4, "mha": 8}[workload]
    assert j["stablehlo"]["baked_constants"] == 0 and t["stablehlo"]["baked_constants"] == 0
    assert t["stablehlo"]["arguments"] >= nparams + 1 and j["stablehlo"]["arguments"] >= nparams + 1
    assert j["hlo"]["fusions"] >= 1 and t["hlo"]["fusions"] >= 1
    assert t["fx"]["graphs"] == 1 and t["fx"]["graph_breaks"] == 0 and t["fx"]["get_attr"] == 0
    assert t["aot"]["graphs"] == (["forward", "backward"] if phase == "train-step" else ["inference"])
    assert t["inductor"]["language"] == "C++"
    assert t["inductor"]["kernels"] + sum(t["inductor"]["extern_calls"].values()) >= 1
    files = {p.name for p in tmp_path.iterdir()}
    assert {"jax.jaxpr.txt", "jax.stablehlo.mlir", "jax.hlo.txt", "torch.fx.0.py", "torch.stablehlo.mlir",
            "torch.hlo.txt", "summary.json"} <= files
    assert all((tmp_path / f).stat().st_size > 100 for f in files)


def test_stablehlo_parser_on_fixed_text():
    text = """module {
  func.func public @main(%arg0: tensor<4x8xf32>, %arg1: tensor<2x4xf32>) -> (tensor<2x8xf32>) {
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<2x8xf32>
    %cst_0 = stablehlo.constant dense<[[1.0, 2.0]]> : tensor<1x2xf32>
    %0 = stablehlo.dot_general %arg1, %arg0, contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %1 = stablehlo.add %0, %cst : tensor<2x8xf32>
    %2 = stablehlo.convert %1 : (tensor<2x8xf32>) -> tensor<2x8xf64>
    return %1 : tensor<2x8xf32>
  }
}"""
    s = stats.stablehlo(text)
    assert s["ops"] == {"stablehlo.constant": 2, "stablehlo.dot_general": 1, "stablehlo.add": 1, "stablehlo.convert": 1}
    assert s["arguments"] == 2 and s["baked_constants"] == 1 and s["splat_constants"] == 1
    assert s["has_f64"] and s["converts"] == 1


def test_hlo_parser_counts_entry_and_fusions():
    text = """HloModule m, is_scheduled=true

%fused_computation (param_0: f32[4]) -> f32[4] {
  %param_0 = f32[4]{0} parameter(0)
  ROOT %exp = f32[4]{0} exponential(f32[4]{0} %param_0)
}

%region_0 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add = f32[] add(f32[] %a, f32[] %b)
}

ENTRY %main (p: f32[4]) -> (f32[4], f32[4]) {
  %p = f32[4]{0} parameter(0)
  %fusion = f32[4]{0} fusion(f32[4]{0} %p), kind=kLoop, calls=%fused_computation
  ROOT %tuple = (f32[4]{0}, f32[4]{0}) tuple(f32[4]{0} %fusion, f32[4]{0} %p)
}
"""
    s = stats.hlo(text)
    assert s["ops"] == {"parameter": 1, "fusion": 1, "tuple": 1}
    assert s["fusions"] == 1 and s["fusion_kinds"] == {"kLoop": 1}
    assert s["fused_ops"] == {"parameter": 1, "exponential": 1}


def test_fx_parser():
    nodes = """graph():
    %x : [num_users=1] = placeholder[target=x]
    %w : [num_users=1] = get_attr[target=w]
    %mm : [num_users=1] = call_function[target=torch.ops.aten.mm.default](args = (%x, %w), kwargs = {})
    %f : [num_users=1] = call_method[target=float](args = (%mm,), kwargs = {})
    return (f,)"""
    assert stats.fx(nodes) == {"ops": {"torch.ops.aten.mm.default": 1, "float": 1}, "n_ops": 2,
                               "placeholders": 1, "get_attr": 1}


@needs_mlir
@pytest.mark.parametrize("phase", ("forward", "train-step"))
@pytest.mark.parametrize("workload", ("gemm", "ffn", "mha"))
def test_torch_xla_parity(workload, phase):
    m = Measurement.from_dict(measure_cell(CellSpec(workload, "tiny", phase, "torch-mlir-xla").to_dict(), FAST.to_dict()))
    assert m.status == "ok", m.error
    assert m.parity.max_rel_err <= m.parity.tolerance
    assert set(m.compile.breakdown) == {"torch_trace_s", "mlir_import_s", "xla_compile_s"}
    assert m.settings["backend"]["path"].startswith("torch-mlir StableHLO")


@needs_mlir
def test_export_then_run_from_the_file(tmp_path):
    dump_cell(CellSpec("mha", "tiny", "train-step", "jax-jit").to_dict(), {"torch": ["stablehlo"]}, str(tmp_path))
    mlir = tmp_path / "torch.stablehlo.mlir"
    side = json.loads((tmp_path / "torch.stablehlo.json").read_text())
    assert side["meta"]["workload"] == "mha" and side["out_names"][-1] == "loss"
    spec = CellSpec("mha", "tiny", "train-step", "torch-mlir-xla", options=(("stablehlo", str(mlir)),))
    m = Measurement.from_dict(measure_cell(spec.to_dict(), FAST.to_dict()))
    assert m.status == "ok", m.error
    assert "read_file_s" in m.compile.breakdown and "torch_trace_s" not in m.compile.breakdown
    # the file is for that cell only: another dtype is refused with the reason
    wrong = CellSpec("mha", "tiny", "train-step", "torch-mlir-xla", dtype="bfloat16", options=(("stablehlo", str(mlir)),))
    out = execute({"target": "stackwars.harness.measure:measure_cell",
                   "kwargs": {"spec": wrong.to_dict(), "config": FAST.to_dict()}})
    assert out["status"] == "error" and "does not match this cell" in out["error"]


def test_torch_xla_without_torch_mlir_is_unsupported_with_advice(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_mlir", None)  # import fails as if not installed
    out = execute({"target": "stackwars.harness.measure:measure_cell",
                   "kwargs": {"spec": CellSpec("gemm", "tiny", "forward", "torch-mlir-xla").to_dict(),
                              "config": FAST.to_dict()}})
    assert out["status"] == "unsupported"
    assert "pip install torch-mlir" in out["error"]
    from stackwars import registry
    ok, why = registry.backend("torch-mlir-xla").availability(
        {"torch": {"importable": True}, "jax": {"importable": True}, "torch_mlir": {"importable": False}}, "cpu")
    assert not ok and "torch-mlir is not installed" in why
    ok, _ = registry.backend("torch-mlir-xla").availability(
        {"torch": {"importable": True}, "jax": {"importable": True}, "torch_mlir": {"importable": False}}, "cpu",
        {"stablehlo": "x.mlir"})
    assert ok
