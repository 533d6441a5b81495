"""Every workload x phase x backend on `tiny` agrees with the float64 reference.

Cells are measured in-process (the worker's own function, without the process) with a
minimal steady state: what is asserted is the parity of the first call's outputs, and
that the measurement produced first/second/steady timings.
"""

import dataclasses
import warnings

import numpy as np
import pytest

from stackwars import registry
from stackwars.harness.measure import measure_cell
from stackwars.records import CellSpec, Measurement
from tests.factories import PARITY

BACKENDS = ("torch-eager", "torch-compile", "jax-eager", "jax-jit")


def _measure(spec: CellSpec, cache_dir=None) -> Measurement:
    cache = {"mode": "warm", "dir": cache_dir} if cache_dir else None
    return Measurement.from_dict(measure_cell(spec.to_dict(), PARITY.to_dict(), cache=cache))


@pytest.mark.parametrize("phase", ("forward", "train-step"))
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("workload", ("gemm", "ffn", "mha"))
def test_parity_float32(workload, phase, backend):
    m = _measure(CellSpec(workload, "tiny", phase, backend))
    assert m.status == "ok", m.error
    assert m.parity.max_rel_err <= m.parity.tolerance
    expected = {"forward": {"out"}, "train-step": {"loss"} | {
        f"update.{k}" for k in registry.workload(workload).shapes(registry.workload(workload).config("tiny"))[0]}}
    assert set(m.parity.per_output) == expected[phase]
    assert m.first_call_s > 0 and m.second_call_s > 0 and len(m.samples) == PARITY.min_samples == 1
    assert m.flops > 0 and m.bytes_moved > 0


@pytest.mark.parametrize("phase", ("forward", "train-step"))
@pytest.mark.parametrize("backend", ("torch-eager", "jax-jit"))
@pytest.mark.parametrize("workload", ("gemm", "ffn", "mha"))
def test_parity_bfloat16(workload, phase, backend):
    m = _measure(CellSpec(workload, "tiny", phase, backend, dtype="bfloat16"))
    assert m.status == "ok", m.error
    # bf16 is really bf16: far less exact than float32, yet within its tolerance
    assert 1e-4 < m.parity.max_rel_err <= m.parity.tolerance
    if phase == "train-step":
        assert m.settings["backend"]["param_dtype"] == "float32"  # master weights


@pytest.mark.parametrize("backend", ("torch-eager", "jax-jit"))
def test_ffn_flat_layout(backend):
    m = _measure(CellSpec("ffn", "tiny", "train-step", backend, overrides=(("layout", "flat"),)))
    assert m.status == "ok", m.error


@pytest.mark.parametrize("backend", ("torch-eager", "jax-jit"))
def test_mha_variants(backend):
    for over in ({"causal": False}, {"attention": "naive"}, {"attention": "naive", "causal": False}):
        m = _measure(CellSpec("mha", "tiny", "train-step", backend, overrides=tuple(over.items())))
        assert m.status == "ok", (over, m.error)


def test_a_wrong_computation_is_a_parity_fail(monkeypatch):
    """The reference of a non-causal attention against a causal implementation."""
    wl = registry.workload("mha")
    real = type(wl).reference

    def wrong(self, cfg, phase, params, batch):
        return real(self, dataclasses.replace(cfg, causal=not cfg.causal), phase, params, batch)

    monkeypatch.setattr(type(wl), "reference", wrong)
    m = _measure(CellSpec("mha", "tiny", "forward", "torch-eager"))
    assert m.status == "parity_fail"
    assert m.parity.max_rel_err > 100 * m.parity.tolerance
    assert m.samples  # the timings are kept: a parity failure is a result, not a crash
    assert "parity" in m.error


def test_compile_stats_come_from_the_frameworks():
    m = _measure(CellSpec("ffn", "tiny", "train-step", "jax-jit"))
    c = m.compile
    assert set(c.breakdown) == {"trace_s", "lower_s", "compile_s"}
    assert c.total_s == pytest.approx(sum(c.breakdown.values()))
    assert c.recompiles == 0 and c.graphs == 1
    assert c.extra["xla_cost_analysis"]["flops"] > 0
    assert m.first_call_s > c.total_s  # the first call also executes
    assert m.memory.compiled["argument_size_in_bytes"] > 0

    m = _measure(CellSpec("ffn", "tiny", "train-step", "torch-compile", options=(("optimizer_impl", "default"),)))
    c = m.compile
    assert c.graphs == 1 and c.graph_breaks == 0 and c.recompiles == 0  # the model alone: one graph
    assert c.total_s > 0
    # Inductor ran, or the (session-wide, warm) AOTAutograd cache says why it did not
    assert c.breakdown["inductor_s"] > 0 or c.extra["aot_autograd_cache"].get("autograd_cache_hit", 0) > 0
    assert m.first_call_s > c.total_s * 0.9

    # by default the optimizer step is compiled too: its own graph, and the graph breaks
    # PyTorch's optimizer code asks for itself (torch._dynamo.graph_break())
    m = _measure(CellSpec("ffn", "tiny", "train-step", "torch-compile"))
    c = m.compile
    assert c.graphs == 2 and c.recompiles == 0
    assert all("graph_break()" in r for r in c.break_reasons) and c.graph_breaks == 2
    # the parts add up to the whole, and none is negative: the backward's Inductor compile
    # happens outside the forward's backend_compile (AOTAutograd once read -8.6 s of a resnet50 step)
    parts = [c.breakdown[k] for k in ("dynamo_s", "aot_autograd_s", "inductor_s")]
    assert sum(parts) == pytest.approx(c.total_s) and min(parts) >= 0, c.breakdown


def test_torch_compiles_parts_add_up_when_the_backward_compiles_on_its_own():
    """Dynamo's timers as a cold train step leaves them (a resnet50 step: 4.7 s tracing, 80 s
    Inductor of which 18 s in the lazily compiled backward): Inductor's time spans the forward's
    backend_compile and the backward compile, so AOTAutograd's part is what is left of both."""
    from stackwars.backends.torch_compile import TorchCompile

    c = TorchCompile._stats({"entire_frame_compile": 76.3, "backend_compile": 71.6, "inductor_compile": 80.3,
                             "entire_backward_compile": 18.3, "code_gen": 60.6})
    assert c.total_s == pytest.approx(94.6)
    assert c.breakdown["dynamo_s"] == pytest.approx(4.7) and c.breakdown["inductor_s"] == pytest.approx(80.3)
    assert c.breakdown["aot_autograd_s"] == pytest.approx(9.6)
    assert sum(c.breakdown[k] for k in ("dynamo_s", "aot_autograd_s", "inductor_s")) == pytest.approx(c.total_s)

    m = _measure(CellSpec("ffn", "tiny", "forward", "jax-eager"))
    assert m.compile.extra["primitive_executables_compiled"] >= 0
    assert m.settings["applied"]["jax_default_matmul_precision"] == "float32"


def test_settings_are_pinned_and_recorded():
    m = _measure(CellSpec("gemm", "tiny", "forward", "torch-eager"))
    applied = m.settings["applied"]
    assert applied["torch_float32_matmul_precision"] == "highest"
    assert applied["torch_cuda_matmul_allow_tf32"] is False
    mem = m.memory
    assert mem.baseline_rss_bytes > 0
    assert mem.peak_rss_bytes == max(mem.peak_rss_first_call_bytes, mem.peak_rss_steady_bytes)
    assert mem.peak_rss_steady_bytes >= mem.baseline_rss_bytes // 2


def _adamw_case():
    """A reference AdamW step over two tensors: `w` with a resolvable gradient, one row of
    which no input touched (gradient exactly zero), and `kb`, whose gradient is rounding noise."""
    from stackwars.harness.parity import compare
    g = np.array([[1.0, -0.5, 0.2], [0.0, 0.0, 0.0]])
    p = np.ones((2, 3))
    lr, wd = 1e-3, 0.01
    ref = {"loss": np.asarray(1.0), "update.w": -lr * wd * p - lr * np.sign(g), "grad.w": g,
           "update.kb": np.array([lr, -lr]), "grad.kb": np.array([1e-17, -2e-17]),
           # a lone exact zero (cancellation) in a bias: float32 may hold 1e-9 there, either sign
           "update.b": np.array([-lr, -lr * wd]), "grad.b": np.array([0.5, 0.0]),
           # the same in a 1x1 convolution [out, in, 1, 1]: a lone zero, not an untouched filter
           "update.c": -lr * np.array([[[[1.0]], [[wd]]], [[[1.0]], [[1.0]]]]),
           "grad.c": np.array([[[[0.5]], [[0.0]]], [[[0.3]], [[0.2]]]]), "grad_floor": np.asarray(1e-6)}
    return compare, ref


def test_adamw_masking_keeps_what_is_resolvable():
    compare, ref = _adamw_case()
    good = {k: v.copy() for k, v in ref.items() if not k.startswith("grad")}
    good["update.kb"] = -good["update.kb"]  # noise: either direction is right
    good["update.b"][1] = -1e-3  # float32's gradient there was 1e-9 > 0
    good["update.c"][0, 1, 0, 0] = 2e-5  # likewise, float32 held -2e-10 there
    par = compare(good, ref, 1e-3)
    assert par.ok and par.excluded == {"update.w": 0.0, "update.kb": 1.0, "update.b": 0.5, "update.c": 0.25}
    flipped = {**good, "update.w": good["update.w"] * np.array([[1, -1, 1], [1, 1, 1]])}
    assert not compare(flipped, ref, 1e-3).ok  # a wrong direction where the gradient is resolvable
    no_decay = {**good, "update.w": np.vstack([good["update.w"][:1], np.zeros((1, 3))])}
    assert not compare(no_decay, ref, 1e-3).ok  # the untouched row must still decay


def test_comparing_a_slice_at_a_time_gives_the_whole_tensors_answer(monkeypatch):
    """The harness compares large tensors a few rows at a time; the answer, the elements left
    out and a NaN anywhere must be those of the whole tensor at once."""
    import numpy as np

    from stackwars.harness import parity as parmod

    rng = np.random.default_rng(3)
    ref = {"loss": np.float64(2.5), "update.w": rng.normal(size=(40, 6)), "update.b": rng.normal(size=9)}
    g = rng.normal(size=(40, 6))
    g[7] = 0.0  # an untouched row: kept
    g[11, 2] = 1e-12  # a noise-level element: left out
    ref.update({"grad.w": g, "grad.b": rng.normal(size=9)})
    out = {"loss": np.float32(2.5001), "update.w": (ref["update.w"] + rng.normal(size=(40, 6)) * 1e-6).astype(np.float32),
           "update.b": ref["update.b"].astype(np.float32)}
    out["update.w"][11, 2] = 5.0  # wrong, but where the reference gradient is noise
    whole = parmod.compare(out, ref, 1e-4)
    monkeypatch.setattr(parmod, "CHUNK", 7)
    sliced = parmod.compare(out, ref, 1e-4)
    assert sliced.per_output == whole.per_output and sliced.excluded == whole.excluded
    assert 0 < whole.excluded["update.w"] < 0.01 and whole.ok
    monkeypatch.setattr(parmod, "_workers", lambda: 4)  # the slices in threads, whatever the machine
    threaded = parmod.compare(out, ref, 1e-4)
    assert threaded.per_output == whole.per_output and threaded.excluded == whole.excluded
    for where, bad in (((39, 5), np.nan), ((20, 1), np.nan), ((11, 2), np.inf)):  # the last slice, a middle
        broken = {**out, "update.w": out["update.w"].copy()}  # one, an element left out as noise
        broken["update.w"][where] = bad
        for workers in (1, 4):
            monkeypatch.setattr(parmod, "_workers", lambda: workers)
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                p = parmod.compare(broken, ref, 1e-4)
            assert not [w for w in said if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in said]
            assert p.per_output["update.w"] == float("inf") and "NaN or infinity" in p.failure, (where, workers)


def test_few_long_rows_are_cut_into_slices_and_a_nan_in_any_slice_is_found(monkeypatch):
    """A forward's logits (GPT-2's: 8 rows of 51 million) are compared a flat slice at a time,
    not a row at a time, and max|ref| too: the same figure as in one piece, and a NaN in a
    middle slice of the output or of the reference still fails the check."""
    from stackwars.harness import parity as parmod

    rng = np.random.default_rng(5)
    ref = {"out": rng.normal(size=(2, 3, 50))}
    out = {"out": (ref["out"] * (1 + 1e-4)).astype(np.float32)}
    whole = parmod.compare(out, ref, 1e-2)
    seen = []
    real = parmod._in_threads
    monkeypatch.setattr(parmod, "_in_threads", lambda part, starts: seen.append(len(starts)) or real(part, starts))
    monkeypatch.setattr(parmod, "CHUNK", 7)
    monkeypatch.setattr(parmod, "_workers", lambda: 4)
    sliced = parmod.compare(out, ref, 1e-2)
    assert sliced.per_output == whole.per_output and sliced.ok
    assert seen == [43, 43]  # 300 elements in slices of 7, for max|ref| and for the error, not 2 rows
    for side, why in (("out", "the output holds NaN or infinity"), ("ref", "the reference holds NaN or infinity")):
        broken = {"out": out["out"].copy()} if side == "out" else {"out": ref["out"].copy()}
        broken["out"][1, 0, 20] = np.nan  # element 170: the 25th of 43 slices
        p = parmod.compare(broken, ref, 1e-2) if side == "out" else parmod.compare(out, broken, 1e-2)
        assert p.per_output["out"] == float("inf") and why in p.failure, side


def test_nan_or_infinity_anywhere_is_a_failure_never_inf_within_inf():
    """A forward that returns NaN against a float64 reference that is NaN too once passed as
    'inf ✓': the tolerance derived from the reference's own float32 error became infinite."""
    from stackwars.harness import reference as refmod
    from stackwars.harness.parity import compare
    from stackwars.records import parity_ok

    good = {"out": np.ones((4, 3))}
    nan = {"out": np.full((4, 3), np.nan)}
    inf = {"out": np.array([[1.0, np.inf, 1.0]])}
    for outputs, ref, why in ((nan, good, "the output holds NaN or infinity"),
                              (good, nan, "the reference holds NaN or infinity"),
                              (nan, nan, "the reference holds NaN or infinity"),
                              ({"out": np.ones((1, 3))}, inf, "the reference holds NaN or infinity")):
        p = compare(outputs, ref, 2e-4)
        assert not p.ok and why in p.failure, (p, why)
    # the tolerance: derived from a float32 run that is not finite, it is not finite, and fails
    tol, rule = refmod.derived_tolerance(2e-4, float("inf"))
    assert tol == float("inf") and "not finite" in rule
    p = compare(good, good, tol)
    assert p.max_rel_err == 0.0 and not p.ok and "tolerance is not finite" in p.failure
    # a stored row is judged by the same rule
    assert parity_ok(float("inf"), float("inf")) is False and parity_ok(float("nan"), 1.0) is False
    assert parity_ok(1e-5, 2e-4) is True and parity_ok(None, 2e-4) is None


def test_outputs_reach_the_host_exactly_and_no_wider_than_needed():
    """Both frameworks' host copies for the parity check: bfloat16, float16 and float32 as the
    device holds them (exact: the comparison subtracts in float64), float64 and integers as
    float64."""
    import jax.numpy as jnp
    import torch

    from stackwars.backends import jax_common, torch_common

    values = np.array([1 / 3, 1e-3, -2.5e4, 7.0])
    for name in ("bfloat16", "float16", "float32", "float64"):
        t = torch.tensor(values, dtype=getattr(torch, name))
        got = torch_common.to_numpy(t)
        assert got.dtype == (np.float64 if name == "float64" else np.dtype(getattr(jnp, name))), name
        assert np.array_equal(got.astype(np.float64), t.double().numpy()), name  # not a bit moved
        j = jnp.asarray(values, dtype=getattr(jnp, name)) if name != "float64" else np.asarray(values)
        got = jax_common.to_numpy(j)
        assert got.dtype == (np.float64 if name == "float64" else np.dtype(getattr(jnp, name))), name
        assert np.array_equal(got.astype(np.float64), np.asarray(j).astype(np.float64)), name
    assert torch_common.to_numpy(torch.tensor([3])).dtype == np.float64
    assert jax_common.to_numpy(jnp.asarray([3])).dtype == np.float64


@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
def test_a_narrow_output_is_compared_as_its_float32_widening_is(dtype):
    """JAX's bfloat16 and float16 outputs reach the comparison unwidened (each slice is widened
    as it is subtracted): the same figure as their float32 copy, and a NaN or an infinity in a
    middle slice still fails."""
    import ml_dtypes

    from stackwars.harness import parity as parity_mod
    from stackwars.harness.parity import compare

    narrow = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(np.float16)
    ref = np.random.default_rng(3).standard_normal((3, 2 * parity_mod.CHUNK + 5)).astype(np.float32)
    out = ref.astype(narrow)
    wide = compare({"out": out.astype(np.float32)}, {"out": ref}, 1e-2)
    got = compare({"out": out}, {"out": ref}, 1e-2)
    assert got.max_rel_err == wide.max_rel_err and 0 < got.max_rel_err < 1e-2 and got.ok
    for bad in (np.nan, np.inf):
        broken = out.copy()
        broken[1, parity_mod.CHUNK + 7] = bad
        assert compare({"out": broken}, {"out": ref}, 1e-2).per_output["out"] == float("inf")


def test_each_output_is_judged_by_its_own_tolerance():
    """Issue 63, point 3: a tensor whose float32 rounding is large (an update of 3e-5 to a scale near
    1.0) sets its own tolerance, not the step's: the figure is the output nearest its tolerance,
    and one rule (error <= tolerance) still judges the cell and a stored row."""
    from stackwars.harness import reference as refmod
    from stackwars.harness.parity import compare

    ref = {"loss": np.array(2.0), "update.scale": np.full(8, 3e-5), "update.w": np.full((4, 4), 1e-3)}
    out = {"loss": np.array(2.0 * (1 + 5e-6)), "update.scale": ref["update.scale"] * (1 + 1e-3),
           "update.w": ref["update.w"] * (1 + 2e-7)}
    # the PyTorch twin's own float32 error of each tensor: the scale's update rounds badly everywhere
    errors = {"loss": 1e-6, "update.scale": 1.1e-3, "update.w": 1e-7}
    tols, rule = refmod.tensor_tolerances(1e-3, errors, exact=True)
    assert tols == {"loss": 4e-6, "update.scale": pytest.approx(4.4e-3), "update.w": refmod.UPDATE_FLOOR}
    assert rule.startswith("per tensor: 4 x") and "3 batches" in rule
    p = compare(out, ref, 1e-3, tolerances=tols)
    # the loss (5e-6 against 4e-6) binds, though the scale's error (1e-3) is larger
    assert p.binding == "loss" and p.max_rel_err == pytest.approx(5e-6) and p.tolerance == 4e-6 and not p.ok
    assert p.tolerances == tols and "nearest its tolerance (loss)" in p.metric
    out["loss"] = np.array(2.0 * (1 + 1e-6))
    p = compare(out, ref, 1e-3, tolerances=tols)
    # within every tolerance; the scale's update, furthest off (6e-4 of its group's scale), is not the figure
    assert p.ok and p.per_output["update.scale"] == pytest.approx(6e-4) and p.max_rel_err < 1e-5
    # one scalar tolerance of 4.4e-3 (the old rule: the worst tensor's) would pass a loss 1000 x off
    assert compare({**out, "loss": np.array(2.0 * (1 + 1e-3))}, ref, 4.4e-3).ok
    assert not compare({**out, "loss": np.array(2.0 * (1 + 1e-3))}, ref, 1e-3, tolerances=tols).ok
    # TF32 matmuls: the dtype's fixed tolerance is a floor too
    tf32, why = refmod.tensor_tolerances(1e-2, errors, exact=False)
    assert min(tf32.values()) == 1e-2 and "not float32" in why
    # a float32 run with NaN or infinity gives no per-tensor rule (the scalar one says why it fails)
    assert refmod.tensor_tolerances(1e-3, {**errors, "loss": float("nan")}, exact=True)[0] is None
    assert refmod.tensor_tolerances(1e-3, None, exact=True)[0] is None
    # an output that is NaN binds and fails, whatever the others' ratios; so does a tolerance not finite
    p = compare({**out, "update.w": np.full((4, 4), np.nan)}, ref, 1e-3, tolerances=tols)
    assert p.binding == "update.w" and not p.ok
    p = compare(out, ref, 1e-3, tolerances={**tols, "update.w": float("inf")})
    assert p.binding == "update.w" and not p.ok
