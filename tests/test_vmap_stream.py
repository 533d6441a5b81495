"""The vmap study (every way of batching agrees with numpy; S5's method measured beside the
harness) and the dynamic-shape stream (a bucketed stream compiles once per bucket, exact
shapes once per length, every request's output checked)."""

import numpy as np
import pytest

from stackwars.errors import SpecError
from stackwars.harness.measure import measure_cell
from stackwars.records import CellSpec, Measurement
from stackwars.studies import stream, vmap
from stackwars.workloads.vmapped import IMPLS
from tests.factories import PARITY


@pytest.mark.parametrize("backend", ("torch-eager", "jax-eager", "jax-jit"))
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("workload", ("vmap-dot", "vmap-attention"))
def test_every_way_of_batching_agrees_with_numpy(workload, impl, backend):
    spec = CellSpec(workload, "tiny", "forward", backend, overrides=(("impl", impl),))
    m = Measurement.from_dict(measure_cell(spec.to_dict(), PARITY.to_dict()))
    assert m.status == "ok", m.error
    assert m.parity.max_rel_err < 1e-5 and m.parity.reference == "float64 numpy, on the host"


def test_torch_compile_of_vmap_agrees_too():
    spec = CellSpec("vmap-attention", "tiny", "forward", "torch-compile", overrides=(("impl", "vmap"),))
    m = Measurement.from_dict(measure_cell(spec.to_dict(), PARITY.to_dict()))
    assert m.status == "ok" and m.parity.ok, m.error


def test_s5_method_reads_an_unsynchronised_clock_and_rss():
    spec = CellSpec("vmap-dot", "tiny", "forward", "jax-jit", overrides=(("impl", "vmap"),))
    got = vmap.s5_method(spec.to_dict(), PARITY.to_dict(), calls=200)
    assert got["calls"] == 200 and got["s5_per_call_s"] > 0
    assert got["until_done_per_call_s"] >= got["s5_per_call_s"]  # the work finishes after the clock was read
    assert got["s5_memory_bytes"] >= 0


def test_s5s_window_is_its_1000_calls_unless_they_take_longer_than_the_window():
    assert vmap.s5_calls(1e-4) == vmap.S5_CALLS == 1000  # 0.1 s: S5's own window
    assert vmap.s5_calls(vmap.S5_WINDOW_S / 1000) == 1000  # exactly the window
    assert vmap.s5_calls(0.01) == 500  # 1000 calls would take 10 s: as many as fill 5 s
    assert vmap.s5_calls(0.13) == vmap.S5_MIN_CALLS  # 39 fill 5 s, but never fewer than 100
    assert vmap.s5_calls(1e-3, calls=200, window_s=0.1) == 100 and vmap.s5_calls(1e-5, calls=200) == 200


def test_a_slow_calls_s5_window_fills_its_seconds_and_the_row_and_finding_say_how_many_calls():
    spec = CellSpec("vmap-dot", "tiny", "forward", "torch-eager", overrides=(("impl", "loop"),))
    got = vmap.s5_method(spec.to_dict(), PARITY.to_dict(), calls=1000, window_s=1e-6)  # every call is slower
    assert got["calls"] == vmap.S5_MIN_CALLS and got["s5_per_call_s"] > 0
    m = Measurement.from_dict(measure_cell(spec.to_dict(), PARITY.to_dict()))
    row = vmap.row(m, got)
    assert m.status == "ok" and row["s5_calls"] == vmap.S5_MIN_CALLS
    # read 3 ms against 1 ms, waiting changing nothing: a gap no RSS read explains, in a window of 100 calls
    row = {**row, "steady_median_s": 1e-3, "s5_per_call_s": 3e-3, "s5_until_done_per_call_s": 3e-3,
           "s5_vs_ours": 3.0, "contended": False}
    text = "\n".join(vmap.findings([row]))
    assert "(3.00x): more than its RSS reads cost; one unrepeated window of 100 calls" in text


def test_vmap_findings_say_how_much_s5_misleads():
    def r(backend, impl, t, s5=None, done=None):
        return {"op": "dot", "batch": 256, "backend": backend, "impl": impl, "status": "ok",
                "label": vmap.LABELS[(backend, impl)], "steady_median_s": t, "s5_per_call_s": s5,
                "s5_until_done_per_call_s": done or t, "s5_vs_ours": s5 / t if s5 else None}
    rows = [r("torch-eager", "loop", 1e-3), r("torch-eager", "vmap", 1e-4),
            r("torch-eager", "batched", 5e-5, s5=1.5e-4, done=1.5e-4),  # S5 slower, and waiting changes nothing
            r("jax-eager", "loop", 2e-2), r("jax-eager", "vmap", 1e-3), r("jax-jit", "vmap", 1e-5, s5=2e-6),
            {**r("jax-jit", "batched", 1e-7), "contended": True},  # would be fastest, but the machine was busy
            {**r("jax-eager", "batched", 1e-3, s5=2.2e-3, done=2.2e-3)}]  # a gap no RSS read explains
    text = "\n".join(vmap.findings(rows))
    assert "fastest jax.jit(jax.vmap)" in text
    assert "the PyTorch Python loop takes 10.0x the time of torch.func.vmap" in text
    assert "jax.vmap without jit takes 100.0x the time of jax.jit(jax.vmap)" in text
    assert "jax.jit(jax.vmap): S5's method reads 2.0 µs per call against the harness's 10.0 µs (0.20x): its " \
           "unsynchronised clock read the dispatch, the work took 10.0 µs per call once waited for" in text
    assert "PyTorch batched op: S5's method reads 150.0 µs per call against the harness's 50.0 µs (3.00x): waiting " \
           "for the work changed nothing" in text and "the RSS read after every call inside its timed loop" in text
    assert "JAX batched, no jit: S5's method reads 2.20 ms per call against the harness's 1.00 ms (2.20x): more " \
           "than its RSS reads cost" in text


def test_vmap_plan_validates():
    with pytest.raises(SpecError, match="unknown op 'conv'"):
        vmap.plan(["conv"], None, [4], ["jax-jit"], "tiny", "cpu", "float32")
    specs = vmap.plan(["dot"], ["loop"], [2, 8], ["jax-jit", "torch-eager"], "tiny", "cpu", "float32")
    assert len(specs) == 4 and {dict(s.overrides)["batch"] for s in specs} == {2, 8}


def test_lengths_are_seeded_long_tailed_and_bounded():
    a = stream.draw_lengths(500, 8, 1024, "lognormal:median=64,sigma=1.2", 0)
    assert a == stream.draw_lengths(500, 8, 1024, "lognormal:median=64,sigma=1.2", 0)
    assert min(a) >= 8 and max(a) <= 1024 and max(a) == 1024  # the tail reaches the cap
    assert np.median(a) < np.mean(a)  # long-tailed
    with pytest.raises(SpecError, match="unknown --dist"):
        stream.draw_lengths(5, 8, 64, "pareto", 0)
    with pytest.raises(SpecError, match="exceeds gpt2's position table"):
        stream.plan("gpt2", "tiny", ["jax-jit"], None, 64)


def test_a_bucketed_stream_compiles_once_per_bucket(tmp_path):
    lengths = [5, 7, 9, 12, 16, 7]  # buckets 8, 8, 16, 16, 16, 8: two; five distinct lengths
    result = {}
    for backend, policy in (("jax-jit", "buckets"), ("jax-jit", "exact"), ("torch-compile", "buckets")):
        item = {"workload": "mha", "preset": "tiny", "backend": backend, "policy": policy, "exact": True}
        out = stream.run_policy(item, lengths, reference_dir=str(tmp_path))
        result[backend, policy] = out["rows"]
    assert result["jax-jit", "buckets"][-1]["compile_count"] == 2
    assert result["jax-jit", "exact"][-1]["compile_count"] == 5
    assert result["torch-compile", "buckets"][-1]["compile_count"] == 2
    for rows in result.values():
        assert all(r["parity_ok"] for r in rows), [r["parity"] for r in rows]
    summary = {(s["backend"], s["policy"]): s for s in stream.summary([r for rs in result.values() for r in rs])}
    assert summary["jax-jit", "buckets"]["wasted_flops_fraction"] > 0
    assert summary["jax-jit", "exact"]["wasted_flops_fraction"] == 0


def test_a_static_policy_past_dynamos_recompile_limit_is_named():
    import io

    from rich.console import Console

    from stackwars.report.studies import stream_table

    def r(i, seq, compiles, backend="torch-compile", policy="exact", limit=8):
        return {"request": i, "seq": seq, "padded_to": None, "call_s": 1e-3, "compiled": i < compiles,
                "compiles_in_call": int(i < compiles), "compile_count": min(i + 1, compiles), "flops_needed": 1,
                "flops_done": 1, "parity": 1e-7, "parity_ok": True, "backend": backend, "policy": policy,
                "exact": True, "recompile_limit": limit}
    rows = [r(i, 8 + i, 9) for i in range(12)]  # 12 lengths, 9 compiles: 1 + the limit of 8 recompiles
    rows += [r(i, 8 + i, 12, backend="jax-jit", limit=None) for i in range(12)]
    (torch_s, jax_s) = stream.summary(rows)
    assert torch_s["shapes"] == 12 and torch_s["uncompiled_shapes"] == 3
    assert jax_s["uncompiled_shapes"] == 0
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(stream_table([torch_s, jax_s], rows, "t"))
    text = console.export_text()
    assert "torch-compile exact: 9 compiles for 12 shapes, 3 of them served uncompiled: Dynamo stops recompiling" \
           in " ".join(text.split())
    assert "jax-jit exact: " not in text
