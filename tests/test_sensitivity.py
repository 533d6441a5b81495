"""Which knob flips the verdict (issue 37): the real loop (stackwars.sensitivity.run: one
orchestrate.Run a knob, the verdict and its statistics) driven by a synthetic executor whose
programs take the same time on both sides unless a knob says otherwise."""

import dataclasses
import re
import zlib

import numpy as np
import pytest
from typer.testing import CliRunner

from stackwars import sensitivity as sens
from stackwars.cli import app
from stackwars.records import CellSpec, MeasureConfig, Parity
from stackwars.report import studies
from stackwars.store.results import Store
from tests.factories import measurement
from tests.test_verdict import MACHINE, Clocked, SyntheticExecutor, _processes


class KnobMachine(SyntheticExecutor):
    """Each cell-process draws its samples around 1 ms, times ``effect(spec)`` (1.0: no effect),
    with 1% spread between processes: the same program on both sides unless the knob says."""

    def __init__(self, effect=lambda spec: 1.0, seed=0):
        super().__init__(seed, between=0.01)
        self.effect, self.seen = effect, []

    def run(self, specs, measure, on_start=None):
        for spec in specs:
            self.seen.append(spec)
            rng = np.random.default_rng([self.seed, zlib.crc32(spec.key.encode())])  # the same draws every run
            samples = _processes(rng, 1e-3 * self.effect(spec), 1, samples=20, between=self.between)[0]
            m = measurement(spec.backend, samples=tuple(samples))
            yield dataclasses.replace(m, spec=spec, parity=Parity(max_rel_err=1e-7, tolerance=2e-4), wall_s=1.0)


def _base_run(store, phase="forward", backends=("torch-eager", "jax-jit"), workload="mha", device="cpu"):
    config = MeasureConfig(processes=3, max_processes=3)
    specs = [CellSpec(workload, "small", phase, b, device, repeat=r) for r in range(3) for b in backends]
    run_id = store.create_run(specs, {"measure": config.to_dict()}, command="base")
    session = store.start_session(run_id, MACHINE)
    for m in KnobMachine(seed=99).run(specs, None):
        store.add_cell(run_id, session, m)
    return run_id


def test_a_knob_that_changes_nothing_stands(tmp_path):
    with Store(tmp_path / "s.db") as store:
        run_id = _base_run(store)
        knobs = sens.check_knobs(["dtype", "batch-x2", "batch-half", "attention"])
        results, runs = sens.run(store, run_id, knobs, {}, KnobMachine())
    (r,) = results
    assert r["verdict"] == "same speed" and knobs[0] == "again"
    assert {k: v["outcome"] for k, v in r["knobs"].items()} == dict.fromkeys(
        ("again", "dtype", "batch-x2", "batch-half", "attention"), "stands")
    assert all(abs(v["moves"]) < 0.05 for v in r["knobs"].values())
    # each change tested with its own interval, at 1 - 5%/5 for the five knobs the row tests
    assert all(v["tested"] == 5 and v["change"]["confidence"] == pytest.approx(0.99)
               and v["change"]["ci_low"] <= 1 + v["moves"] <= v["change"]["ci_high"] for v in r["knobs"].values())
    assert len(runs) == 5  # one run a knob
    assert r["sentence"].startswith("same speed (repeated when measured again); stands when changing dtype, batch-x2, "
                                    "batch-half, attention")


def test_a_knob_that_shifts_one_side_by_20_percent_flips_the_verdict(tmp_path):
    def effect(spec):  # JAX 20% slower in bfloat16; everything else the same on both sides
        return 1.2 if spec.backend == "jax-jit" and spec.dtype == "bfloat16" else 1.0

    machine = KnobMachine(effect)
    with Store(tmp_path / "s.db") as store:
        run_id = _base_run(store)
        results, _ = sens.run(store, run_id, ["dtype", "batch-x2"], {}, machine)
    (r,) = results
    dtype, batch = r["knobs"]["dtype"], r["knobs"]["batch-x2"]
    assert dtype["outcome"] == "flips" and dtype["verdict"] == "PyTorch faster"
    assert dtype["ratio"] == pytest.approx(1.2, rel=0.03) and dtype["moves"] == pytest.approx(0.2, abs=0.04)
    assert batch["outcome"] == "stands" and batch["what"] == "batch is 8"
    assert dtype["change"]["ci_low"] > 1.05 and dtype["change"]["confidence"] == pytest.approx(0.975)  # 2 knobs
    assert r["sentence"] == ("same speed, unless both run in bfloat16 (then PyTorch faster, the ratio +19%); stands "
                             "when changing batch-x2")
    # both sides measured again, the changed program on each: 3 processes a side
    bf16 = [s for s in machine.seen if s.dtype == "bfloat16"]
    assert sorted({s.backend for s in bf16}) == ["jax-jit", "torch-eager"] and len(bf16) == 6
    assert {dict(s.overrides).get("batch") for s in machine.seen if s.overrides} == {8}


def test_a_machine_that_moved_since_the_stored_run_is_told_from_a_knob(tmp_path):
    """After the stored run, the machine slows JAX's side by 20% whatever the knob: every knob
    'flips', and the row measured again unchanged flips too, so the sentence says no flip is
    the knob's alone; the same knob on a steady machine stands."""
    drift = KnobMachine(lambda spec: 1.2 if spec.backend == "jax-jit" else 1.0)
    with Store(tmp_path / "s.db") as store:
        run_id = _base_run(store)
        results, _ = sens.run(store, run_id, sens.check_knobs(["dtype"]), {}, drift)
    (r,) = results
    assert r["knobs"]["again"]["outcome"] == "flips" and r["knobs"]["again"]["verdict"] == "PyTorch faster"
    assert r["knobs"]["dtype"]["outcome"] == "flips"
    assert r["sentence"].startswith("same speed in the stored run, but measured again unchanged its ratio moved +21% "
                                    "(PyTorch faster): the machine moved between the two, so no knob's move below is "
                                    "the knob's alone")
    with Store(tmp_path / "steady.db") as store:
        run_id = _base_run(store)
        (steady,), _ = sens.run(store, run_id, sens.check_knobs(["dtype"]), {}, KnobMachine())
    assert steady["knobs"]["again"]["outcome"] == "stands" and steady["knobs"]["dtype"]["outcome"] == "stands"
    assert "measured again" in steady["sentence"] and "moved" not in steady["sentence"]


def test_knobs_a_device_or_workload_lacks_are_named_not_skipped(tmp_path):
    with Store(tmp_path / "s.db") as store:
        run_id = _base_run(store, workload="gemm")
        results, runs = sens.run(store, run_id, ["tf32", "cuda-graphs", "attention", "optimizer", "compile-mode",
                                                 "batch-half"], {}, KnobMachine())
    (r,) = results
    k = r["knobs"]
    assert k["tf32"] == {"outcome": "not here", "why": "TF32 is a GPU matmul mode: no effect on a CPU"}
    assert k["cuda-graphs"]["why"] == "CUDA graphs and XLA's command buffers exist on CUDA only"
    assert k["attention"]["why"] == "gemm has no attention"
    assert k["optimizer"]["why"] == "a forward has no optimizer"
    assert "which Inductor's modes do not apply to" in k["compile-mode"]["why"] and "a GPU pass" in \
        k["compile-mode"]["why"]
    assert k["batch-half"]["outcome"] == "stands" and k["batch-half"]["what"] == "m is 512"  # gemm's batch: m
    assert len(runs) == 1  # only the knob that exists here was measured
    assert "not on this device or workload: tf32, cuda-graphs, attention, optimizer, compile-mode" in r["sentence"]


def test_a_one_sided_knob_changes_its_side_and_says_so(tmp_path):
    def effect(spec):  # PyTorch's for-loop optimizer 25% slower
        return 1.25 if dict(spec.options).get("optimizer_impl") == "for-loop" else 1.0

    machine = KnobMachine(effect)
    with Store(tmp_path / "s.db") as store:
        run_id = _base_run(store, phase="train-step", backends=("torch-compile", "jax-jit"))
        results, _ = sens.run(store, run_id, ["optimizer", "compile-mode"], {}, machine)
    (r,) = results
    opt = r["knobs"]["optimizer"]
    assert opt["outcome"] == "flips" and opt["verdict"] == "JAX faster" and opt["changed_sides"] == ["torch"]
    assert "optax" in opt["missing"]["jax"]
    assert opt["ratio"] == pytest.approx(0.8, rel=0.04)
    assert re.fullmatch(r"flips: 0\.[78]\d\d JAX faster \(-\d+%\) \[torch only\]", studies.sensitivity_cell(opt))
    cm = r["knobs"]["compile-mode"]
    assert cm["outcome"] == "stands" and cm["changed_sides"] == ["torch"]
    assert any(s.backend == "torch-compile-max-autotune" for s in machine.seen)


CUDA_BACKENDS = ("torch-compile", "torch-cudagraphs", "jax-jit", "jax-jit-no-graphs")


def test_cuda_graphs_plans_both_on_against_both_off(tmp_path):
    """On CUDA each verdict row sets programs of one kind against each other (graph replay, or
    none), so the knob plans the matched pair of the other kind: torch-cudagraphs against jax-jit
    (XLA's command buffers) for the row without graphs, torch-compile against jax-jit-no-graphs
    for the row with them; never one side on and the other off."""
    from stackwars.records import replays_graphs

    with Store(tmp_path / "s.db") as store:
        run_id = _base_run(store, backends=CUDA_BACKENDS, device="cuda")
        planned = sens.plan(store, run_id, ["cuda-graphs"])
    kinds = {r["replay"]: (r["best_torch"], r["best_jax"]) for r in planned.base}
    assert kinds == {"graph replay": ("torch-cudagraphs", "jax-jit"),
                     "no graph replay": ("torch-compile", "jax-jit-no-graphs")}
    for i, row in enumerate(planned.base):
        v = planned.variants[i]["cuda-graphs"]
        assert v.changed == ("torch", "jax") and not v.missing
        stored = replays_graphs(CellSpec("mha", "small", "forward", row["best_torch"], "cuda"), {}, None)
        new = [replays_graphs(spec, {}, None) for spec in (v.torch, v.jax)]
        assert new == [not stored, not stored], (row["replay"], v.torch, v.jax)  # both turned over, together
    # on a CPU nothing replays graphs: one row, and the knob is not here
    with Store(tmp_path / "c.db") as store:
        cpu = sens.plan(store, _base_run(store, backends=("torch-compile", "jax-jit")), ["cuda-graphs"])
    assert [r["replay"] for r in cpu.base] == [None]
    assert cpu.variants[0]["cuda-graphs"] == "CUDA graphs and XLA's command buffers exist on CUDA only"


def test_graph_replay_is_turned_over_on_both_sides_on_cuda(tmp_path):
    """cuda-graphs measured: the row without graphs (torch-compile against jax-jit-no-graphs, a
    tie) becomes both-on; where XLA's command buffers save JAX 30% and PyTorch's graphs nothing,
    it flips; PyTorch's eager best has no twin, and the row says so."""
    def effect(spec):
        return 0.7 if spec.backend == "jax-jit" and dict(spec.options).get("xla_command_buffers") != "off" else 1.0

    machine = KnobMachine(effect)
    with Store(tmp_path / "s.db") as store:
        run_id = _base_run(store, backends=("torch-compile", "jax-jit-no-graphs"), device="cuda")
        (r,), _ = sens.run(store, run_id, ["cuda-graphs"], {}, machine)
        eager = _base_run(store, backends=("torch-eager", "jax-jit-no-graphs"), device="cuda")
        (one,), _ = sens.run(store, eager, ["cuda-graphs"], {}, KnobMachine())
    assert r["row"].endswith("(no graph replay)") and r["verdict"] in ("same speed", "no difference found")
    g = r["knobs"]["cuda-graphs"]
    assert g["outcome"] == "flips" and g["verdict"] == "JAX faster" and g["changed_sides"] == ["torch", "jax"]
    assert g["what"] == "PyTorch replays CUDA graphs and XLA forms its command buffers"
    assert {s.backend for s in machine.seen} == {"torch-cudagraphs", "jax-jit"}
    # PyTorch's best with no graph-replay twin: JAX's side alone, and the row says why not PyTorch's
    h = one["knobs"]["cuda-graphs"]
    assert h["changed_sides"] == ["jax"] and "no graph-replay twin" in h["missing"]["torch"]


def test_the_cli_says_the_cost_first_and_stores_a_study_the_report_reads(tmp_path, monkeypatch):
    from stackwars import runner
    from stackwars.executors import Serial
    from stackwars.report import build

    db = tmp_path / "s.db"
    with Store(db) as store:
        run_id = _base_run(store)
    monkeypatch.setattr(runner, "probe_machine", lambda inline: {})
    monkeypatch.setattr(Serial, "run", lambda self, specs, measure, on_start=None: KnobMachine().run(specs, measure))
    r = CliRunner().invoke(app, ["verdict", run_id, "--sensitivity", "-k", "dtype", "-k", "tf32", "--db", str(db)],
                           env={"COLUMNS": "250"})
    text = " ".join(r.output.split())
    assert r.exit_code == 0, r.output
    assert (f"sensitivity of run {run_id}: 1 verdict row(s) x 3 knob(s): 2 changed row(s) to measure, 12 "
            "cell-processes (3 a side)") in text  # 'again' comes with any knobs named
    assert text.index("cell-processes") < text.index("Which knob flips the verdict")  # the cost before the work
    assert "TF32 is a GPU matmul mode" in text and re.search(r"stands: [01]\.\d{3} same speed \([+-]\d+%\)", text)
    bad = CliRunner().invoke(app, ["verdict", run_id, "--sensitivity", "-k", "colour", "--db", str(db)])
    assert bad.exit_code == 2 and "unknown knob 'colour'; allowed: again, tf32, cuda-graphs" in " ".join(bad.output.split())
    with Store(db, create=False) as store:
        kinds = [r["kind"] for r in store.runs()]
        assert kinds == ["cells", "sensitivity-cells", "sensitivity-cells", "study:sensitivity"]
        data = build.collect(store)
    doc = build.document(data, "now")
    titles = [s.title for s in doc.sections]
    assert any(t.startswith("Study: sensitivity") for t in titles)
    assert len(data["cells"]) == 6  # the knob's cells stay out of the main verdict


def test_a_budget_leaves_out_the_knobs_that_no_longer_fit_and_says_so(tmp_path, monkeypatch):
    """--budget: each knob's cells are expected to take their cells' wall time so far (1 s a
    cell-process here, on a clock the synthetic machine advances); a knob that no longer fits
    what is left is not started, and its rows, the sentence and the table say why."""
    from stackwars import orchestrate

    clock = [1000.0]
    monkeypatch.setattr(orchestrate, "_now", lambda: clock[0])
    machine, notes = KnobMachine(), []
    with Store(tmp_path / "s.db") as store:
        run_id = _base_run(store)
        hooks = orchestrate.Hooks(on_note=notes.append)
        (r,), runs = sens.run(store, run_id, sens.check_knobs(["dtype", "batch-x2"]), {}, Clocked(machine, clock),
                              hooks, budget_s=13)
    k = r["knobs"]
    assert len(machine.seen) == 12 and len(runs) == 2  # again and dtype: 6 s each of 13
    assert k["again"]["outcome"] == "stands" and k["dtype"]["outcome"] == "stands"
    assert k["batch-x2"]["outcome"] == "not measured"
    assert k["batch-x2"]["why"] == ("not measured: its 6 cell-processes would take about 6 s, more than the 1 s left "
                                    "of --budget 13 s")
    assert notes == ["knob batch-x2: " + k["batch-x2"]["why"]]
    assert r["sentence"].endswith("; stands when changing dtype; not measured within the budget: batch-x2")
    assert studies.sensitivity_cell(k["batch-x2"]) == "not measured"
    with Store(tmp_path / "none.db") as store:  # nothing fits: not even the row measured again
        (r,), runs = sens.run(store, _base_run(store), sens.check_knobs(["dtype"]), {}, Clocked(KnobMachine(), clock),
                              budget_s=5)
    assert runs == [] and {v["outcome"] for v in r["knobs"].values()} == {"not measured"}
    assert "not measured again within the budget" in r["sentence"]


@pytest.mark.parametrize("args, message", [
    (["--budget", "10"], "--budget limits the knobs of --sensitivity; give --sensitivity too"),
    (["--sensitivity", "--budget", "-1"], "--budget (seconds)"),
    (["--sensitivity", "--threshold", "0.1"], "--threshold does not apply to --sensitivity"),  # was ignored
])
def test_a_bad_sensitivity_budget_exits_2_and_measures_nothing(tmp_path, args, message):
    db = tmp_path / "s.db"
    with Store(db) as store:
        run_id = _base_run(store)
    before = db.read_bytes()
    r = CliRunner().invoke(app, ["verdict", run_id, *args, "--db", str(db)])
    assert r.exit_code == 2 and message in " ".join(r.output.split()), r.output
    assert db.read_bytes() == before


def test_a_sensitivity_with_nothing_measured_says_so(tmp_path):
    """--budget 0: every knob named, none measured; the line that names the knobs' runs says none
    was measured, not "runs" and nothing after it (issue 64)."""
    db = tmp_path / "s.db"
    with Store(db) as store:
        run_id = _base_run(store)
    r = CliRunner().invoke(app, ["verdict", run_id, "--sensitivity", "-k", "dtype", "--budget", "0", "--db", str(db)])
    text = " ".join(r.output.split())
    assert r.exit_code == 0, r.output
    assert "the knobs' cells: none measured (each row says why)" in text and "cells: runs" not in text, text


def test_the_markdown_has_a_column_a_knob_and_the_sentences():
    rows = [{"row": "gemm/small/forward/cpu/float32", "verdict": "same speed",
             "sentence": "same speed; stands when changing dtype",
             "knobs": {"dtype": {"outcome": "stands", "verdict": "same speed", "ratio": 1.01, "moves": 0.01,
                                 "changed_sides": ["torch", "jax"]},
                       "tf32": {"outcome": "not here", "why": "TF32 is a GPU matmul mode: no effect on a CPU"}}}]
    text = studies.sensitivity_markdown(rows)
    assert text.splitlines()[:3] == ["| row | dtype | tf32 |", "|---|---|---|",
                                     "| gemm/small/forward/cpu/float32: same speed | stands: 1.010 same speed (+1%) | "
                                     "not here |"]
    assert text.endswith("- same speed; stands when changing dtype\n")


def test_knobs_that_change_nothing_are_said_to_move_a_row_at_most_5_percent_of_the_time():
    """The error control over the knobs (issue 56): a row tests each knob's change with its own
    interval at 1 - 5%/m for its m knobs, so where no knob does anything (every cell the same
    program, 4% spread between processes) a row reports any knob as 'flips' in at most 5% of
    trials; the same changes read at 95% each would report one far more often."""
    from stackwars import stats

    rng = np.random.default_rng(56)
    knobs, trials = 5, 200

    def cell():
        return [list(1e-3 * (1 + 0.04 * rng.standard_normal()) * (1 + 0.01 * rng.standard_normal(10)))
                for _ in range(3)]

    controlled = uncontrolled = 0
    for _ in range(trials):
        base = (cell(), cell())
        changes = [(cell(), cell()) for _ in range(knobs)]
        said = [stats.decide(stats.compare_change(base, c, 1 - stats.VERDICT_ALPHA / knobs, resamples=400))
                for c in changes]
        plain = [stats.decide(stats.compare_change(base, c, 0.95, resamples=400)) for c in changes]
        controlled += any(sens.OUTCOME[d] == "flips" for d in said)
        uncontrolled += any(sens.OUTCOME[d] == "flips" for d in plain)
    assert controlled <= 0.05 * trials, controlled
    assert uncontrolled > controlled, (uncontrolled, controlled)
