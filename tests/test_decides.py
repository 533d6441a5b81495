"""A GPU verdict that decides (issue 55): the gate knows what a slowdown can touch and what it
could not judge; the deciding pair measured together; processes spent where they can change the
answer. CPU tests, with synthetic machines and fakes where the effect is a GPU's."""

from __future__ import annotations

import dataclasses

import numpy as np
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

    trials = 60
    aa = _sequential_runs(tmp_path, "aa", 0.0, trials)
    false = sum(v in ("JAX faster", "PyTorch faster") for v, _ in aa)
    assert false <= trials * (stats.VERDICT_ALPHA + 2 * (0.05 * 0.95 / trials) ** 0.5), false
    assert sum(looks for _, looks in aa) > trials  # top-ups were taken: the boundary was exercised
    sequential = _sequential_runs(tmp_path, "seq", 0.15, 30)
    monkeypatch.setattr(stats, "look_alpha", stats.bonferroni_alpha)
    union = _sequential_runs(tmp_path, "bonf", 0.15, 30)
    assert all(s <= u for (_, s), (_, u) in zip(sequential, union))
    assert sum(s for _, s in sequential) < sum(u for _, u in union), (sequential, union)
    assert sum(v == "JAX faster" for v, _ in sequential) >= sum(v == "JAX faster" for v, _ in union)


def test_screening_drops_a_clearly_slower_backend_and_never_a_frameworks_best(tmp_path):
    """After one process a cell: torch-compile twice torch-eager's time (even its fastest sample
    over 1.5x) is screened out, jax-eager within 1.5x of jax-jit is kept, the analysis path beside
    PyTorch's own modes and a failed cell get no more processes; each framework's best is kept,
    whatever the draws."""

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


class SlowPeriods:
    """A host whose speed changes over periods of seconds (the H100's launch-bound processes,
    the H200 process that ran slow for 24 samples, then fast): each period lasts 1-3 s of the
    fake clock, and one in three runs 1.3-2x slower. A program instance carries its own factor
    too (its memory layout: 2% between instances), and every call 2% of noise. The clock moves
    only when the caller synchronises, as a device's does."""

    def __init__(self, rng):
        self.rng, self.now, self.pending = rng, 0.0, 0.0
        self.ends, self.factors = [0.0], [1.0]

    def factor(self, t):
        while self.ends[-1] <= t:
            self.ends.append(self.ends[-1] + self.rng.uniform(1.0, 3.0))
            self.factors.append(self.rng.uniform(1.3, 2.0) if self.rng.random() < 1 / 3 else 1.0)
        return next(f for end, f in zip(self.ends[1:], self.factors[1:]) if end > t)

    def program(self, work):
        instance = work * float(np.exp(self.rng.normal(0.0, 0.02)))

        def call():
            self.pending += instance * self.factor(self.now + self.pending) * float(np.exp(self.rng.normal(0, 0.02)))
        return call

    def sync(self, outs):
        self.now, self.pending = self.now + self.pending, 0.0

    def clock(self):
        return self.now


def _designs(seed, work_a=1e-3, work_b=1e-3, processes=3, window_s=1.0):
    """One comparison each way at the same measuring time on one SlowPeriods host: unpaired
    (``processes`` processes a side, one after another, ``window_s`` each) and paired (as many
    duets, ``2 * window_s`` each: both sides alternating, harness/duet.py's rounds)."""
    import random

    from stackwars import stats
    from stackwars.harness.duet import alternate
    from stackwars.harness.timer import Timer

    host = SlowPeriods(np.random.default_rng(seed))
    a, b = [], []
    for _ in range(processes):
        for side, work in ((a, work_a), (b, work_b)):
            t = Timer(host.program(work), host.sync, host.clock)
            side.append(t.steady(10, window_s, 10**6, 2, mode="throughput").samples)
    start = host.now
    unpaired = stats.compare(a, b)
    ratios = []
    for k in range(processes):
        timers = {"a": Timer(host.program(work_a), host.sync, host.clock),
                  "b": Timer(host.program(work_b), host.sync, host.clock)}
        rounds, _, _ = alternate(timers, {"a": 2, "b": 2}, "throughput", 2 * window_s, 10**6, random.Random(k),
                                 host.clock)
        ratios.append(float(np.median(np.array(rounds["b"]) / np.array(rounds["a"]))))
    assert host.now - start == pytest.approx(2 * processes * window_s, rel=0.05)  # the same measuring time
    return unpaired, stats.compare_paired(ratios)


def test_under_a_host_that_slows_for_seconds_the_paired_ci_is_narrower_and_aa_stays_honest():
    """The same measuring time either way: three processes a side, or three duets of both sides
    alternating. Slow periods of seconds hit one side's process and not the other's, so the
    unpaired interval is wide; within a duet both sides see the same period, and the ratio cancels
    it. Over 48 A/A comparisons the paired design names a false winner at most 5% of the time
    (with a binomial margin), and ties in most."""
    from stackwars import stats

    widths, false, ties = {"unpaired": [], "paired": []}, 0, 0
    trials = 48
    for seed in range(trials):
        unpaired, paired = _designs(seed)
        widths["unpaired"].append(unpaired.ci_high / unpaired.ci_low)
        widths["paired"].append(paired.ci_high / paired.ci_low)
        decision = stats.decide(paired)
        false += decision in ("lower", "higher")
        ties += decision == "tie"
    assert np.median(widths["paired"]) < np.median(widths["unpaired"]) / 2, widths
    assert false <= trials * (0.05 + 2 * (0.05 * 0.95 / trials) ** 0.5), false
    assert ties >= 0.8 * trials, ties
    # and a true difference is found: JAX's program 15% slower
    unpaired, paired = _designs(99, work_b=1.15e-3)
    assert stats.decide(paired) == "higher" and paired.ci_low > 1.05, paired


def test_a_verdict_too_wide_is_measured_again_by_duets_and_read_paired(tmp_path, monkeypatch):
    """orchestrate.Run: processes 40% apart cannot decide in three a side; the next look measures
    the row's two bests together (duets: here a stand-in for the worker, whose ratio is 1.10 within
    1%), stores them with the run, and the verdict reads its ratio from them, at the duets' level,
    saying so; with --no-duets the same row gets more processes of each cell instead."""
    from stackwars import orchestrate, runner
    from stackwars.records import CellSpec
    from stackwars.store.results import Store, duet_rows, rows
    from tests.test_verdict import MACHINE, SyntheticExecutor

    made = []

    def duet(a, b, repeat, config, cache_root, inline=False):
        made.append((a.key, b.key, repeat))
        ratio = 1.10 * (1 + 0.01 * ((repeat % 3) - 1))
        return {"status": "ok", "a": a.to_dict(), "b": b.to_dict(), "ratio": ratio, "median_a_s": 1e-3,
                "median_b_s": ratio * 1e-3, "first": ["a", "b"] * 5, "timing": "throughput", "window_s": 0.7,
                "repeat": repeat, "wall_s": 2.0, "settings": {"contention": {"fraction": 0.0, "contended": False,
                                                                               "window_s": 0.7, "judged": True}}}

    monkeypatch.setattr(runner, "measure_duet", duet)

    class Here(SyntheticExecutor):  # one cell at a time on this host, as the serial executor: duets allowed
        duets = True

    specs = [CellSpec("gemm", "small", "forward", b, repeat=r) for r in range(3) for b in ("torch-eager", "jax-jit")]
    for duets in (True, False):
        config = MeasureConfig(processes=3, max_processes=6, duets=duets)
        with Store(tmp_path / f"d{duets}.db") as store:
            run_id = store.create_run(specs, {"measure": config.to_dict()}, command="duets")
            orchestrate.Run(store, run_id, specs, config, MACHINE, Here(3, 0.4)).measure()
            found, paired = rows(store, run_id), duet_rows(store, run_id)
            (v,) = vd.verdicts(found, duets=paired)
        if duets:
            # a look of duets measures stats.MIN_DUETS of them, not the run's three processes
            assert len(found) == 6 and len(paired) == 5 and [m[2] for m in made] == [0, 1, 2, 3, 4]
            assert v["design"] == "paired"
            assert v["ratio"] == pytest.approx(1.10, rel=0.01) and v["verdict"] == "PyTorch faster", v
            assert "paired: 5 processes that ran both programs together" in v["reason"]
            assert v["confidence"] == pytest.approx(1 - 0.01)  # the duets' share of the error, one duet look
        else:
            assert len(found) > 6 and not paired and v["design"] == "unpaired"


def test_a_duet_runs_both_programs_in_one_worker_alternating(tmp_path):
    """runner.measure_duet, for real: one fresh worker (forked from a server that preloaded both
    frameworks), PyTorch's and JAX's gemm tiny prepared from the same inputs, compiled, then timed
    in rounds whose order is drawn at random; the record holds every round of both sides."""
    from stackwars import runner
    from stackwars.harness.duet import MIN_ROUNDS
    from stackwars.records import CellSpec

    a, b = CellSpec("gemm", "tiny", "forward", "torch-eager"), CellSpec("gemm", "tiny", "forward", "jax-jit")
    config = MeasureConfig(warmup=1, min_samples=2, min_time_s=0.1, timeout_s=300)
    d = runner.measure_duet(a, b, 0, config, str(tmp_path))
    assert d["status"] == "ok", d.get("error")
    n = len(d["first"])
    assert n >= MIN_ROUNDS and len(d["rounds"]["a"]) == len(d["rounds"]["b"]) == n
    assert set(d["first"]) == {"a", "b"}  # both orders drawn
    ratios = [y / x for x, y in zip(d["rounds"]["a"], d["rounds"]["b"])]
    assert d["ratio"] == pytest.approx(float(np.median(ratios)))
    assert d["window_s"] >= 0.25 and d["settings"]["contention"]["judged"]
    assert d["settings"]["backends"]["a"]["name"] == "torch-eager" and d["settings"]["backends"]["b"]["name"] == "jax-jit"


def test_the_aa_check_reads_self_duets_where_a_run_measured_them(tmp_path):
    """`run --aa` measures each cell against itself (two instances alternating in one process);
    `verdict --aa` then sets each cell's clean self-duets against 1, paired, at the level a verdict
    reads its first look of duets at (the 1% the first look leaves where a run may look again): a tie where
    the ratio stays within the band, "noisy" where it does not; without self-duets it splits the
    processes as before."""
    from stackwars.records import CellSpec
    from stackwars.store.results import Store, add_duet, duet_rows, rows

    cells = [*_three_cells("torch-eager"), *_three_cells("jax-jit")]
    _, found = _store(tmp_path / "aa.db", cells)
    with Store(tmp_path / "aa.db") as store:
        run_id = store.run_ids()[0]
        session = store.start_session(run_id, {"cpu_model": "Test CPU", "cpu_count_logical": 2})
        for backend, spread in (("torch-eager", 0.01), ("jax-jit", 0.4)):
            spec = CellSpec("gemm", "small", "forward", backend)
            for k in range(3):
                add_duet(store, run_id, session, {"status": "ok", "a": spec.to_dict(), "b": spec.to_dict(),
                                                  "ratio": 1 + spread * (k - 1), "repeat": k, "timing": "throughput",
                                                  "settings": {"contention": {"contended": False, "window_s": 0.5}}})
        duets = duet_rows(store, run_id)
        checks = vd.self_check(rows(store, run_id), duets=duets)
    by = {c["backend"]: c for c in checks}
    assert by["torch-eager"]["decision"] == "tie" and by["jax-jit"]["decision"] == "noisy"
    assert all(c["design"] == "paired (self-duets)" for c in checks)
    from stackwars import stats
    assert {c["confidence"] for c in checks} == {1.0 - stats.duet_alpha(0, duets[0]["looks"])}
    assert vd.self_check(found) == []  # three processes a cell: too few to split in two halves


def _three_cells(backend):
    return [_cell(backend, 1.0, p) for p in range(3)]


def test_a_cuda_row_says_whether_each_side_was_host_or_device_bound(tmp_path):
    """resnet50 on the H100: the host's issue time was about the call on both sides, so without
    graph replay the ratio measured launch speed; gpt2's JAX side issued in 20% of its call."""
    host = [_proc("torch-compile", 1.0, p, issue_share=0.95) for p in range(3)]
    host += [_proc("jax-jit-no-graphs", 1.1, p, issue_share=0.9) for p in range(3)]
    _, found = _store(tmp_path / "h.db", host)
    (v,) = vd.verdicts(found)
    assert v["replay"] == "no graph replay" and v["torch_bound"] == v["jax_bound"] == "host-bound"
    assert v["measured"].startswith("host-bound on both sides, without graph replay: the ratio measures how fast")
    assert any(n.endswith(v["measured"]) for n in vd.notes([v]))
    mixed = [_proc("torch-compile", 1.0, p, issue_share=0.95) for p in range(3)]
    mixed += [_proc("jax-jit-no-graphs", 1.1, p, issue_share=0.2) for p in range(3)]
    (v,) = vd.verdicts(_store(tmp_path / "m.db", mixed)[1])
    assert (v["torch_bound"], v["jax_bound"]) == ("host-bound", "device-bound")
    assert v["measured"] == "PyTorch host-bound (95% of a call spent issuing it), JAX device-bound (20%)"
    (cpu,) = vd.verdicts(_store(tmp_path / "c.db", [_proc(b, 1.0, p, device="cpu") for p in range(3)
                                                    for b in ("torch-eager", "jax-jit")])[1])
    assert cpu["torch_bound"] is None and cpu["measured"] is None


def test_duets_whose_ratio_the_cells_own_interval_does_not_hold_decide_nothing(tmp_path):
    """Two runtimes in one process can run otherwise than alone (on the 2-CPU Xeon VM mha's train
    step read 1.985 in duets against 2.261 in separate processes). JAX's cells run 2x PyTorch's in
    processes of their own; duets that read 1.0 (a tie on their own) lie outside the cells' interval:
    the row cannot say, and says why; duets that read 2.0 decide, paired, and the row keeps the
    cells' interval beside theirs."""
    from stackwars.records import CellSpec
    from stackwars.store.results import Store, add_duet, duet_rows, rows

    cells = [*(_cell("torch-eager", 1.0, p) for p in range(3)), *(_cell("jax-jit", 2.0, p) for p in range(3))]
    found = {}
    for ratio in (1.0, 2.0):
        _, _ = _store(tmp_path / f"p{ratio}.db", cells)
        with Store(tmp_path / f"p{ratio}.db") as store:
            run_id = store.run_ids()[0]
            session = store.start_session(run_id, {"cpu_model": "Test CPU", "cpu_count_logical": 2})
            a, b = CellSpec("gemm", "small", "forward", "torch-eager"), CellSpec("gemm", "small", "forward", "jax-jit")
            for k in range(5):
                add_duet(store, run_id, session, {"status": "ok", "a": a.to_dict(), "b": b.to_dict(), "repeat": k,
                                                  "ratio": ratio * (1 + 0.01 * (k - 2)), "timing": "throughput",
                                                  "settings": {"contention": {"contended": False, "window_s": 0.5}}})
            (found[ratio],) = vd.verdicts(rows(store, run_id), duets=duet_rows(store, run_id))
    off, on = found[1.0], found[2.0]
    assert off["design"] == "paired" and off["verdict"] == "cannot say" and off["reason_tag"] == "paired disagrees"
    assert off["ratio"] == pytest.approx(1.0, rel=0.01) and not off["unpaired"]["ci_low"] <= 1.0
    assert "did not run together as they run alone" in off["reason"]
    assert vd.more_duets([off]) == {} and vd.more_processes([off], max_processes=6, paired=True) == {}
    assert on["design"] == "paired" and on["verdict"] == "PyTorch faster", on["reason"]
    assert on["unpaired"]["ci_low"] <= on["ratio"] <= on["unpaired"]["ci_high"]
