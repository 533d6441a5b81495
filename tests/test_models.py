"""End-to-end models: both twins compute the same function from the canonical weights;
published parameter counts; FLOPs; the pre-flight memory guard; `stackwars describe`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import psutil
import pytest
from typer.testing import CliRunner

from stackwars import registry, runner
from stackwars.cli import app
from stackwars.harness.measure import measure_cell
from stackwars.records import CellSpec, Measurement
from tests.conftest import ROOT
from tests.factories import PARITY

MODELS = ("resnet50", "bert-base", "gpt2", "vit-b16", "gpt-neo-1.3b", "llama3-8b")
PHASES = ("forward", "train-step")
needs_mlir = pytest.mark.skipif(
    __import__("importlib").util.find_spec("torch_mlir") is None, reason="torch-mlir (optional) not installed")

# Published sizes (Hugging Face / torchvision model cards), not derived from our code
PUBLISHED = {"resnet50": 25_557_032, "bert-base": 109_482_240, "gpt2": 124_439_808, "vit-b16": 86_567_656,
             "gpt-neo-1.3b": 1_315_575_808, "llama3-8b": 8_030_261_248}


@pytest.fixture(scope="module")
def reference_dir(tmp_path_factory):
    """One float64 reference a model, phase and dtype for the module's cells, as a run shares one
    between its backends (runner.Executor's reference_dir): each cell still compares its outputs
    with it; the reference itself is checked against transformers in tests/test_external.py."""
    return str(tmp_path_factory.mktemp("references"))


def _cell(workload, phase, backend, dtype="float32", options=(), reference_dir=None, **over):
    spec = CellSpec(workload, "tiny", phase, backend, dtype=dtype, overrides=tuple(over.items()), options=options)
    return Measurement.from_dict(measure_cell(spec.to_dict(), PARITY.to_dict(), reference_dir=reference_dir))


def _assert_parity(m: Measurement):
    assert m.status == "ok", m.error
    assert m.parity.max_rel_err <= m.parity.tolerance
    if m.spec.phase == "train-step":
        # the updated parameters were compared, not only the loss, and AdamW's masking left
        # most elements in the comparison (bfloat16 resolves the direction of fewer of them)
        updates = [k for k in m.parity.per_output if k.startswith("update.")]
        assert len(updates) >= 20 and "loss" in m.parity.per_output
        kept = [1 - m.parity.excluded.get(k, 0.0) for k in updates]
        assert sum(kept) / len(kept) > (0.9 if m.spec.dtype == "float32" else 0.5)


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("backend", ("torch-eager", "jax-jit"))
@pytest.mark.parametrize("workload", MODELS)
def test_model_parity_float32(workload, backend, phase, reference_dir):
    from stackwars.harness.reference import FLOAT32_BATCHES, tensor_tolerances

    m = _cell(workload, phase, backend, reference_dir=reference_dir)
    _assert_parity(m)
    # each tensor against 4 x the PyTorch twin's own float32 error of that tensor over 3 batches
    ref = m.settings["reference"]
    own, rule = tensor_tolerances(1e-3, ref["float32_errors"], exact=True)
    assert ref["float32_batches"] == FLOAT32_BATCHES and m.parity.rule == rule and m.parity.tolerances == own
    assert m.parity.tolerance == own[m.parity.binding] and m.parity.max_rel_err == m.parity.per_output[m.parity.binding]
    assert m.parity.reference == "PyTorch twin, float64, on the host"
    assert m.flops == registry.workload(workload).flops(registry.workload(workload).config("tiny"), phase)


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("backend", ("torch-eager", "jax-jit"))
@pytest.mark.parametrize("workload", ("resnet50", "gpt2", "llama3-8b"))
def test_model_parity_bfloat16(workload, backend, phase, reference_dir):
    m = _cell(workload, phase, backend, dtype="bfloat16", reference_dir=reference_dir)
    _assert_parity(m)
    assert m.parity.tolerance == 1e-1
    assert m.settings["backend"]["param_dtype"] == ("float32" if phase == "train-step" else "bfloat16")


OTHER_BACKENDS = [
    # gpt2's train step under torch-compile, its default optimizer (foreach, step compiled), is
    # tests/test_fairness.py's torch-compile case, with these same parity checks: 35 s of
    # Inductor on the 2-core CPU, once. Inductor's forward and backward of a BatchNorm network in
    # training mode (its running statistics updated inside the compiled graph) is
    # tests/test_user_model.py's BatchNorm net: resnet50's took 77 s of the suite on the 2-CPU VM
    ("llama3-8b", "forward", "torch-compile", ()), ("resnet50", "forward", "jax-eager", ()),
    ("gpt-neo-1.3b", "forward", "jax-eager", ()), ("bert-base", "train-step", "jax-eager", ())]


@pytest.mark.parametrize("workload,phase,backend,options", OTHER_BACKENDS, ids=["-".join(c[:3]) for c in OTHER_BACKENDS])
def test_model_parity_other_backends(workload, phase, backend, options, reference_dir):
    m = _cell(workload, phase, backend, options=options, reference_dir=reference_dir)
    _assert_parity(m)
    if workload == "resnet50" and phase == "train-step":  # the running statistics were compared too
        assert any(k.startswith("update.") and k.endswith("running_mean") for k in m.parity.per_output)


@needs_mlir
@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("workload", MODELS)
def test_model_parity_torch_xla(workload, phase, reference_dir):
    """PyTorch's program exported to StableHLO (BatchNorm statistics and AdamW moments as
    state threaded through the step) and run by XLA."""
    _assert_parity(_cell(workload, phase, "torch-mlir-xla", reference_dir=reference_dir))


def test_naive_attention_option_matches_too():
    _assert_parity(_cell("gpt-neo-1.3b", "train-step", "jax-jit", attention="naive"))


def test_jax_twin_in_float64_is_the_torch_twin():
    """In float64 the twins may differ only in the order of operations: ~1e-13 (forward, loss,
    every gradient, BatchNorm's new statistics), so a wrong epsilon, scale or mask cannot
    hide. With each model's default attention this is tests/test_external.py's float64 check
    of the twins against each other (computed beside HF's); here, the naive attention variant
    of each transformer, and resnet50, whose BatchNorm running statistics only this compares.
    (jax.nn.dot_product_attention computes its softmax in float32 even for float64 inputs, so
    float64 never goes through it: workloads/jax_util.py.)"""
    args = ["resnet50", *(f"{m}:attention=naive" for m in MODELS if m != "resnet50")]
    # without most of XLA's optimisations: the twins' arithmetic is the point here, not the
    # optimised programs (test_model_parity_* run those); 94 s of CPU against 57 s, the same
    # worst differences (3e-15 to 3e-14) either way on the 2-core VM
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu", "JAX_DISABLE_MOST_OPTIMIZATIONS": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "x64_twins.py"), *args], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for arg, errs in results.items():
        assert errs.pop("dtype") == "float64"
        assert any(k.startswith("grad.") for k in errs) and "loss" in errs
        worst = max(errs.items(), key=lambda kv: kv[1])
        assert worst[1] < 1e-10, (arg, worst)
    assert any(k.startswith("state.") for k in results["resnet50"])  # running statistics were compared


def test_paper_parameter_counts_are_published_counts_without_allocating():
    rss = psutil.Process().memory_info().rss
    for name, published in PUBLISHED.items():
        d = registry.workload(name).describe(registry.workload(name).config("paper"))
        assert d["parameters_published_part"] == published, name
        assert d["published_params"] == published
    # Llama 3.1 8B alone is 32 GB in float32: nothing of that size was allocated
    assert psutil.Process().memory_info().rss - rss < 512 * 2**20


def test_model_flops_formulas():
    wl = registry.workload("resnet50")
    # ResNet-50 at 224 px: 4.09 GMAC (torchvision) = 8.2 GFLOP per image
    per_image = wl.flops(wl.config("paper", {"batch": 1}), "forward")
    assert per_image == pytest.approx(8.18e9, rel=0.01)
    assert wl.flops(wl.config("paper"), "train-step") == 3 * 32 * per_image
    # transformers: ~2 FLOPs per parameter per token (non-embedding weights + LM head) + attention
    gpt = registry.workload("gpt-neo-1.3b")
    cfg = gpt.config("paper")
    non_embedding = gpt.parameter_count(cfg) - cfg.vocab * cfg.d_model - cfg.max_pos * cfg.d_model
    dense = 2 * (non_embedding + cfg.vocab * cfg.d_model) * cfg.seq
    assert dense < gpt.flops(cfg, "forward") < 1.15 * dense
    # local layers attend to at most 256 keys: fewer FLOPs than if every layer were global
    assert gpt.flops(cfg, "forward") < gpt.flops(gpt.config("paper", {"local_window": 4096}), "forward")


def test_preflight_records_oom_without_allocating(monkeypatch):
    def no_worker(*a, **k):
        raise AssertionError("an impossible cell must not reach a worker")

    monkeypatch.setattr(runner, "run_task", no_worker)
    rss = psutil.Process().memory_info().rss
    spec = CellSpec("llama3-8b", "paper", "train-step", "torch-eager")
    m = runner.measure_one(spec, PARITY, runner.probe_machine(inline=True), None)
    assert m.status == "oom"
    assert "pre-flight estimate" in m.error and "not allocated" in m.error
    guard = m.settings["memory_guard"]
    assert guard["kind"] == "pre-flight estimate" and guard["checked_against"] == "host"
    # parameters + gradients + both AdamW moments of 8.03e9 float32 parameters, at least
    est = guard["estimate_bytes"]
    assert est["parameters"] + est["optimizer"] >= 16 * 8_030_261_248
    assert psutil.Process().memory_info().rss - rss < 512 * 2**20


def test_preflight_checks_the_right_memory():
    small = CellSpec("resnet50", "tiny", "forward", "torch-eager")
    assert runner.preflight(small) is None  # fits: measured
    refused = runner.preflight(small, host_available=1 << 20)
    assert refused["checked_against"] == "host" and refused["available_bytes"] == 1 << 20
    gpu = CellSpec("gpt2", "paper", "train-step", "jax-jit", device="cuda")
    assert runner.preflight(gpu, host_available=1 << 40, device_free=80 << 30) is None
    refused = runner.preflight(gpu, host_available=1 << 40, device_free=1 << 30)
    assert refused["checked_against"] == "device"
    assert "on the device" in refused["message"]


def test_describe_command():
    cli = CliRunner()
    res = cli.invoke(app, ["describe", "llama3-8b", "--preset", "paper", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["parameters"] == 8_030_261_248 and d["config"]["n_kv_heads"] == 8
    assert d["flops"]["train-step"] == 3 * d["flops"]["forward"]
    assert set(d["memory_estimate_bytes"]) == {"forward/float32", "forward/bfloat16", "train-step/float32",
                                               "train-step/bfloat16"}
    res = cli.invoke(app, ["describe", "resnet50", "--preset", "small"])
    assert res.exit_code == 0 and "25,557,032" in res.output and "equal" in res.output
    res = cli.invoke(app, ["describe", "gpt2", "--preset", "huge"])
    assert res.exit_code == 2 and "allowed: tiny, small, paper" in res.output
    res = cli.invoke(app, ["describe", "llama3-8b", "--set", "n_kv_heads=5"])
    assert res.exit_code == 2 and "must divide" in res.output


def test_models_listed():
    res = CliRunner().invoke(app, ["list"])
    assert res.exit_code == 0
    for name in MODELS:
        assert name in res.output


# ---- the IR commands and the studies take the models like any workload ------------------

@needs_mlir
def test_ir_of_a_model_counts_its_matrix_products(tmp_path):
    from stackwars.ir.dump import dump_cell
    r = dump_cell(CellSpec("gpt2", "tiny", "forward", "jax-jit").to_dict(),
                  {"jax": ["jaxpr", "stablehlo", "hlo"], "torch": ["fx", "stablehlo"]}, str(tmp_path))
    # by hand: per layer q, k, v, o, two MLP matrices, QK^T and PV; then the tied LM head
    dots = 2 * (4 + 2 + 2) + 1
    assert r["jax"]["stablehlo"]["ops"]["stablehlo.dot_general"] == dots
    assert r["torch"]["stablehlo"]["ops"]["stablehlo.dot_general"] == dots
    # every parameter tensor reaches both programs as an argument, none baked in as a constant
    w = registry.workload("gpt2")
    nparams = len(w.shapes(w.config("tiny"))[0])
    assert r["jax"]["stablehlo"]["baked_constants"] == 0 and r["torch"]["stablehlo"]["baked_constants"] == 0
    assert r["torch"]["stablehlo"]["arguments"] >= nparams + 1 and r["jax"]["stablehlo"]["arguments"] >= nparams + 1
    assert r["torch"]["fx"]["graph_breaks"] == 0


def test_recompile_study_takes_a_model():
    from stackwars.studies import recompile as study
    [item] = study.plan("gpt2", "tiny", "forward", "seq", [8, 16, 8], ["jax-jit"], ["as-is"])
    rows = study.run_item(item)["rows"]
    assert [r["compiled"] for r in rows] == [True, True, False]
    assert rows[-1]["compile_count"] == 2


@pytest.mark.parametrize("name", MODELS)
def test_analytic_shapes_are_the_torch_twins_state_dict(name):
    """models/shapes.py computes the canonical tensors without PyTorch: it must list exactly
    the twin's state_dict (names, shapes, order), at every preset."""
    from stackwars.workloads.models import shapes as analytic
    from stackwars.workloads.models.torch_nets import build_meta

    wl = registry.workload(name)
    for preset in wl.presets:
        cfg = wl.config(preset)
        model = build_meta(cfg)
        expected = [(k, tuple(v.shape)) for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")]
        assert list(analytic.canonical_shapes(cfg).items()) == expected, (name, preset)
        assert analytic.counts(cfg) == (sum(p.numel() for p in model.parameters()), len(expected)), (name, preset)


def test_describe_is_instant_for_any_depth():
    """describe never allocates or loops in proportion to the model (100,000 layers once hung)."""
    import time
    rss = psutil.Process().memory_info().rss
    t0 = time.perf_counter()
    wl = registry.workload("llama3-8b")
    d = wl.describe(wl.config("paper", {"n_layers": "100000"}))
    assert time.perf_counter() - t0 < 2.0
    assert psutil.Process().memory_info().rss - rss < 64 * 2**20
    per_layer = (d["parameters"] - wl.parameter_count(wl.config("paper", {"n_layers": "1"})))
    assert per_layer == 99_999 * 218_112_000  # Llama 3 8B: 218.1 M parameters per layer
    neo = registry.workload("gpt-neo-1.3b")
    assert neo.describe(neo.config("paper", {"n_layers": "100000"}))["flops"]["forward"] > 0


def _brute_force_attention_flops(cfg):
    """Keys attended summed query by query, layer by layer (what the closed form replaces)."""
    total = 0
    for i in range(cfg.n_layers):
        for j in range(cfg.seq):
            keys = min(j + 1, cfg.local_window) if cfg.layer_is_local(i) else j + 1
            total += cfg.batch * 4 * cfg.n_heads * cfg.d_head * keys
    return total


def test_windowed_attention_flops_in_closed_form_equal_the_sum():
    wl = registry.workload("gpt-neo-1.3b")
    for seq, window in ((16, 4), (512, 256), (100, 300), (7, 7)):
        over = {"seq": seq, "local_window": window, "n_layers": 3}
        cfg = wl.config("paper", over)
        # the same model attending to nothing but itself would need a zero window: compare
        # two windows instead, so that everything but attention cancels
        other = wl.config("paper", {**over, "local_window": 1})
        assert wl.flops(cfg, "forward") - wl.flops(other, "forward") == \
            _brute_force_attention_flops(cfg) - _brute_force_attention_flops(other)


def test_weights_are_drawn_in_blocks_the_same_whatever_the_threads_and_rounded_in_chunks_as_one_by_one(monkeypatch):
    """A model's tensors are drawn in blocks of rows, each from its own stream, in parallel
    threads (so GPT-2's token embedding is not drawn by one thread while the others idle): the
    weights do not depend on how many threads drew them; the blocks of a tensor are not
    repeats of one block; a tensor of one block is its single stream (seed, name). Rounding to
    bfloat16 in chunks across threads gives round_to's values, tensor by tensor."""
    import numpy as np

    from stackwars.workloads import base, models

    monkeypatch.setattr(models, "DRAW_BLOCK", 32 * 16)  # tiny's 96x32 token embedding: 6 blocks of 16 rows
    wl = registry.workload("gpt2")
    cfg = wl.config("tiny", {})
    many, _ = wl.init(cfg, 0)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})  # one thread draws every block
    one, _ = wl.init(cfg, 0)
    assert list(many) == list(one) and all(np.array_equal(many[k], one[k]) for k in many)
    emb = many["tok_emb.weight"]
    blocks = models._blocks(emb.shape)
    assert blocks == [(lo, lo + 16) for lo in range(0, 96, 16)]
    assert len({emb[lo:hi].tobytes() for lo, hi in blocks}) == len(blocks)
    assert 0.015 < float(emb.std()) < 0.025  # every block drawn at the embedding's scale (0.02)
    bias = many["blocks.0.attn.q.bias"]  # 32 values: one block, from the stream (seed, its name)
    rng = np.random.default_rng(np.random.SeedSequence(0, spawn_key=(models._stream("blocks.0.attn.q.bias"),)))
    np.testing.assert_array_equal(bias, rng.standard_normal(bias.shape, dtype=np.float32) * np.float32(0.02))
    assert len(models._blocks(many["pos_emb.weight"].shape)) == 2  # 32x32 at 512 a block: 16 rows each

    monkeypatch.setattr(base, "ROUND_CHUNK", 100)  # several chunks a tensor, in threads
    monkeypatch.setattr(base, "ROUND_THREADS_FROM", 0)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    arrays = {**many, "ids": np.arange(7)}
    rounded = base.round_all(arrays, "bfloat16")
    assert list(rounded) == list(arrays) and rounded["ids"] is arrays["ids"]
    for k, v in many.items():
        expected = base.round_to(v, "bfloat16")
        assert rounded[k].dtype == np.float32 and rounded[k].shape == v.shape
        np.testing.assert_array_equal(rounded[k], expected)
    assert not np.array_equal(rounded["tok_emb.weight"], emb)  # rounding changed it


@pytest.mark.parametrize("workload", ("llama3-8b", "resnet50"))
def test_building_a_jax_twin_never_holds_two_whole_copies_of_the_weights(workload, monkeypatch):
    """The JAX twins transpose every kernel into Flax's layout. Built from a dict that kept
    every canonical array until the end, llama3-8b's weights stood twice on the H200 (33.4 GB
    before the first call for 16 GB of weights), and XLA's unresettable peak reported that as
    jax-jit's memory. The live arrays while it builds stay within one copy and one tensor."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from stackwars.workloads.models import jax_nets

    wl = registry.workload(workload)
    cfg = wl.config("tiny", {})
    params, _ = wl.init(cfg, 0)
    sizes = [np.asarray(v).nbytes for v in params.values()]
    live = []
    real = jax_nets._to_nnx

    def watched(leaf, x):
        out = real(leaf, x)
        live.append(sum(a.nbytes for a in jax.live_arrays()))
        return out

    monkeypatch.setattr(jax_nets, "_to_nnx", watched)
    before = sum(a.nbytes for a in jax.live_arrays())
    given = {k: jnp.asarray(v) for k, v in params.items()}
    jax_nets.build(cfg, given)
    assert not given and len(live) == len(sizes)  # every canonical array placed, and let go
    assert max(live) - before <= sum(sizes) + 2 * max(sizes), (max(live) - before, sum(sizes))


@pytest.mark.parametrize("workload", ("resnet50", "gpt2"))
def test_a_jax_twins_weights_are_laid_out_on_the_host_not_by_compiled_programs(workload):
    """The JAX backends put each canonical weight in Flax's layout on the host, then on the
    device: transposed on the device, every kernel shape compiled a program of its own, and
    resnet50's jax-jit ``prepare`` took 6.2 s in a process with empty caches on the H200
    (1.1-1.4 s with warm ones). Building the program compiles nothing, and its tree holds
    what the device's transposes give."""
    import jax
    import numpy as np
    from jax import monitoring

    from stackwars.backends.jax_common import to_device_array
    from stackwars.workloads.models import jax_nets

    wl = registry.workload(workload)
    cfg = wl.config("tiny", {})
    params, batch = wl.init(cfg, 0)
    jax.clear_caches()  # no program compiled by an earlier test stands in for one
    compiled: list[str] = []

    def listen(name, seconds, **kw):
        if name == "/jax/core/compile/backend_compile_duration":
            compiled.append(name)

    monitoring.register_event_duration_secs_listener(listen)
    try:
        program = registry.backend("jax-jit").load({}).program(wl, cfg, "forward", dict(params), dict(batch), "cpu", "float32")
    finally:
        monitoring.unregister_event_duration_listener(listen)
    assert compiled == []
    dev = jax.devices("cpu")[0]
    _, expected = jax_nets.build(cfg, {k: to_device_array(v, "float32", dev) for k, v in params.items()})
    got, want = jax.tree.leaves(program.args[0]), jax.tree.leaves(expected)
    assert len(got) == len(want) and len(got) >= len(params)
    for g, w in zip(got, want):
        assert isinstance(g, jax.Array) and g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("workload", ("gpt2", "resnet50"))
def test_making_a_jax_twin_draws_no_random_numbers_and_has_nnxs_own_structure(workload, monkeypatch):
    """``build`` fills every parameter from the canonical set, so the model it makes under
    nnx.eval_shape needs no random draw; NNX's Rngs cost 3.8 ms a draw there (llama3-8b's
    making took 4.1 s of every JAX process's ``prepare`` on the 2-core VM, 0.6 s without).
    The structure and every shape are those NNX's own Rngs give."""
    import jax
    from flax import nnx

    from stackwars.workloads.models import jax_nets

    cfg = registry.workload(workload).config("tiny", {})
    kind = jax_nets.ResNet if workload == "resnet50" else jax_nets.Transformer
    want = nnx.split(nnx.eval_shape(lambda: kind(cfg, nnx.Rngs(0))), nnx.Param, ...)

    def no_draw(self, *args, **kwargs):
        raise AssertionError("a random draw while making the model")

    monkeypatch.setattr(nnx.RngStream, "__call__", no_draw)
    got = nnx.split(nnx.eval_shape(lambda: jax_nets.make(cfg)), nnx.Param, ...)
    assert got[0] == want[0]  # the graph
    for g, w in zip(got[1:], want[1:]):
        assert jax.tree.structure(g) == jax.tree.structure(w)
        assert [(x.shape, x.dtype) for x in jax.tree.leaves(g)] == [(x.shape, x.dtype) for x in jax.tree.leaves(w)]
