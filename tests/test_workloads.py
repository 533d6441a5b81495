"""Workload specs: references against finite differences, validation, FLOP formulas."""

import numpy as np
import pytest

from stackwars import registry
from stackwars.errors import SpecError
from stackwars.workloads.base import round_to

MICRO = ("gemm", "ffn", "mha")
VARIANTS = {"gemm": [{}], "ffn": [{}, {"activation": "gelu"}, {"layout": "flat"}],
            "mha": [{}, {"causal": False}, {"attention": "naive"}]}


def _loss(wl, cfg, params, batch):
    return float(wl.reference(cfg, "train-step", params, batch)["loss"])


@pytest.mark.parametrize("name,over", [(n, o) for n in MICRO for o in VARIANTS[n]])
def test_reference_gradient_matches_finite_differences(name, over):
    wl = registry.workload(name)
    cfg = wl.config("tiny", over)
    params, batch = wl.init(cfg, seed=3)
    ref = wl.reference(cfg, "train-step", params, batch)
    lr = wl.optimizer(cfg).lr
    rng = np.random.default_rng(0)
    eps = 1e-6
    for key, value in params.items():
        grad = -ref[f"update.{key}"] / lr
        for idx in (tuple(rng.integers(0, s) for s in value.shape) for _ in range(3)):
            plus = {**params, key: value.copy()}
            minus = {**params, key: value.copy()}
            plus[key][idx] += eps
            minus[key][idx] -= eps
            fd = (_loss(wl, cfg, plus, batch) - _loss(wl, cfg, minus, batch)) / (2 * eps)
            assert fd == pytest.approx(grad[idx], rel=1e-5, abs=1e-7), (key, idx)


def test_forward_matches_train_step_forward():
    wl = registry.workload("ffn")
    cfg = wl.config("tiny")
    p, b = wl.init(cfg, 0)
    out = wl.reference(cfg, "forward", p, b)["out"]
    loss = wl.reference(cfg, "train-step", p, b)["loss"]
    assert loss == pytest.approx(np.mean(np.sum((out - b["target"]) ** 2, axis=-1)))


def test_causal_mask_changes_the_output():
    wl = registry.workload("mha")
    causal, full = wl.config("tiny"), wl.config("tiny", {"causal": False})
    p, b = wl.init(causal, 0)
    out_c = wl.reference(causal, "forward", p, b)["out"]
    out_f = wl.reference(full, "forward", p, b)["out"]
    assert np.allclose(out_c[:, -1], out_f[:, -1])  # the last token sees everything either way
    assert not np.allclose(out_c[:, 0], out_f[:, 0])


def test_init_is_deterministic_per_seed():
    wl = registry.workload("mha")
    cfg = wl.config("tiny")
    a, _ = wl.init(cfg, 7)
    b, _ = wl.init(cfg, 7)
    c, _ = wl.init(cfg, 8)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["wq"], c["wq"])


@pytest.mark.parametrize("name,preset,over,message", [
    ("mha", "tiny", {"heads": "5"}, "must divide d_model"),
    ("gemm", "tiny", {"m": "0"}, "positive"),
    ("gemm", "tiny", {"m": "-3"}, "positive"),
    ("gemm", "tiny", {"m": "many"}, "not a valid int"),
    ("gemm", "tiny", {"q": "1"}, "unknown parameter"),
    ("gemm", "huge", {}, "unknown preset"),
    ("mha", "tiny", {"attention": "flash3"}, "not allowed"),
    ("mha", "tiny", {"causal": "maybe"}, "not a valid bool"),
])
def test_invalid_configs_are_rejected_with_a_clear_message(name, preset, over, message):
    with pytest.raises(SpecError, match=message):
        registry.workload(name).config(preset, over)


def test_unknown_names():
    with pytest.raises(SpecError, match="unknown workload 'conv'; allowed: ") as info:
        registry.workload("conv")
    assert all(name in str(info.value) for name in MICRO)
    with pytest.raises(SpecError, match="unknown backend"):
        registry.backend("tf-eager")


def test_bf16_rounding_matches_torch():
    """Chunked (temporaries of one chunk) and threaded over a dict (round_all), the rounding is
    still torch's, bit for bit, across chunk boundaries and on a multi-dimensional array."""
    import torch

    from stackwars.workloads import base

    x = np.random.default_rng(0).standard_normal(10_000) * 10
    ours = round_to(x, "bfloat16")
    theirs = torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16).to(torch.float64).numpy()
    assert np.array_equal(ours, theirs)
    big = (np.random.default_rng(1).standard_normal((3, base.ROUND_CHUNK // 2 + 7)) * 10).astype(np.float32)
    both = base.round_all({"big": big, "ids": np.arange(4), **{f"w{i}": big for i in range(6)}}, "bfloat16")
    expect = torch.from_numpy(big).to(torch.bfloat16).to(torch.float32).numpy()
    assert both["big"].shape == big.shape and np.array_equal(both["big"], expect)
    assert np.array_equal(both["w5"], expect) and both["ids"].dtype.kind == "i"


def test_analytic_flops_match_xla_cost_analysis():
    """XLA counts 2 FLOPs per multiply-add of a dot, as our formulas do; elementwise work
    (which the formulas leave out) must be a small remainder."""
    import jax
    for name, over in (("gemm", {}), ("ffn", {}), ("mha", {"causal": False, "attention": "naive"})):
        wl = registry.workload(name)
        cfg = wl.config("small", over)
        params, batch = wl.init(wl.config("tiny"), 0)
        pshape, bshape = wl.shapes(cfg)
        twin = wl.twin("jax")
        static, _ = twin.build(cfg, {})
        args = ({k: jax.ShapeDtypeStruct(s, np.float32) for k, s in pshape.items()},
                {k: jax.ShapeDtypeStruct(s, np.float32) for k, s in bshape.items()})
        cost = jax.jit(lambda p, b: twin.forward(static, p, b)).lower(*args).compile().cost_analysis()
        cost = cost[0] if isinstance(cost, (list, tuple)) else cost
        analytic = wl.flops(cfg, "forward")
        assert analytic <= cost["flops"] <= 1.05 * analytic, name


def test_param_counts_from_shapes():
    wl = registry.workload("mha")
    d = wl.describe(wl.config("paper"))
    assert d["parameters"] == 4 * 768 * 768 + 4 * 768
