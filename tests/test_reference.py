"""The float64 reference is computed once per run and shared by its cells (safely, when
cells run in parallel); where none fits, cells are compared with each other and say so.
Each cell records the harness's own overhead, and the run's summary adds it up."""

import dataclasses
import multiprocessing
import os
import time

import numpy as np
import pytest

from stackwars import registry, runner
from stackwars.harness import env as envmod
from stackwars.harness import reference as refmod
from stackwars.harness.measure import measure_cell
from stackwars.records import CellSpec, Measurement, MeasureConfig
from stackwars.report.tables import overhead_summary
from stackwars.store.results import Store

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAST = MeasureConfig(warmup=0, min_samples=2, min_time_s=0.0, max_samples=2, timeout_s=300)


def test_key_depends_on_what_the_reference_depends_on_and_not_on_the_backend():
    gpt2 = registry.workload("gpt2")
    cfg = gpt2.config("tiny")
    base = refmod.key(gpt2, cfg, "forward", 0, "float32", "float32")
    assert base == refmod.key(gpt2, gpt2.config("tiny"), "forward", 0, "float32", "float32")
    others = {refmod.key(gpt2, cfg, "train-step", 0, "float32", "float32"),
              refmod.key(gpt2, cfg, "forward", 1, "float32", "float32"),
              refmod.key(gpt2, cfg, "forward", 0, "bfloat16", "bfloat16"),
              refmod.key(gpt2, gpt2.config("tiny", {"seq": 8}), "forward", 0, "float32", "float32"),
              refmod.key(registry.workload("gpt-neo-1.3b"), registry.workload("gpt-neo-1.3b").config("tiny"),
                         "forward", 0, "float32", "float32")}
    assert base not in others and len(others) == 5


def test_one_reference_per_run_reused_by_every_backend(tmp_path, machine_probe):
    phase = "train-step"  # the larger reference, with the gradients AdamW's masking needs
    # the other framework's backend reuses it (a third backend, jax-eager, added 15 s of GPT-2
    # op by op and a fork server on the 2-core CPU, and nothing a second reuse does not show)
    specs = runner.plan_cells(["gpt2"], ["tiny"], [phase], ["torch-eager", "jax-jit"])
    probe = machine_probe
    with Store(tmp_path / "r.db") as store:
        run_id = runner.new_run(store, specs, FAST)
        done = runner.execute(store, run_id, specs, FAST, envmod.fingerprint(None, probe))
    assert [m.status for m in done] == ["ok"] * 2, [m.error for m in done]
    sources = [m.settings["reference"]["source"] for m in done]
    assert sources[0] == "computed" and all(s.startswith("reused") for s in sources[1:]), sources
    assert done[0].timeline["reference_s"] > 0 and all(m.timeline["reference_s"] == 0 for m in done[1:])
    assert all(m.parity.reference == "PyTorch twin, float64, on the host" for m in done)
    assert all(m.parity.excluded for m in done)  # AdamW's masking works from the cached gradients too


class _SlowCounting:
    """A workload-like object whose reference takes a while and leaves a mark per computation."""

    name = "slow"

    def __init__(self, marks: str):
        self.marks = marks

    def reference_name(self, cfg):
        return "float64 numpy"

    def reference(self, cfg, phase, params, batch):
        with open(os.path.join(self.marks, f"computed-{os.getpid()}"), "w"):
            pass
        time.sleep(0.5)
        return {"out": params["w"] * 2.0}


class _Cfg:
    def as_dict(self):
        return {"n": 4}


def _one(directory, marks):
    wl = _SlowCounting(marks)
    params = {"w": np.arange(4, dtype=np.float32)}
    parity, info = refmod.reference_parity(wl, _Cfg(), "forward", params, {}, {"out": params["w"] * 2.0}, 1e-6,
                                           refmod.ReferenceCache(directory), "k", "cpu", "float32", "reference",
                                           "torch", "torch-eager")
    return parity.ok, info["source"]


def test_cells_running_in_parallel_compute_the_reference_once(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        results = pool.starmap(_one, [(str(tmp_path), str(marks))] * 3)
    assert all(ok for ok, _ in results)
    assert sorted(s for _, s in results).count("computed") == 1
    assert len(os.listdir(marks)) == 1  # one process computed; two waited on the lock and loaded it
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".partial")]


def _peer_cell(backend, phase, directory):
    spec = CellSpec("gpt2", "tiny", phase, backend)
    cfg = dataclasses.replace(FAST, parity_mode="peer")
    return Measurement.from_dict(measure_cell(spec.to_dict(), cfg.to_dict(), reference_dir=str(directory)))


def test_peer_comparison_when_no_reference_is_used(tmp_path):
    first = _peer_cell("torch-eager", "forward", tmp_path)
    assert first.status == "ok" and not first.parity.checked
    assert first.parity.reference.startswith("peer: pending")
    second = _peer_cell("jax-jit", "forward", tmp_path)
    assert second.status == "ok", second.error
    assert second.parity.checked and "torch-eager (torch)" in second.parity.reference
    assert second.parity.tolerance == 2 * 1e-3 and set(second.parity.per_output) == {"out"}
    row = second.to_row()
    assert row["parity_reference"].startswith("peer")
    train = [_peer_cell(b, "train-step", tmp_path) for b in ("jax-jit", "torch-eager")]
    assert set(train[1].parity.per_output) == {"loss"} and "loss only" in train[1].parity.metric


def test_a_reference_that_fits_nowhere_falls_back_to_a_peer(monkeypatch):
    gpt2 = registry.workload("gpt2")
    cfg = gpt2.config("paper")

    class Tiny:
        available = 1 << 30

    monkeypatch.setattr(refmod.psutil, "virtual_memory", lambda: Tiny())
    where, why = refmod.placement(gpt2, cfg, "train-step", "float32", "cpu")
    assert where is None and "no float64 reference fits" in why
    where, _ = refmod.placement(registry.workload("gemm"), registry.workload("gemm").config("paper"), "forward",
                                "float32", "cpu")
    assert where == "cpu"  # micro-ops: a small numpy reference, always on the host


def test_a_peer_divergence_fails_parity(tmp_path):
    cache = refmod.ReferenceCache(str(tmp_path))
    out = {"out": np.ones((2, 3), np.float32)}
    refmod.peer_parity(out, 1e-3, cache, "k", "forward", "torch", "torch-eager")
    bad = refmod.peer_parity({"out": np.ones((2, 3), np.float32) * 1.1}, 1e-3, cache, "k", "forward", "jax",
                             "jax-jit")
    assert bad.checked and not bad.ok


def test_overhead_is_wall_time_minus_measured_windows_and_reference(tmp_path, machine_probe):
    spec = CellSpec("mha", "tiny", "forward", "torch-eager")
    m = runner.measure_one(spec, FAST, machine_probe, None, reference_dir=str(tmp_path))
    assert m.status == "ok", m.error
    t = m.timeline
    for key in ("startup_s", "import_s", "device_init_s", "prepare_s", "first_call_s", "steady_s", "memory_s",
                "observe_s", "reference_s", "parity_s"):
        assert key in t, key
    assert m.init_s == pytest.approx(t["import_s"] + t["device_init_s"])
    # every readout's calls are the steady window's (harness/window.py); the memory phase's call is measured too
    measured = m.first_call_s + m.second_call_s + sum(m.warmup_s) + t["steady_s"] + t["memory_s"]
    assert not {"energy_s", "device_time_s", "issue_s"} & set(t)
    assert m.overhead_s == pytest.approx(m.wall_s - measured - t["reference_s"])
    assert 0 < m.overhead_s < m.wall_s
    line = overhead_summary([m.to_row()])
    assert "harness overhead" in line and "computed 1, reused 0" in line


def test_the_timeline_names_the_workloads_import_and_its_counts(tmp_path, monkeypatch, machine_probe,
                                                                isolated_plugins):
    """A plugin's (or a user's model file's) import in the worker and the FLOP count each land
    in a stage of their own: they were in no stage, so the timeline of a user's model cell
    did not say where seconds of its wall time went (its file imports both frameworks; its
    FLOPs come from PyTorch's counter)."""
    import sys

    from stackwars import registry

    monkeypatch.setenv("STACKWARS_PLUGINS", "tests.plugins.slow_parts")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    # loaded as the plugin it is: imported directly, it would register as a built-in in this
    # process (and show in the workloads reference that test_docs compares, run after it)
    assert registry.origin("workload", "slow-parts") == "plugin tests.plugins.slow_parts"
    slow_parts = sys.modules["tests.plugins.slow_parts"]
    spec = CellSpec("slow-parts", "ok", "forward", "torch-eager")
    m = runner.measure_one(spec, FAST, machine_probe, None, reference_dir=str(tmp_path))
    assert m.status == "ok", m.error
    assert m.timeline["workload_s"] >= slow_parts.SLEEP_S, m.timeline
    assert m.timeline["counts_s"] >= slow_parts.SLEEP_S, m.timeline
    assert m.timeline["import_s"] < slow_parts.SLEEP_S and m.timeline["observe_s"] < slow_parts.SLEEP_S


def test_a_runs_flops_are_counted_once_and_read_by_its_other_cells(tmp_path):
    """A user's model is counted by a framework (seconds a process): the first cell of a run
    counts, the others read its count from the run's folder; without a folder each counts."""
    from stackwars.harness.measure import run_flops

    calls = []

    class Counted:
        name = "counted"

        def flops(self, cfg, phase):
            calls.append(phase)
            return 1234 if phase == "forward" else 3702

    wl, cfg = Counted(), registry.workload("gemm").config("tiny")
    shared = refmod.ReferenceCache(str(tmp_path))
    assert run_flops(wl, cfg, "forward", shared) == (1234, "counted in this process")
    assert run_flops(wl, cfg, "forward", shared) == (1234, "this run's count, made by an earlier cell")
    assert run_flops(wl, cfg, "train-step", shared)[0] == 3702  # another phase: counted
    other = dataclasses.replace(cfg, m=cfg.m + 1)
    assert run_flops(wl, other, "forward", shared)[1] == "counted in this process"  # another size: counted
    assert calls == ["forward", "train-step", "forward"]
    assert run_flops(wl, cfg, "forward", refmod.ReferenceCache(None))[1] == "counted in this process"


@pytest.mark.parametrize("phase", ["forward", "train-step"])
def test_a_models_float64_run_says_where_its_seconds_went(tmp_path, phase):
    """A model's reference times its parts (the twin built on the device, the run, the outputs'
    trip to the host: on the H200 GPT-2 paper's float64 run took 8.5 s whole, unexplained); on
    the host its outputs stay float64, and the cell compares with the float32 copy it stores."""
    from stackwars import registry
    from stackwars.harness import reference as refmod

    wl = registry.workload("gpt2")
    cfg = wl.config("tiny", {})
    params, batch = wl.init(cfg, 0)
    info: dict = {}
    ref = refmod.compute(wl, cfg, phase, params, batch, 1e-3, refmod.ReferenceCache(str(tmp_path)), "k", "cpu",
                         "float32", "auto", "torch-eager", info)
    parts = info["stages"]["float64_parts"]
    assert set(parts) == {"build_s", "run_s", "to_host_s"} and all(v >= 0 for v in parts.values()), parts
    assert sum(parts.values()) <= info["stages"]["float64_run_s"] + 1e-6
    own = wl.reference(cfg, phase, params, batch)
    assert all(np.asarray(v).dtype == np.float64 for k, v in own.items() if k != "grad_floor"), \
        {k: np.asarray(v).dtype for k, v in own.items()}
    kept = refmod.ReferenceCache(str(tmp_path)).load("k")
    assert set(ref) == set(kept) and all(np.array_equal(ref[k], kept[k]) for k in kept)


def test_the_cell_that_computes_the_reference_compares_with_what_it_stored(tmp_path):
    """The first cell of a run computes the reference in float64 and stores it as float32; it
    compares its outputs with the stored arrays, as every later cell does, so the same outputs
    get the same figure in the first process and in the others (the digest's reuse of a
    comparison, harness/digest.py, relies on it)."""
    wl = registry.workload("gemm")
    cfg = wl.config("tiny")
    params, batch = wl.init(cfg, 0)
    ref64 = wl.reference(cfg, "forward", params, batch)["out"]
    outputs = {"out": (ref64 * (1 + 3e-7)).astype(np.float32)}
    cache, key = refmod.ReferenceCache(str(tmp_path)), "k"
    args = (wl, cfg, "forward", params, batch, outputs, 2e-4, cache, key, "cpu", "float32", "auto", "torch",
            "torch-eager")
    first, info = refmod.reference_parity(*args)
    later, again = refmod.reference_parity(*args)
    assert info["source"] == "computed" and again["source"].startswith("reused")
    assert first == later and first.ok


def test_only_a_gpu_cells_reference_collects_the_process_garbage_first(tmp_path, monkeypatch):
    """A full garbage collection before each reference walked every object of the process: 0.2-0.3
    s of each fresh cell, more in a pytest worker that computes references in-process (40 s of
    test_parity's and test_loops' CPU). It frees device buffers that only a cycle holds, before a
    GPU cell's reference is placed; a CPU cell's needs none. (A GPU cell's reference forced to the
    host still collects: the collection comes before the placement it serves.)"""
    import gc

    wl = registry.workload("gemm")
    cfg = wl.config("tiny")
    params, batch = wl.init(cfg, 0)
    collected = []
    real = gc.collect
    monkeypatch.setattr(gc, "collect", lambda *a: collected.append(a) or real(*a))

    def compute(device: str, key: str) -> None:
        refmod.compute(wl, cfg, "forward", params, batch, 2e-4, refmod.ReferenceCache(str(tmp_path)), key, device,
                       "float32", "cpu", "torch-eager", {})

    compute("cpu", "a")
    assert collected == []
    compute("cuda", "b")  # mode "cpu": placed on the host without asking the GPU
    assert len(collected) == 1
