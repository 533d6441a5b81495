"""A GPU verdict that decides (issue 55): the gate knows what a slowdown can touch and what it
could not judge; the deciding pair measured together; processes spent where they can change the
answer. CPU tests, with synthetic machines and fakes where the effect is a GPU's."""

from __future__ import annotations

import dataclasses

import pytest

from stackwars.records import MeasureConfig
from stackwars.report import gate
from stackwars.report import verdict as vd
from tests.test_verdict import _cell, _store


def _proc(backend, scale, proc, device="cuda", issue_share=None, **settings):
    """A process of ``backend`` on ``device``, its issue time ``issue_share`` of its call (from
    the timed window), with extra settings (contention, a canary)."""
    m = _cell(backend, scale, proc)
    m = dataclasses.replace(m, spec=dataclasses.replace(m.spec, device=device))
    s = dict(settings)
    if issue_share is not None:
        median = sorted(m.samples)[len(m.samples) // 2]
        s["issue"] = {"samples": [issue_share * median] * len(m.samples), "window": "steady"}
    return dataclasses.replace(m, settings=s)


def test_a_device_bound_process_on_a_busy_host_stays_in_a_host_bound_one_is_left_out(tmp_path):
    """gpt2 on the H100: jax-jit's host issued a call in 1.1-1.3 ms of its 6.0-6.4 ms, and three
    of its six processes were left out as slowed though their medians matched. A device-bound
    process (issue time 20% of its call) decides whatever the host did, and the row says why; a
    host-bound one (95%) is left out; on a CPU, where the host is the device, always."""
    busy = {"contention": {"contended": True, "fraction": 0.4, "window_s": 0.5, "judged": True}}
    device = [_proc("jax-jit", 1.0, p, issue_share=0.2, **busy) for p in range(3)]
    host = [_proc("torch-compile", 1.0, p, issue_share=0.95, **busy) for p in range(3)]
    _, found = _store(tmp_path / "g.db", device + host)
    for r in found:
        assert gate.host_reason(r).startswith("others took 40%")
    jax = [r for r in found if r["backend"] == "jax-jit"]
    torch = [r for r in found if r["backend"] == "torch-compile"]
    assert all(gate.busy_reason(r) is None and gate.device_bound(r) for r in jax)
    assert "device-bound, the host issued a call in 20% of its time" in gate.kept_reason(jax[0])
    assert all(gate.busy_reason(r) and not gate.device_bound(r) for r in torch)
    # the same processes on a CPU: host-bound by definition, left out
    cpu = [_proc("jax-jit", 1.0, p, device="cpu", issue_share=0.2, **busy) for p in range(3)]
    _, found = _store(tmp_path / "c.db", cpu)
    assert all(gate.busy_reason(r) for r in found)
    # an issue time from a window of its own (an older record) is not evidence: left out
    old = [_proc("jax-jit", 1.0, p, issue_share=0.2, **busy) for p in range(3)]
    for m in old:
        m.settings["issue"].pop("window")
    _, found = _store(tmp_path / "o.db", old)
    assert all(gate.busy_reason(r) for r in found)


def test_a_window_too_short_to_judge_is_never_clean(tmp_path):
    """--min-time 0.6 over three processes gave windows of 0.2 s, under the 0.25 s in which the
    kernel's ticks can say what others took: no process was flagged while both CPUs were taken,
    and the verdict said JAX faster, 0.000. Such a process is not judged, so never clean."""
    short = {"contention": {"contended": False, "fraction": 0.9, "window_s": 0.2, "judged": False}}
    cells = [_proc("torch-eager", 3000.0, p, device="cpu", **short) for p in range(3)]
    cells += [_proc("jax-jit", 1.0, p, device="cpu", **short) for p in range(3)]
    _, found = _store(tmp_path / "s.db", cells)
    assert all(gate.unjudged(r) and "not judged" in gate.busy_reason(r) for r in found)
    (v,) = vd.verdicts(found)
    assert v["verdict"] == "cannot say" and v["reason_tag"] == "busy machine", v["reason"]


def test_the_harness_lengthens_a_window_until_it_can_be_judged():
    """A process asked for 0.05 s of samples is timed for at least the 0.25 s in which others'
    share of its CPUs can be read, and its record says it was judged."""
    from stackwars.harness.measure import measure_cell
    from stackwars.records import CellSpec, Measurement
    from stackwars.stats import CONTENTION_MIN_WINDOW_S

    config = MeasureConfig(warmup=1, min_samples=2, min_time_s=0.05)
    m = Measurement.from_dict(measure_cell(CellSpec("gemm", "tiny", "forward", "torch-eager").to_dict(),
                                           config.to_dict()))
    assert m.status == "ok" and m.settings["window"]["span_s"] >= CONTENTION_MIN_WINDOW_S
    assert m.settings["contention"]["judged"] and not gate.unjudged(m.to_row())


class Shifted:
    """The synthetic machine of tests/test_verdict.py, JAX's program ``shift`` slower."""

    def __init__(self, seed, between, shift):
        from tests.test_verdict import SyntheticExecutor

        self.inner, self.shift = SyntheticExecutor(seed, between), shift

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def run(self, specs, measure, on_start=None):
        for m in self.inner.run(specs, measure, on_start):
            if m.spec.backend == "jax-jit":
                m = dataclasses.replace(m, samples=tuple(x * (1 + self.shift) for x in m.samples))
            yield m


def _sequential_runs(tmp_path, tag, shift, trials, between=0.08, n0=3, max_processes=12):
    """(decisions, looks taken) of adaptive runs through orchestrate.Run.measure."""
    from stackwars import orchestrate
    from stackwars.records import CellSpec
    from stackwars.store.results import Store, rows

    config = MeasureConfig(processes=n0, max_processes=max_processes)
    out = []
    for trial in range(trials):
        specs = [CellSpec("gemm", "small", "forward", b, repeat=r) for r in range(n0) for b in ("torch-eager", "jax-jit")]
        with Store(tmp_path / f"{tag}-{trial}.db") as store:
            run_id = store.create_run(specs, {"measure": config.to_dict()}, command=tag)
            orchestrate.Run(store, run_id, specs, config, {"cpu_model": "Test CPU", "cpu_count_logical": 2},
                            Shifted(trial, between, shift)).measure()
            (v,) = vd.verdicts(rows(store, run_id))
        out.append((v["verdict"], v.get("look", 0) + 1))
    return out


def test_the_sequential_boundary_keeps_the_aa_rate_and_decides_sooner_than_bonferroni(tmp_path, monkeypatch):
    """Up to four looks of three processes a side, on a machine whose processes spread 8%: the
    same program on both sides names a false winner at most 5% of the time (with a binomial
    margin), and a true 15% difference is decided in fewer looks than with the split of the
    error into equal shares the verdict used before, run for run on the same draws (a wider
    level at a look can only decide sooner)."""
    from stackwars import stats

    trials = 80
    aa = _sequential_runs(tmp_path, "aa", 0.0, trials)
    false = sum(v in ("JAX faster", "PyTorch faster") for v, _ in aa)
    assert false <= trials * (stats.VERDICT_ALPHA + 2 * (0.05 * 0.95 / trials) ** 0.5), false
    assert sum(looks for _, looks in aa) > trials  # top-ups were taken: the boundary was exercised
    sequential = _sequential_runs(tmp_path, "seq", 0.15, 40)
    monkeypatch.setattr(stats, "look_alpha", stats.bonferroni_alpha)
    union = _sequential_runs(tmp_path, "bonf", 0.15, 40)
    assert all(s <= u for (_, s), (_, u) in zip(sequential, union))
    assert sum(s for _, s in sequential) < sum(u for _, u in union), (sequential, union)
    assert sum(v == "JAX faster" for v, _ in sequential) >= sum(v == "JAX faster" for v, _ in union)


def test_screening_drops_a_clearly_slower_backend_and_never_a_frameworks_best(tmp_path):
    """After one process a cell: torch-compile twice torch-eager's time (even its fastest sample
    over 1.5x) is screened out, jax-eager within 1.5x of jax-jit is kept, the analysis path beside
    PyTorch's own modes and a failed cell get no more processes; each framework's best is kept,
    whatever the draws."""
    import numpy as np

    from stackwars.records import Parity

    cells = [_cell("torch-eager", 1.0, 0), _cell("torch-compile", 2.0, 0), _cell("jax-jit", 1.0, 0),
             _cell("jax-eager", 1.2, 0), _cell("torch-mlir-xla", 0.9, 0, framework="torch"),
             dataclasses.replace(_cell("torch-compile", 0.5, 0, workload="ffn"), parity=Parity(1.0, 2e-4))]
    cells += [_cell("torch-eager", 1.0, 0, workload="ffn"), _cell("jax-jit", 1.0, 0, workload="ffn")]
    _, found = _store(tmp_path / "s.db", cells)
    decisions = vd.screen(found)
    keep = {k.split("/")[0] + "/" + k.split("/")[3]: d["keep"] for k, d in decisions.items()}
    assert keep == {"gemm/torch-eager": True, "gemm/torch-compile": False, "gemm/jax-jit": True,
                    "gemm/jax-eager": True, "gemm/torch-mlir-xla": False, "ffn/torch-compile": False,
                    "ffn/torch-eager": True, "ffn/jax-jit": True}, decisions
    why = {k.split("/")[3]: d["why"] for k, d in decisions.items() if k.startswith("gemm")}
    assert why["torch-compile"].startswith("clearly slower: its fastest sample") and "analysis path" in why[
        "torch-mlir-xla"]
    # never a framework's best, whatever the speeds
    rng = np.random.default_rng(5)
    for trial in range(20):
        speeds = rng.uniform(0.5, 3.0, size=4)
        cells = [_cell(b, float(x), 0, seed=trial) for b, x in zip(("torch-eager", "torch-compile", "jax-eager",
                                                                     "jax-jit"), speeds)]
        _, found = _store(tmp_path / f"r{trial}.db", cells)
        decisions = vd.screen(found)
        for fw, names in (("torch", ("torch-eager", "torch-compile")), ("jax", ("jax-eager", "jax-jit"))):
            fastest = min(names, key=lambda b: speeds[("torch-eager", "torch-compile", "jax-eager",
                                                       "jax-jit").index(b)])
            assert next(d["keep"] for k, d in decisions.items() if f"/{fastest}/" in k), (trial, fw)


def test_a_run_screens_after_one_process_a_cell_and_a_resume_does_not_screen_again(tmp_path):
    """orchestrate.Run: every cell's first process, then --processes only for the cells kept; the
    screened-out cell stays at one process, its table row says so, and resuming the run plans no
    second screening."""
    from stackwars import orchestrate
    from stackwars.records import CellSpec
    from stackwars.store.results import Store, rows
    from tests.test_verdict import MACHINE

    class Slow:  # every backend's program about 1 ms, torch-compile's twice that
        name, local, shared_dir = "slow", True, None

        def check(self, specs):
            pass

        def scratch(self, kind):
            return None

        def run(self, specs, measure, on_start=None):
            for spec in specs:
                factor = 2.0 if spec.backend == "torch-compile" else 1.0
                m = _cell(spec.backend, factor, spec.repeat)
                yield dataclasses.replace(m, spec=spec, wall_s=1.0)

    config = MeasureConfig(processes=3, max_processes=3)
    specs = [CellSpec("gemm", "small", "forward", b, repeat=r) for r in range(3)
             for b in ("torch-eager", "torch-compile", "jax-jit")]
    notes = []
    with Store(tmp_path / "s.db") as store:
        run = orchestrate.Run.start(store, specs, config, {}, Slow())
        run.env = MACHINE
        run.measure(orchestrate.Hooks(on_note=notes.append))
        found = rows(store, run.run_id)
        count = {b: sum(r["backend"] == b for r in found) for b in ("torch-eager", "torch-compile", "jax-jit")}
        assert count == {"torch-eager": 3, "torch-compile": 1, "jax-jit": 3}, count
        assert "screened out after one process each: 1 of 3 cells" in notes[0]
        assert [r["screened_out"] for r in found if r["backend"] == "torch-compile"][0].startswith("clearly slower")
        plan = store.run(run.run_id).plan
        assert sum(s.repeat > 0 for s in plan) == 4  # only the kept cells' later processes were planned
        assert run._screen(orchestrate.Hooks()) == []  # screened once: a resumed run does not screen again
