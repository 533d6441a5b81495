"""The custom kernels: softmax and layernorm written in Triton (PyTorch) and Pallas (JAX),
run in interpret mode on the CPU, against the float64 reference and each framework's own
operator; and how they appear in a table."""

from __future__ import annotations

import os

import pytest

from stackwars import registry
from stackwars.errors import SpecError
from stackwars.records import CellSpec, MeasureConfig

FAST = MeasureConfig(warmup=0, min_samples=2, min_time_s=0.0, max_samples=2)


PROBE = {"torch": {"importable": True}, "jax": {"importable": True}}


def _cell(workload, backend, impl):
    """In a worker, as the tool runs it: Triton interprets only in a process that imported
    it with TRITON_INTERPRET=1, which the worker sets for these cells."""
    from stackwars import runner

    spec = CellSpec(workload, "tiny", "forward", backend, overrides=(("impl", impl),))
    return runner.measure_one(spec, FAST, PROBE, None)


@pytest.mark.parametrize("workload", ("softmax", "layernorm"))
@pytest.mark.parametrize("backend", ("torch-eager", "jax-jit"))
def test_custom_kernel_matches_the_float64_reference_in_interpret_mode(workload, backend):
    """On this CPU a Triton kernel can only run interpreted: its parity is the interpreter's
    proof of the kernel; the framework operators meet the same reference in test_parity."""
    m = _cell(workload, backend, "custom")
    assert m.status == "ok", m.error
    assert m.parity.max_rel_err <= 1e-6  # float32 statistics: far inside the 2e-4 tolerance
    assert m.first_call_s > 0 and len(m.samples) >= FAST.min_samples  # min_samples counts samples (blocks)


def test_a_process_that_imported_triton_without_the_interpreter_is_told_why():
    import subprocess
    import sys

    code = ("import triton, torch; from stackwars.workloads.kernels import torch_twin as t\n"
            "try:\n    t.kernels('cpu')\nexcept RuntimeError as e:\n    print(e)")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert "without TRITON_INTERPRET=1" in out.stdout, out.stderr[-2000:]


def test_custom_kernels_run_only_where_a_kernel_language_exists():
    wl = registry.workload("softmax")
    cfg = wl.config("tiny", {"impl": "custom"})
    assert wl.unsupported(cfg, "torch", "torch-eager", "forward") is None
    assert wl.unsupported(cfg, "jax", "jax-jit", "forward") is None
    assert "StableHLO" in wl.unsupported(cfg, "torch", "torch-mlir-xla", "forward")
    assert "timed as launched" in wl.unsupported(cfg, "torch", "torch-compile", "forward")
    with pytest.raises(SpecError, match="power of two"):
        wl.config("tiny", {"cols": 100})
    with pytest.raises(SpecError, match="unknown phase"):
        wl.check_phase("train-step")


def test_one_table_holds_the_framework_operators_and_the_kernels_labelled():
    """--set impl=framework,custom plans both implementations; the table groups them as rows."""
    from stackwars import runner
    from stackwars.report.tables import formatted, title
    from stackwars.verdict.figures import group_rows

    specs = runner.plan_cells(["softmax"], ["tiny"], ["forward"], ["torch-eager", "jax-jit"],
                              overrides={"impl": "framework,custom"})
    assert sorted((s.backend, dict(s.overrides)["impl"]) for s in specs) == [
        ("jax-jit", "custom"), ("jax-jit", "framework"), ("torch-eager", "custom"), ("torch-eager", "framework")]
    rows = [{"workload": "softmax", "preset": "tiny", "phase": "forward", "device": "cpu", "dtype": "float32",
             "backend": s.backend, "framework": "torch" if s.backend.startswith("torch") else "jax",
             "overrides": dict(s.overrides), "options": {}, "status": "ok", "steady_samples": [1e-3, 1e-3]}
            for s in specs]
    groups = group_rows(rows)
    assert len(groups) == 1 and title(next(iter(groups))) == "softmax · tiny · forward · cpu · float32"
    labels = sorted(r["backend"] for r in formatted(next(iter(groups.values()))))
    assert labels == ["jax-jit", "jax-jit · pallas kernel (interpreted)", "torch-eager",
                      "torch-eager · triton kernel (interpreted)"]
    with pytest.raises(SpecError, match="an empty item in the list"):
        runner.plan_cells(["softmax"], ["tiny"], ["forward"], ["jax-jit"], overrides={"impl": "framework,"})


def test_compile_break_even_sets_a_compiled_operator_against_the_same_eager_operator():
    """torch-compile of torch.softmax is set against torch-eager's torch.softmax, not against
    the (interpreted) Triton kernel in the same table."""
    from stackwars.report import build
    from stackwars.verdict.figures import group_rows

    def row(backend, impl, first, steady):
        return {"workload": "softmax", "preset": "small", "phase": "forward", "device": "cpu", "dtype": "float32",
                "backend": backend, "framework": "torch", "overrides": {"impl": impl}, "options": {}, "status": "ok",
                "first_call_s": first, "steady_median_s": steady, "steady_samples": [steady * (1 + i / 1000)
                                                                                     for i in range(20)]}
    rows = [row("torch-eager", "framework", 0.002, 260e-6), row("torch-eager", "custom", 1.2, 1.03),
            row("torch-compile", "framework", 12.0, 300e-6)]
    (even,) = build.break_even(group_rows(rows))
    assert (even["compiled"], even["eager"]) == ("torch-compile", "torch-eager")
    assert even["verdict"].startswith("never pays")  # 300 µs is not faster than 260 µs
    labels = {p["backend"] for p in build.speedups(group_rows(rows))}
    assert labels == {"torch-eager", "torch-eager · triton kernel (interpreted)", "torch-compile"}
