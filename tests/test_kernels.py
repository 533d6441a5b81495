"""The custom kernels: softmax and layernorm written in Triton (PyTorch) and Pallas (JAX),
run in interpret mode on the CPU, against the float64 reference and each framework's own
operator; and how they appear in a table."""

from __future__ import annotations

import numpy as np
import pytest

from stackwars import registry
from stackwars.errors import SpecError
from stackwars.harness.measure import measure_cell
from stackwars.records import CellSpec, Measurement, MeasureConfig

FAST = MeasureConfig(warmup=0, min_samples=2, min_time_s=0.0, max_samples=2)


def _cell(workload, backend, impl, **over):
    spec = CellSpec(workload, "tiny", "forward", backend, overrides=(("impl", impl), *over.items()))
    return Measurement.from_dict(measure_cell(spec.to_dict(), FAST.to_dict()))


@pytest.mark.parametrize("workload", ("softmax", "layernorm"))
@pytest.mark.parametrize("backend", ("torch-eager", "jax-jit"))
def test_custom_kernel_matches_the_float64_reference_in_interpret_mode(workload, backend):
    m = _cell(workload, backend, "custom")
    assert m.status == "ok", m.error
    assert m.parity.max_rel_err <= 1e-6  # float32 statistics: far inside the 2e-4 tolerance
    assert m.first_call_s > 0 and len(m.samples) == 2


def test_the_kernels_really_ran_interpreted_and_agree_with_the_framework_operators():
    """The same inputs through the Triton kernel (interpreted), F.layer_norm and the Pallas
    kernel agree with the float64 reference elementwise; an output 1% off would not."""
    import jax.numpy as jnp
    import torch

    from stackwars.workloads.kernels import jax_twin, torch_twin

    wl = registry.workload("layernorm")
    cfg = wl.config("tiny", {"impl": "custom", "cols": 256, "rows": 8})
    params, batch = wl.init(cfg, 1)
    ref = wl.reference(cfg, "forward", params, batch)["out"]
    tp = {k: torch.tensor(v, dtype=torch.float32) for k, v in params.items()}
    x = torch.tensor(batch["x"], dtype=torch.float32)
    triton_out = torch_twin.build(cfg, tp)(x).detach().numpy()
    assert type(torch_twin.kernels("cpu").layernorm_rows).__name__ == "InterpretedFunction"
    torch_op = torch_twin.build(cfg.__class__(**{**cfg.as_dict(), "impl": "framework"}), tp)(x).detach().numpy()
    jp = {k: jnp.asarray(v, jnp.float32) for k, v in params.items()}
    pallas_out = np.asarray(jax_twin.forward(cfg, jp, {"x": jnp.asarray(batch["x"], jnp.float32)}))
    for out in (triton_out, torch_op, pallas_out):
        assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) < 1e-6
    assert not np.allclose(triton_out, ref * 1.01, rtol=1e-4)  # the comparison can fail


def test_custom_kernels_run_only_where_a_kernel_language_exists():
    wl = registry.workload("softmax")
    cfg = wl.config("tiny", {"impl": "custom"})
    assert wl.unsupported(cfg, "torch", "torch-eager", "forward") is None
    assert wl.unsupported(cfg, "jax", "jax-jit", "forward") is None
    assert "StableHLO" in wl.unsupported(cfg, "torch", "torch-xla", "forward")
    assert "timed as launched" in wl.unsupported(cfg, "torch", "torch-compile", "forward")
    with pytest.raises(SpecError, match="power of two"):
        wl.config("tiny", {"cols": 100})
    with pytest.raises(SpecError, match="unknown phase"):
        wl.check_phase("train-step")


def test_one_table_holds_the_framework_operators_and_the_kernels_labelled():
    """--set impl=framework,custom plans both implementations; the table groups them as rows."""
    from stackwars import runner
    from stackwars.report.tables import formatted, group_rows, title

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
    assert labels == ["jax-jit", "jax-jit · pallas kernel", "torch-eager", "torch-eager · triton kernel"]
    with pytest.raises(SpecError, match="empty value"):
        runner.plan_cells(["softmax"], ["tiny"], ["forward"], ["jax-jit"], overrides={"impl": "framework,"})
