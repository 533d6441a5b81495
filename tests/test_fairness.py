"""Each framework's train step is what its experts run, and every cell says what ran: PyTorch's
fused optimizer in eager mode, its step compiled under torch.compile (as JAX's optax update
is inside its jit); the old behaviour stays selectable. Parity holds in every variant. The
tolerance of a float32 cell is derived from the reference implementation's own float32
error where that exceeds the dtype's fixed one, and the record says which rule set it."""

from __future__ import annotations

import pytest

from stackwars import registry
from stackwars.harness.measure import measure_cell
from stackwars.harness.reference import FLOAT32_ERROR_FACTOR, derived_tolerance
from stackwars.records import CellSpec, Measurement
from tests.factories import PARITY


def _cell(workload, backend, **options):
    spec = CellSpec(workload, "tiny", "train-step", backend, options=tuple(options.items()))
    return Measurement.from_dict(measure_cell(spec.to_dict(), PARITY.to_dict()))


@pytest.mark.slow
@pytest.mark.parametrize("backend, choice, ran", [
    ("torch-eager", "fast", "fused"),
    ("torch-compile", "fast", "foreach, step compiled (torch.compile)"),
    ("torch-eager", "default", "default: for-loop"),  # PyTorch's own rule on the CPU: the old behaviour
    ("torch-eager", "compiled", "foreach, step compiled (torch.compile)"),
])
def test_the_optimizer_that_ran_is_recorded_and_parity_holds(backend, choice, ran):
    """Each optimizer implementation's step in parity with the float64 reference: the loss and
    every updated parameter (the model parity tests' checks; torch-compile with "fast", the
    default, is also the models' gpt2 train step under Inductor)."""
    from tests.test_models import _assert_parity

    m = _cell("gpt2", backend, optimizer_impl=choice)
    _assert_parity(m)
    notes = m.settings["backend"]
    assert notes["optimizer_choice"] == choice and notes["optimizer_impl"] == ran
    assert m.to_row()["optimizer_impl"] == ran
    if backend == "torch-compile":
        assert notes["compiled"].endswith("optimizer step compiled")
    assert m.flops == registry.workload("gpt2").flops(registry.workload("gpt2").config("tiny"), "train-step")


def test_the_tolerance_rule():
    assert derived_tolerance(1e-3, None) == (1e-3, "fixed for the dtype: 1.0e-03")
    tol, rule = derived_tolerance(1e-3, 1e-5)  # a well-conditioned model: the fixed tolerance stands
    assert tol == 1e-3 and rule.startswith("fixed for the dtype")
    tol, rule = derived_tolerance(1e-3, 9.3e-4)  # GPT-Neo small's forward on the 2-core CPU
    assert tol == pytest.approx(FLOAT32_ERROR_FACTOR * 9.3e-4) and "own float32 error" in rule


def test_a_float32_model_cell_records_its_rule_and_a_micro_op_its_fixed_one():
    m = _cell("gpt-neo-1.3b", "torch-eager")
    ref = m.settings["reference"]
    assert ref["float32_error"] == max(ref["float32_errors"].values()) > 0
    assert m.parity.rule.startswith("per tensor:") and m.parity.tolerance == m.parity.tolerances[m.parity.binding]
    g = _cell("gemm", "jax-jit")
    assert "float32_error" not in g.settings["reference"] and g.parity.rule == "fixed for the dtype: 2.0e-04"
