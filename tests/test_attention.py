"""The attention rule (each framework at its best, with its reason), the explicit
implementations, and that every cell records what actually ran."""

import dataclasses

import pytest

from stackwars import registry
from stackwars.errors import Unsupported
from stackwars.harness.measure import measure_cell
from stackwars.records import CellSpec, Measurement
from stackwars.report.tables import to_text
from stackwars.workloads import attention
from stackwars.workloads.attention import Geometry, choose
from tests.factories import PARITY

GPT2 = [Geometry(head_dim=64, causal=True)]
HOPPER, AMPERE, VOLTA = "9.0", "8.0", "7.0"


def test_best_for_jax_is_cudnn_where_every_constraint_holds():
    c = choose("jax", "best", "cuda", "bfloat16", GPT2, HOPPER)
    assert c.implementation == "cudnn" and "every documented constraint" in c.reason
    # GPT-Neo's local layers: a left-only window, causal
    neo = GPT2 + [Geometry(head_dim=128, causal=True, local_window=256)]
    assert choose("jax", "best", "cuda", "bfloat16", neo, HOPPER).implementation == "cudnn"


@pytest.mark.parametrize("device,dtype,geometries,cc,why", [
    ("cpu", "bfloat16", GPT2, None, "needs a CUDA device"),
    ("cuda", "float32", GPT2, HOPPER, "dtype float32"),
    ("cuda", "bfloat16", [Geometry(head_dim=72 + 4, causal=True)], HOPPER, "head dim 76"),
    ("cuda", "bfloat16", [Geometry(head_dim=264, causal=True)], HOPPER, "at most 256"),
    ("cuda", "bfloat16", [Geometry(head_dim=192, causal=True)], AMPERE, "at most 128"),
    ("cuda", "bfloat16", GPT2, VOLTA, "compute capability 7.0"),
    ("cuda", "bfloat16", [Geometry(head_dim=64, causal=False, explicit_mask=True)], HOPPER, "explicit mask"),
    ("cuda", "bfloat16", [Geometry(head_dim=64, causal=False, local_window=8)], HOPPER, "two-sided"),
    ("cuda", "bfloat16", GPT2, None, "compute capability is unknown"),
])
def test_best_for_jax_falls_back_to_xla_and_says_which_constraint_failed(device, dtype, geometries, cc, why):
    c = choose("jax", "best", device, dtype, geometries, cc)
    assert c.implementation == "xla"
    assert why in c.reason, c.reason


def test_head_dim_256_is_allowed_on_hopper_only():
    g = [Geometry(head_dim=256, causal=True)]
    assert choose("jax", "best", "cuda", "bfloat16", g, HOPPER).implementation == "cudnn"
    assert choose("jax", "best", "cuda", "bfloat16", g, AMPERE).implementation == "xla"


def test_best_for_torch_is_its_own_dispatcher_and_sdpa_is_each_default():
    assert choose("torch", "best", "cuda", "bfloat16", GPT2, HOPPER).implementation == "sdpa"
    assert choose("jax", "sdpa", "cuda", "bfloat16", GPT2, HOPPER).implementation == "sdpa"  # JAX's default: XLA
    assert choose("torch", "naive", "cpu", "float32", GPT2).implementation == "naive"


@pytest.mark.parametrize("framework,requested,device,dtype,message", [
    ("jax", "flash", "cuda", "bfloat16", "not a jax implementation"),
    ("jax", "math", "cpu", "float32", "not a jax implementation"),
    ("torch", "xla", "cpu", "float32", "not a torch implementation"),
    ("jax", "cudnn", "cuda", "float32", "dtype float32"),
    ("jax", "cudnn", "cpu", "bfloat16", "CUDA device"),
    ("torch", "cudnn", "cpu", "float32", "CUDA device"),
])
def test_explicit_implementations_a_framework_lacks_are_unsupported(framework, requested, device, dtype, message):
    with pytest.raises(Unsupported, match=message):
        choose(framework, requested, device, dtype, GPT2, HOPPER)


def test_explicit_implementations_pass_through():
    assert choose("jax", "cudnn", "cuda", "bfloat16", GPT2, HOPPER).implementation == "cudnn"
    assert choose("torch", "flash", "cuda", "bfloat16", GPT2, HOPPER).implementation == "flash"
    assert choose("torch", "math", "cpu", "float32", GPT2).implementation == "math"


def test_workloads_expose_their_attention_geometry():
    neo = registry.workload("gpt-neo-1.3b")
    cfg = neo.config("paper")
    assert neo.attention_geometry(cfg) == [Geometry(128, True), Geometry(128, True, local_window=256)]
    assert registry.workload("bert-base").attention_geometry(registry.workload("bert-base").config("paper")) == \
        [Geometry(64, False)]
    assert registry.workload("resnet50").attention_geometry(registry.workload("resnet50").config("tiny")) is None
    assert registry.workload("gemm").attention_geometry(registry.workload("gemm").config("tiny")) is None
    mha = registry.workload("mha")
    cfg, choice = attention.resolve(mha, mha.config("paper"), "jax", "cuda", "bfloat16", HOPPER)
    assert cfg.attention == "cudnn" and choice.requested == "best"


def test_reading_what_ran():
    assert attention.jax_ran('custom_call_target="__cudnn$fmhaSoftmax"', "cudnn") == "cudnn"
    assert attention.jax_ran("dot(...) fusion(...)", "cudnn") == "xla"  # asked for cuDNN, ran XLA: says so
    assert attention.torch_ran(["aten::mm", "aten::_scaled_dot_product_efficient_attention"]) == "efficient"
    assert attention.torch_ran(["aten::mm", "aten::softmax"]) is None
    assert attention.torch_ran_kernels(["void pytorch_flash::flash_fwd_kernel<...>"]) == "flash"


def _cell(backend, phase="forward", **over) -> Measurement:
    spec = CellSpec("mha", "tiny", phase, backend, overrides=tuple(over.items()))
    return Measurement.from_dict(measure_cell(spec.to_dict(), PARITY.to_dict()))


@pytest.mark.parametrize("backend,phase,ran", [
    ("jax-jit", "forward", "xla"), ("jax-jit", "train-step", "xla"), ("jax-eager", "forward", "xla"),
    ("torch-eager", "forward", "flash (CPU kernel)"), ("torch-eager", "train-step", "flash (CPU kernel)"),
    ("torch-compile", "forward", "flash (CPU kernel)"),
])
def test_cells_record_the_attention_that_ran_on_the_cpu(backend, phase, ran):
    m = _cell(backend, phase)
    assert m.status == "ok", m.error
    assert m.settings["backend"]["attention"]["requested"] == "best"
    assert m.settings["observed"]["attention"]["ran"] == ran
    assert m.to_row()["attention"] == ran


def test_an_explicit_torch_kernel_is_what_runs_and_the_table_shows_it():
    m = _cell("torch-eager", attention="math")
    assert m.status == "ok", m.error
    assert m.attention_ran == "math"
    text = to_text([m.to_row()], width=220)
    assert "torch-eager · math" in text


def test_naive_attention_is_recorded_as_naive():
    for backend in ("torch-eager", "jax-jit"):
        m = _cell(backend, attention="naive")
        assert m.status == "ok" and m.attention_ran == "naive", (backend, m.error)


def test_unsupported_choice_becomes_an_unsupported_cell(machine_probe):
    from stackwars import runner
    spec = CellSpec("mha", "tiny", "forward", "jax-jit", overrides=(("attention", "cudnn"),))
    m = runner.measure_one(spec, dataclasses.replace(PARITY, timeout_s=120), machine_probe, None)
    assert m.status == "unsupported" and "CUDA device" in m.error
