"""The verdict's statistics do not invent winners, and the verdict table says what its data shows.

A synthetic machine drives the real Timer with a fake clock (no device, no sleep): every
process draws its own speed (the spread between launches), every call its own noise and
an occasional straggler. Measured like that, the same program on both sides must come out
a tie in at least 95% of seeded trials, and a 10% shift must be found with enough
processes. Then the verdict table itself, from hand-built rows: best of each framework,
parity failures kept out and named, contended processes left out, one process never a
verdict, machines never mixed.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from stackwars import stats
from stackwars.cli import app
from stackwars.harness.timer import Timer
from stackwars.records import MeasureConfig, Parity
from stackwars import verdict as vd
from stackwars.report import verdict as view
from stackwars.store.results import Store, rows

from tests.factories import FakeExecutor, measurement

runner = CliRunner()


# The spread between processes measured on the 2-core CPU VM for gemm small forward, six
# processes each: the sd of the process medians was 2.0% (jax-jit) and 0.7% (torch-mlir-xla).
BETWEEN = 0.015


class SyntheticMachine:
    """Calls of ``centre`` seconds on a machine whose speed differs between processes
    (log-normal, ``between``) and between calls (``within``), with a straggler call 3% of
    the time. The clock advances only when the caller synchronises."""

    def __init__(self, rng: np.random.Generator, centre: float, between: float = BETWEEN, within: float = 0.03):
        self.rng, self.now, self.pending = rng, 0.0, 0.0
        self.speed = centre * float(np.exp(rng.normal(0.0, between)))
        self.within = within

    def clock(self) -> float:
        return self.now

    def fn(self) -> None:
        d = self.speed * float(np.exp(self.rng.normal(0.0, self.within)))
        if self.rng.random() < 0.03:
            d *= 1.5  # a straggler: an interrupt, a page fault
        self.pending += d

    def sync(self, outs) -> None:
        self.now, self.pending = self.now + self.pending, 0.0


def _processes(rng, centre, n_processes, samples=40, **kw) -> list[list[float]]:
    out = []
    for _ in range(n_processes):
        dev = SyntheticMachine(rng, centre, **kw)
        st = Timer(dev.fn, dev.sync, dev.clock).steady(min_samples=samples, min_time_s=0.0, max_samples=samples)
        out.append(list(st.samples))
    return out


def _decisions(shift: float, n_processes: int, trials: int, **kw) -> dict[str, int]:
    counts: dict[str, int] = {}
    for seed in range(trials):
        rng = np.random.default_rng(seed)
        torch_side = _processes(rng, 1e-3, n_processes, **kw)
        jax_side = _processes(rng, 1e-3 * shift, n_processes, **kw)
        d = stats.decide(stats.compare(torch_side, jax_side, seed=seed))
        counts[d] = counts.get(d, 0) + 1
    return counts


def test_the_same_program_is_a_tie_in_at_least_95_percent_of_trials():
    trials = 300
    counts = _decisions(1.0, 3, trials)
    assert counts.get("tie", 0) >= 0.95 * trials, counts
    # on a machine whose launches spread twice as much, ties fall (more "cannot say"), and
    # false winners stay at what a 95% interval allows: 5%, within two standard errors
    rough = _decisions(1.0, 3, trials, between=0.03)
    allowed = trials * (0.05 + 2 * (0.05 * 0.95 / trials) ** 0.5)
    assert rough.get("lower", 0) + rough.get("higher", 0) <= allowed, rough


def test_a_ten_percent_shift_is_found_with_enough_processes():
    trials = 100
    five = _decisions(0.9, 5, trials)
    assert five.get("lower", 0) >= 0.95 * trials, five  # JAX 10% faster: found
    assert five.get("higher", 0) == 0, five  # and never the other way round
    # with one process a side the interval ignores the spread between launches: false
    # winners appear, which is why one process never supports a verdict
    one = _decisions(1.0, 1, trials, between=0.04)
    assert one.get("lower", 0) + one.get("higher", 0) > 0.05 * trials, one


def test_few_processes_widen_the_interval_to_students_t():
    rng = np.random.default_rng(7)
    procs = _processes(rng, 1e-3, 3, between=0.03)
    h = stats.hierarchical(procs)
    medians = np.array(h.process_medians)
    t_half = stats.t_quantile(0.975, 2) * medians.std(ddof=1) / np.sqrt(3)
    # the widened bootstrap interval is about as wide as the t interval of the process medians
    assert 0.7 * 2 * t_half < h.ci_high - h.ci_low < 1.6 * 2 * t_half
    # the estimate on the scale of its interval: the geometric mean of the process medians
    assert h.ci_low < h.estimate < h.ci_high and h.estimate == pytest.approx(np.exp(np.log(medians).mean()))
    assert stats.t_quantile(0.975, 4) == pytest.approx(2.7764, abs=1e-3)


@pytest.mark.parametrize("ci, expected", [
    ((0.97, 1.02), "tie"),  # holds 1, narrow
    ((0.97, 0.99), "tie"),  # excludes 1, within the 5% threshold
    ((0.80, 0.93), "lower"),
    ((1.06, 1.20), "higher"),
    ((0.80, 1.25), "noisy"),  # holds 1, too wide to decide
])
def test_decide(ci, expected):
    c = stats.Comparison((ci[0] + ci[1]) / 2, *ci, not ci[0] <= 1 <= ci[1])
    assert stats.decide(c) == expected


@pytest.mark.parametrize("ci, word, shown", [
    ((0.97, 1.02), "same speed", "same speed (within ±5%)"),  # inside the band, holding 1
    ((0.97, 0.99), "same speed", "same speed (within ±5%)"),  # inside the band, excluding 1
    ((0.953, 1.049), "same speed", "same speed (within ±5%)"),  # at its edges
    ((0.94, 1.03), "no difference found", "no difference found (the CI allows ±6%)"),  # holds 1, past the band
    ((0.90, 1.15), "no difference found", "no difference found (the CI allows ±15%)"),
    ((0.80, 1.25), "cannot say", "cannot say"),
])
def test_same_speed_is_said_only_for_a_ci_inside_the_tie_band(ci, word, shown):
    """Issue 56: "tie" covered a CI within ±5% and any CI holding 1 within ±20%, and a reader takes
    it for the same speed. The verdict says "same speed" only for the first; the second is "no
    difference found", with how large a difference the CI still allows."""
    c = stats.Comparison((ci[0] + ci[1]) / 2, *ci, not ci[0] <= 1 <= ci[1])
    assert vd.word(stats.decide(c), c) == word
    row = {"verdict": word, "tie_within": stats.tie_bound(c) if vd.tied(word) else None,
           "tie_threshold": stats.TIE_THRESHOLD}
    assert row["verdict"] + view.tie_text(row) == shown
    if word != "same speed":
        assert "same speed" not in view.tie_text(row) and not stats.within_band(c)


# ---- the verdict table -----------------------------------------------------------------------
MACHINE = {"cpu_model": "Test CPU", "cpu_count_logical": 2, "versions": {"torch": "2.13.0", "jax": "0.10.2"}}


def _cell(backend, scale, proc, workload="gemm", framework=None, status="ok", contended=False, parity=1e-7,
          first=0.5, seed=0):
    rng = np.random.default_rng(1000 * seed + proc)
    m = measurement(backend, status=status, workload=workload, framework=framework,
                    samples=tuple(scale * 1e-3 * (1 + 0.01 * rng.standard_normal(30))))
    m = dataclasses.replace(m, spec=dataclasses.replace(m.spec, repeat=proc), first_call_s=first,
                            parity=Parity(max_rel_err=parity, tolerance=2e-4))
    if contended:
        m = dataclasses.replace(m, settings={"contention": {"contended": True, "fraction": 0.3}})
    return m


def _store(path, cells, env=MACHINE, config=None):
    with Store(path) as store:
        run_id = store.create_run([m.spec for m in cells], {"measure": (config or MeasureConfig()).to_dict()},
                                  command="test")
        session = store.start_session(run_id, env)
        for m in cells:
            store.add_cell(run_id, session, m)
        return run_id, rows(store, run_id)


def _more(found):
    """The processes a run's next look asks for these verdicts, per cell (verdict/plan.py)."""
    return vd.as_cells(vd.wanted(found))


def _three(backend, scale, n=3, **kw):
    return [_cell(backend, scale, p, **kw) for p in range(n)]


def test_best_of_each_framework_and_a_faster_parity_failure_kept_out(tmp_path):
    # four processes a cell: PyTorch's side chooses between two on the first, and decides on three more
    cells = [*_three("torch-eager", 2.0, 4, first=0.01), *_three("torch-compile", 1.0, 4, first=2.0),
             *_three("jax-eager", 0.5, 4, status="parity_fail", parity=3e-3),
             *_three("jax-jit", 1.5, 4, first=0.2)]
    _, found = _store(tmp_path / "v.db", cells)
    (v,) = vd.verdicts(found)
    assert v["best_torch"] == "torch-compile" and v["best_jax"] == "jax-jit"
    assert v["chosen_on"]["torch"]["process"] == 0 and v["chosen_on"]["jax"] is None  # one candidate passed parity
    assert v["chosen_on"]["decided_on"]["rounds"] == [1, 2, 3]
    assert v["ratio"] == pytest.approx(1.5, rel=0.02) and v["ci_low"] > 1.3
    assert v["verdict"] == "PyTorch faster" and v["processes"] == 3
    assert v["machine"] == "Test CPU (2 CPUs) · torch 2.13.0 · jax 0.10.2"
    # jax-eager ran faster but failed parity: named with its error against the tolerance, not chosen
    (out,) = v["jax_excluded"]
    assert out["backend"] == "jax-eager" and "3.0e-03" in out["why"] and "tol 2e-04" in out["why"]
    # torch-compile pays for its 1.99 s longer first call at 1 ms saved a call
    assert v["torch_pays"]["calls"] == pytest.approx(1991, abs=30)
    assert view.cells(v)[6].startswith("torch-compile 1,9") and view.cells(v)[6].endswith("calls / jax-jit jax-eager parity_fail")
    assert "faster but out: jax-eager" in view.cells(v)[2]
    text = view.to_text([v])
    assert "PyTorch faster" in text and "Test CPU" in text


def test_one_process_is_not_a_verdict_and_busy_processes_are_left_out(tmp_path):
    one = [_cell("torch-eager", 1.0, 0), _cell("jax-jit", 0.5, 0)]
    _, found = _store(tmp_path / "a.db", one)
    (v,) = vd.verdicts(found)
    assert v["verdict"] == "cannot say" and "a verdict needs 3 clean rounds" in v["reason"]
    assert "it would read: JAX faster" in v["reason"] and v["ratio"] == pytest.approx(0.5, rel=0.02)
    assert v["reason_tag"] == "too few processes"
    busy = [*_three("torch-eager", 1.0), _cell("jax-jit", 0.5, 0), _cell("jax-jit", 0.5, 1),
            _cell("jax-jit", 0.2, 2, contended=True)]
    _, found = _store(tmp_path / "b.db", busy)
    (v,) = vd.verdicts(found)
    assert v["jax_processes"] == 2 and v["jax_processes_busy"] == 1 and v["processes_busy"] == 1
    assert v["verdict"] == "cannot say" and "measured while the machine was busy" in v["reason"]
    assert v["reason_tag"] == "busy machine"
    assert v["jax_s"] == pytest.approx(0.5e-3, rel=0.02)  # the busy process does not drag the estimate


def test_a_side_with_nothing_that_passed_and_a_tie(tmp_path):
    cells = [*_three("torch-eager", 1.0), *_three("jax-jit", 1.0, status="error"),
             *_three("torch-eager", 1.0, workload="ffn"), *_three("jax-jit", 1.0, workload="ffn")]
    cells[3:6] = [dataclasses.replace(m, samples=()) for m in cells[3:6]]
    _, found = _store(tmp_path / "c.db", cells)
    by = {v["workload"]: v for v in vd.verdicts(found)}
    assert by["gemm"]["verdict"] == "cannot say" and "no JAX backend" in by["gemm"]["reason"]
    assert vd.tied(by["ffn"]["verdict"]) and by["ffn"]["ci_low"] <= 1 <= by["ffn"]["ci_high"]


def test_the_analysis_path_stands_in_only_where_no_native_mode_ran(tmp_path):
    """torch-mlir-xla is PyTorch's program on XLA, not a way PyTorch users run code: a faster
    torch-mlir-xla is named beside the verdict, not made PyTorch's best; alone, it stands in."""
    cells = [*_three("torch-eager", 2.0), *_three("torch-mlir-xla", 0.9, framework="torch"),
             *_three("jax-jit", 1.0)]
    _, found = _store(tmp_path / "x.db", cells)
    (v,) = vd.verdicts(found)
    assert v["best_torch"] == "torch-eager" and v["verdict"] == "JAX faster"
    assert v["torch_aside"][0]["backend"] == "torch-mlir-xla"
    assert any(n.startswith("ran faster than PyTorch's best own mode, but an analysis path") and
               "gemm · small · forward · cpu · float32 torch-mlir-xla 8" in n for n in view.notes([v]))
    _, found = _store(tmp_path / "y.db", [*_three("torch-mlir-xla", 1.0, framework="torch"), *_three("jax-jit", 1.0)])
    (v,) = vd.verdicts(found)
    assert v["best_torch"] == "torch-mlir-xla" and v["torch_analysis_path"] and vd.tied(v["verdict"])
    assert any("its analysis path stands in (two programs on one compiler)" in n for n in view.notes([v]))


def test_machines_are_never_mixed(tmp_path):
    path = tmp_path / "m.db"
    _store(path, [*_three("torch-eager", 1.0), *_three("jax-jit", 0.5)])
    _store(path, [*_three("torch-eager", 1.0), *_three("jax-jit", 2.0)],
           env={**MACHINE, "cpu_model": "Other CPU", "gpus": [{"name": "H100"}]})
    with Store(path) as store:
        found = rows(store)
    result = vd.verdicts(found)
    assert [(v["machine"].split(" (")[0], v["verdict"]) for v in result] == [
        ("Test CPU", "JAX faster"), ("Other CPU", "PyTorch faster")]
    assert "1x H100" in result[1]["machine"]
    md = view.markdown(result)
    assert md.count("**Verdict · ") == 2  # one table per machine


ZEN3 = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\n"
        "flags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\ncpu family\t: 99\n")
ZEN4 = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\n"
        "flags\t\t: fpu avx avx2 avx512f avx512_vnni avx512_bf16\n")
NEOVERSE = "processor\t: 0\nFeatures\t: fp asimd sve i8mm bf16\nCPU implementer\t: 0x41\nCPU part\t: 0xd40\n"


def test_two_cpus_of_one_model_name_are_told_apart_by_their_kind(tmp_path):
    """A hypervisor may name hosts generations apart "AMD EPYC" alike (a 2-core VM of that name
    ran PyTorch's bfloat16 GEMM at 957 GFLOP/s, another with AVX2 only at 0.9): the kind
    (family, model, instruction sets) keeps their verdicts, peaks and runs apart; a record
    from before the kind was kept is judged by its model name as before."""
    from stackwars import runner as runner_mod
    from stackwars.errors import SpecError
    from stackwars.harness import env as envmod
    from stackwars.records import Env, same_cpu_kind

    zen3, zen4 = envmod._cpu_kind(ZEN3), envmod._cpu_kind(ZEN4)
    assert zen3 == "family 25 model 1; avx2"  # the first processor's fields only
    assert zen4 == "family 25 model 17; avx2 avx512f avx512_vnni avx512_bf16"
    assert envmod._cpu_kind(NEOVERSE) == "implementer 0x41 part 0xd40; asimd sve bf16 i8mm"
    assert envmod._cpu_kind("") is None
    a = {**MACHINE, "cpu_model": "AMD EPYC", "cpu_kind": zen3}
    b = {**MACHINE, "cpu_model": "AMD EPYC", "cpu_kind": zen4}
    assert Env(a).machine() != Env(b).machine() and zen3 in Env(a).machine()
    assert envmod.device_key({**a, "thread_budget": 2}, "cpu") != envmod.device_key({**b, "thread_budget": 2}, "cpu")
    assert not Env(a).same_kind({**b, "gpu": None}) and Env(a).same_kind({**a, "gpu": None})
    old = {k: v for k, v in a.items() if k != "cpu_kind"}
    assert same_cpu_kind(old, b) and Env(old).same_kind({**b, "gpu": None})  # unknown: the model name decides
    with pytest.raises(SpecError, match="a different machine"):
        runner_mod.check_resumable(a, b)
    runner_mod.check_resumable(a, dict(a))
    path = tmp_path / "k.db"
    _store(path, [*_three("torch-eager", 1.0), *_three("jax-jit", 0.5)], env=a)
    _store(path, [*_three("torch-eager", 1.0), *_three("jax-jit", 2.0)], env=b)
    with Store(path) as store:
        result = vd.verdicts(rows(store))
    assert sorted(v["verdict"] for v in result) == ["JAX faster", "PyTorch faster"]  # two machines, never pooled


def test_a_later_run_replaces_a_cells_processes(tmp_path):
    path = tmp_path / "l.db"
    _store(path, [*_three("torch-eager", 1.0), *_three("jax-jit", 0.5)])
    _store(path, [*_three("jax-jit", 2.0, seed=1)])
    with Store(path) as store:
        found = rows(store)
    (v,) = vd.verdicts(found)
    assert v["jax_processes"] == 3 and v["jax_s"] == pytest.approx(2e-3, rel=0.02)


def test_cli_verdict_json_and_refusals(tmp_path):
    path = tmp_path / "j.db"
    run_id, _ = _store(path, [*_three("torch-eager", 1.0), *_three("jax-jit", 0.5)])
    done = runner.invoke(app, ["verdict", "--db", str(path), "-f", "json"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    (v,) = data["verdicts"]
    for key in ("best_torch", "best_jax", "ratio", "ci_low", "ci_high", "verdict", "processes", "machine"):
        assert v[key] is not None, key
    assert data["runs"] == [run_id] and v["verdict"] == "JAX faster"
    done = runner.invoke(app, ["verdict", "--db", str(path)], env={"COLUMNS": "90"})
    assert done.exit_code == 0 and "JAX faster" in done.output and "┏" not in done.output
    # no line past 90 columns but the details' command, never broken (it names --db: a long path here)
    assert max(len(line) for line in done.output.splitlines() if not line.startswith("details: ")) <= 90
    assert f"details: stackwars verdict {run_id} --explain --db {path}" in done.output.splitlines()
    for args, message in ((["-f", "csv"], "unknown format"), (["--threshold", "0.9"], "--threshold"),
                          (["nope"], "no run 'nope'")):
        done = runner.invoke(app, ["verdict", "--db", str(path), *args])
        assert done.exit_code == 2 and message in done.output, done.output
    with Store(path) as store:
        study = store.create_run([], {}, kind="train:mnist", command="train")
    done = runner.invoke(app, ["verdict", study, "--db", str(path)])
    assert done.exit_code == 2 and "train:mnist run" in done.output


def test_the_verdict_at_a_glance_is_a_line_a_row_within_100_columns_and_explain_holds_the_rest(tmp_path):
    """Issue 65: the verdict a run ends with, and `verdict`'s table, is one line a row (workload,
    each side's best and its time, JAX/PyTorch with its CI, the verdict), short notes marked below,
    a legend of at most five lines naming the page that explains every word, no line over 100
    columns on a wide terminal or past the width of a narrow one; `--explain` prints everything
    the full table says (every row's reason and its command again)."""
    cells = [*_three("torch-eager", 1.0, 4), *_three("jax-jit", 0.5, 4),  # decided: JAX faster
             *_three("torch-eager", 1.0, 4, workload="ffn", contended=True),  # busy: cannot say
             *_three("jax-jit", 0.5, 4, workload="ffn", contended=True)]
    path = tmp_path / "glance.db"
    run_id, found = _store(path, cells, config=MeasureConfig(processes=4))
    result = vd.verdicts(found)
    assert {v["workload"]: v["verdict"] for v in result} == {"gemm": "JAX faster", "ffn": "cannot say"}
    for columns in ("250", "100", "72"):
        done = runner.invoke(app, ["verdict", "--db", str(path)], env={"COLUMNS": columns})
        assert done.exit_code == 0, done.output
        lines = done.output.rstrip("\n").splitlines()
        # no line past the width but the details' command, whole (it names --db: a long path here)
        assert max(len(line) for line in lines if not line.startswith("details: ")) <= min(100, int(columns)), \
            (columns, done.output)
        rows_ = [line for line in lines if re.match(r"  (gemm|ffn) ", line)]
        assert len(rows_) == 2, done.output  # one line a row
        gemm = next(line for line in rows_ if "gemm" in line)
        assert "eager " in gemm and "jit " in gemm and gemm.rstrip().endswith("JAX faster"), gemm
        ffn = next(line for line in rows_ if "ffn" in line)
        assert ffn.rstrip().endswith("cannot say (a)"), ffn
        note = lines.index(next(line for line in lines if line.startswith("  (a) cannot say (busy machine)")))
        legend = lines[next(i for i in range(note + 1, len(lines)) if not lines[i].startswith("      ")):]
        assert len(legend) <= 5, (columns, legend)  # issue 65: at most five lines, whatever the width
        said = " ".join(" ".join(legend).split())
        assert said.startswith("JAX/PyTorch < 1: JAX faster"), said  # the legend, not a note's second line
        assert f"within ±{stats.MARGIN:.0%} by two one-sided tests" in said and "Words: docs/getting-started/verdict.md" in said
        # the command whole on a line of its own: the first part of a broken one, pasted, runs alone
        assert legend[-1].endswith(f"details: stackwars verdict {run_id} --explain --db {path}"), legend
    for columns in ("24", "40"):  # a phone's terminal, a split pane: a block of lines a row, no line past it
        done = runner.invoke(app, ["verdict", "--db", str(path)], env={"COLUMNS": columns})
        assert done.exit_code == 0, done.output
        lines = done.output.rstrip("\n").splitlines()
        # past the width only a word that cannot be broken (the page's path) and the details' command
        assert all(len(line) <= int(columns) or len(line.split()) == 1 for line in lines
                   if not line.startswith("details: ")), done.output
        said = " ".join(done.output.split())
        assert "gemm small forward PyTorch eager" in said and "JAX faster" in said and "ffn small forward" in said
        assert "JAX/PyTorch 0.50 (one round)" in said, said  # wrapped, not cut (every process alike here)
        assert lines[-1] == f"details: stackwars verdict {run_id} --explain --db {path}"
    explained = runner.invoke(app, ["verdict", "--db", str(path), "--explain"], env={"COLUMNS": "400"}).output
    flat = " ".join(explained.split())
    for v in result:
        assert " ".join(v["reason"].split()) in flat or v["verdict"] != "cannot say", v["reason"]
        assert v["command"] in flat
    assert " ".join(view.legend(result).split()) in flat
    for columns in ("100", "250"):  # each command whole on a line, on a terminal narrower than it too
        lines = runner.invoke(app, ["verdict", "--db", str(path), "--explain"], env={"COLUMNS": columns}).output
        assert all(any(v["command"] in line for line in lines.splitlines()) for v in result if v.get("command"))
    refused = runner.invoke(app, ["verdict", "--db", str(path), "--explain", "-f", "json"])
    assert refused.exit_code == 2 and "--explain details the verdict's table" in refused.output


def test_a_verdict_that_cannot_decide_asks_for_the_rounds_of_its_next_look(tmp_path):
    """Busy machine: the round a busy process spoiled is replaced, on both sides (it uses up no look:
    a look is a count of clean rounds), even at the cap, but the replacements end once the first
    look's rounds again were spent on busy ones; a CI too wide: the rounds of its next look
    (LOOK_STEP more), never past the cap. The runner numbers them after each cell's last process,
    interleaved."""
    from stackwars import runner

    busy = [*_three("torch-eager", 1.0), _cell("jax-jit", 0.5, 0), _cell("jax-jit", 0.5, 1),
            _cell("jax-jit", 0.5, 2, contended=True)]
    _, found = _store(tmp_path / "b.db", busy, config=MeasureConfig(processes=3, max_processes=6))
    (v,) = vd.verdicts(found)
    assert v["sequence"]["looks"] == [3, 5, 6] and v["sequence"]["look"] == 0
    # JAX's third process was busy: its round is lost, and one more round of both gives three
    (want,) = vd.wanted([v])
    wanted = vd.as_cells([want])
    assert wanted == {"gemm/small/forward/torch-eager/cpu/float32": 1, "gemm/small/forward/jax-jit/cpu/float32": 1}
    assert want.planned and "first look (3 rounds)" in want.why
    _, found = _store(tmp_path / "c.db", busy, config=MeasureConfig(processes=3, max_processes=3))
    assert vd.as_cells(vd.wanted(vd.verdicts(found))) == wanted  # a replaced round, even at the cap
    many = [*_three("torch-eager", 1.0, 8), _cell("jax-jit", 0.5, 0),
            *[_cell("jax-jit", 0.5, p, contended=True) for p in range(1, 8)]]
    _, found = _store(tmp_path / "m.db", many, config=MeasureConfig(processes=3, max_processes=3))
    assert vd.wanted(vd.verdicts(found)) == []  # 7 busy of 7: past the cap and the first look's slack
    plan = [m.spec for m in busy]
    extra = runner.more_rounds(plan, wanted, vd.pairs([v]))
    assert sorted(s.key for s in extra) == ["gemm/small/forward/jax-jit/cpu/float32#r3",
                                            "gemm/small/forward/torch-eager/cpu/float32#r3"]

    rng = np.random.default_rng(3)
    wide = [_cell("torch-eager", 1.0 + 0.3 * rng.random(), p) for p in range(4)] + \
           [_cell("jax-jit", 1.0 + 0.3 * rng.random(), p) for p in range(4)]
    _, found = _store(tmp_path / "n.db", wide, config=MeasureConfig(processes=4, max_processes=16))
    (v,) = vd.verdicts(found)
    assert v["reason_tag"] == "noisy" and v["sequence"]["state"] == "open", v["reason"]
    (want,) = vd.wanted([v])
    assert vd.as_cells([want]) == {"gemm/small/forward/torch-eager/cpu/float32": 2,
                                   "gemm/small/forward/jax-jit/cpu/float32": 2}
    assert "look 2 of 7 (6 rounds)" in want.why and not want.planned and 0 <= want.chance <= 1
    extra = runner.more_rounds([m.spec for m in wide], vd.as_cells([want]))
    assert [(s.backend, s.repeat) for s in extra][:2] == [("torch-eager", 4), ("jax-jit", 4)]  # interleaved
    assert len(extra) == 4 and max(s.repeat for s in extra) == 5
    _, found = _store(tmp_path / "w.db", wide, config=MeasureConfig(processes=4, max_processes=4))
    (v,) = vd.verdicts(found)
    assert v["sequence"]["state"] == "capped" and vd.wanted([v]) == []  # its one look is read


def test_self_check_reads_a_cells_processes_after_its_first_in_back_to_back_pairs(tmp_path):
    """`stackwars verdict --aa`: seven processes of one program, the six after its first in three
    back-to-back pairs, read as three rounds of the program against itself: the same speed; a cell
    with fewer pairs than a first look is not read (its check is open); without any read, exit 2,
    saying what measures them."""
    cells = [_cell("jax-jit", 1.0, p, seed=4) for p in range(7)] + [*_three("torch-eager", 1.0)]
    path = tmp_path / "aa.db"
    _store(path, cells)
    with Store(path) as store:
        check, short = sorted(vd.self_check(rows(store)), key=lambda c: -c["look"])
    assert check["backend"] == "jax-jit" and check["processes"] == [3, 3] and check["word"] == vd.SAME
    assert short["backend"] == "torch-eager" and short["look"] == 0  # one pair: not read
    done = runner.invoke(app, ["verdict", "--aa", "--db", str(path), "-f", "json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["counts"] == {vd.SAME: 1, vd.NO_DIFFERENCE: 0, "JAX faster": 0,
                                                 "PyTorch faster": 0, "cannot say": 0}
    few = tmp_path / "few.db"
    _store(few, _three("jax-jit", 1.0))
    with Store(few) as store:
        (check,) = vd.self_check(rows(store))  # one pair: before its first look, open for `run --aa`'s next pairs
    assert check["look"] == 0 and check["state"] == "open" and check["word"] == "cannot say"
    done = runner.invoke(app, ["verdict", "--aa", "--db", str(few)])
    assert done.exit_code == 2 and "run ... --aa measures them" in " ".join(done.output.split())


def test_aa_pairs_are_the_pairs_run_aa_measured_and_a_round_across_a_resume_is_not_adjacent(tmp_path):
    """`verdict --aa` pairs process numbers 2-3, 4-5, ... as `run --aa` measured them back to back: a
    busy first process never shifts the pairing onto one pair's second and the next pair's first (the
    issue-88 sweep: 3 and 4 read as a pair), a busy member drops its pair, and a pair measured across an
    interruption (two sessions of the run) is left out and counted; the verdict's paired rounds across
    a resume are no longer called adjacent in time, and the record says how many were split."""
    # eleven processes: the first busy, then five pairs; pair (5, 6) with a busy member, pair (9, 10)
    # measured across a resume; the others one program, the pairs' second members 1% slower
    cells = [_cell("jax-jit", 1.0 + 0.01 * (p % 2 == 0 and p > 0), p, seed=5, contended=p in (0, 6))
             for p in range(11)]
    path = tmp_path / "aa.db"
    with Store(path) as store:
        run_id = store.create_run([m.spec for m in cells], {"measure": MeasureConfig().to_dict()}, command="test")
        first = store.start_session(run_id, MACHINE)
        for m in cells[:10]:
            store.add_cell(run_id, first, m)
        store.add_cell(run_id, store.start_session(run_id, MACHINE), cells[10])
        found = rows(store, run_id)
    (c,) = vd.self_check(found)
    assert c["pairs_measured"] == 5 and c["pairs_counted"] == 3, c
    assert c["pairs_left_out"] == {"busy": 1, "split by an interruption": 1}
    # each counted pair's second is its first's 1% slower neighbour: the shifted pairing read 1/1.01 instead
    assert c["processes"] == [3, 3] and c["ratio"] == pytest.approx(1.01, abs=0.004)
    done = runner.invoke(app, ["verdict", "--aa", "--db", str(path)])
    assert done.exit_code == 0, done.output
    said = " ".join(done.output.split())
    assert "5 back-to-back pair(s) measured in 1 cell(s), 3 counted (left out: 1 busy, 1 split by an interruption)" \
        in said
    # none counting: said why, exit 2
    few = tmp_path / "few.db"
    _store(few, [_cell("jax-jit", 1.0, p, contended=p == 2) for p in range(3)])
    done = runner.invoke(app, ["verdict", "--aa", "--db", str(few)])
    assert done.exit_code == 2 and "1 back-to-back pair(s) measured in 1 cell(s), 0 counted (left out: 1 busy)" \
        in " ".join(done.output.split())
    # a verdict's rounds: the second round's JAX process measured after a resume
    pairs = [*_three("torch-eager", 1.0), *_three("jax-jit", 1.2)]
    path = tmp_path / "split.db"
    with Store(path) as store:
        run_id = store.create_run([m.spec for m in pairs], {"measure": MeasureConfig().to_dict()}, command="test")
        first = store.start_session(run_id, MACHINE)
        later = [m for m in pairs if m.spec.backend == "jax-jit" and m.spec.repeat == 1]
        for m in pairs:
            if not later or m is not later[0]:
                store.add_cell(run_id, first, m)
        store.add_cell(run_id, store.start_session(run_id, MACHINE), later[0])
        (v,) = vd.verdicts(rows(store, run_id))
    assert v["chosen_on"]["decided_on"]["rounds_split"] == [1], v["chosen_on"] and v["sequence"]["rounds_split"] == 1
    assert "adjacent in time but 1 split by an interruption" in v["reason"], v["reason"]
    (v,) = vd.verdicts(_store(tmp_path / "whole.db", pairs)[1])
    assert v["sequence"]["rounds_split"] == 0 and "one of each chosen cell adjacent in time" in v["reason"]


def test_cells_of_one_run_placed_on_another_kind_of_machine_get_their_own_verdict(tmp_path):
    """An executor placed half of a run's processes on a node of another kind: those cells carry
    that machine's label, so each kind has its own verdict, and run, verdict and report say so."""
    from stackwars.report import build

    other = {"cpu_model": "Other CPU", "cpu_count_logical": 64, "gpu": None,
             "versions": {"torch": "2.13.0", "jax": "0.10.2"}}

    def placed(m):
        return dataclasses.replace(m, settings={**(m.settings or {}), "placement": {
            "host": "node7", "device": "cpu", "env": {}, "cpus": None, "kind": other}})

    away = [placed(_cell(b, scale, p)) for b, scale in (("torch-eager", 1.0), ("jax-jit", 2.0)) for p in range(3, 6)]
    path = tmp_path / "p.db"
    run_id, found = _store(path, [*_three("torch-eager", 1.0), *_three("jax-jit", 0.5), *away])
    result = vd.verdicts(found)
    assert [(v["machine"].split(" (")[0], v["verdict"], v["processes"]) for v in result] == [
        ("Test CPU", "JAX faster", 3), ("Other CPU", "PyTorch faster", 3)]
    warning = view.mixed_machines(found)
    assert f"run {run_id}'s cells ran on 2 kinds of machine" in warning
    done = runner.invoke(app, ["verdict", "--db", str(path), "-f", "json"])
    assert done.exit_code == 0 and json.loads(done.stdout)["mixed_machines"] == warning
    section = build.verdict_section(found, [], [])
    assert any(getattr(b, "text", "") == warning + "." for b in section.blocks)


# ---- one gate for every claim (verdict/gate.py) ---------------------------------------------------------------
def test_a_run_measured_only_on_a_busy_machine_decides_nothing(tmp_path):
    """Every process contended: no verdict, ratio, memory ratio or first-call figure, in the
    table, the JSON and the report; and no top-up (issue 56): the machine stayed busy through
    the look, so more processes would be measured on the same busy machine, and the row says so."""
    from stackwars.report import build

    # one look's processes all busy is no sign the machine stays so (a host's slow spell): each side's busy
    # candidate gets a process more, to be judged
    cells = [*_three("torch-eager", 1.0, contended=True), *_three("jax-jit", 0.5, contended=True)]
    _, found = _store(tmp_path / "spell.db", cells, config=MeasureConfig(processes=3))
    (v,) = vd.verdicts(found)
    assert v["reason_tag"] == "busy machine" and "no_top_up" not in v
    assert _more([v]) == {"gemm/small/forward/torch-eager/cpu/float32": 1, "gemm/small/forward/jax-jit/cpu/float32": 1}
    # two looks' worth (STAYED_BUSY_LOOKS x --processes), all busy: the machine stayed busy
    cells = [*_three("torch-eager", 1.0, 6, contended=True), *_three("jax-jit", 0.5, 6, contended=True)]
    path = tmp_path / "busy.db"
    _, found = _store(path, cells, config=MeasureConfig(processes=3))
    (v,) = vd.verdicts(found)
    assert v["verdict"] == "cannot say" and v["reason_tag"] == "busy machine", v
    assert v["processes_used"] == 0 and v["processes_busy"] == 12
    assert v["ratio"] is None and v["memory_ratio"] is None and v.get("torch_first_call_s") is None
    assert "measured only while the machine was busy" in v["reason"]
    assert "cannot say (busy machine)" in view.to_text([v])
    done = runner.invoke(app, ["verdict", "--db", str(path), "-f", "json"])
    (j,) = json.loads(done.stdout)["verdicts"]
    assert j["verdict"] == "cannot say" and j["reason_tag"] == "busy machine" and j["processes_busy"] == 12
    with Store(path) as store:
        doc = build.document(build.collect(store), "now")
    from stackwars.report.page import to_markdown
    assert "cannot say (busy machine)" in to_markdown(doc)
    assert _more([v]) == {}
    assert "no more processes: PyTorch's and JAX's sides cannot get the clean ones they need here" in v["reason"], v["reason"]
    assert "torch-eager (its last 6 process(es), none clean)" in v["reason"] and v["no_top_up"]
    assert "no more processes" in j["reason"]
    # the forest plot draws it apart: no point, its reason beside its name
    assert view.forest_png([v]) is not None


def test_a_busy_candidate_that_might_be_faster_blocks_the_side(tmp_path):
    """jax-jit's processes were all busy and its fastest beat jax-eager's clean time: the clean
    jax-eager must not stand for JAX (it would hand PyTorch a win it did not earn)."""
    cells = [*_three("torch-eager", 1.0), *_three("jax-eager", 2.0), *_three("jax-jit", 0.5, 6, contended=True)]
    _, found = _store(tmp_path / "s.db", cells, config=MeasureConfig(processes=3))
    (v,) = vd.verdicts(found)
    assert v["best_jax"] == "jax-eager" and v["verdict"] == "cannot say" and v["reason_tag"] == "busy machine"
    assert "jax-jit was measured only while the machine was busy" in v["reason"]
    assert "it would read without it: PyTorch faster" in v["reason"]
    # its six processes (two looks' worth) were all busy: the machine stayed busy through them, no top-up
    assert _more([v]) == {}
    assert "jax-jit (its last 6 process(es), none clean)" in v["no_top_up"]
    # one of them clean would have been a machine that is quiet at times: then the top-up is asked for
    cells = [*_three("torch-eager", 1.0), *_three("jax-eager", 2.0), _cell("jax-jit", 0.5, 0),
             _cell("jax-jit", 0.5, 1, contended=True), _cell("jax-jit", 0.5, 2, contended=True)]
    _, found = _store(tmp_path / "u.db", cells, config=MeasureConfig(processes=3, max_processes=6))
    (v,) = vd.verdicts(found)
    assert v["reason_tag"] == "busy machine" and "no_top_up" not in v
    # jax-jit's clean first process chose it; its two busy ones decide nothing: three rounds of both
    assert _more([v]) == {"gemm/small/forward/torch-eager/cpu/float32": 3,
                                                       "gemm/small/forward/jax-jit/cpu/float32": 3}
    # a busy candidate slower even at its fastest process does not block: busy slows, never speeds
    cells = [*_three("torch-eager", 1.0), *_three("jax-jit", 0.5), *_three("jax-eager", 4.0, contended=True)]
    _, found = _store(tmp_path / "t.db", cells)
    (v,) = vd.verdicts(found)
    assert v["verdict"] == "JAX faster" and v["jax_busy_candidates"] == []


def test_compile_pays_and_memory_are_never_drawn_from_busy_processes(tmp_path):
    """The Mixer case: torch-compile's three processes all contended (320 us, 364 us, 2.35 ms
    against eager's 448 us) once read 'torch-compile never'; it cannot say."""
    from stackwars.report import build
    from stackwars.verdict import figures

    compiled = [dataclasses.replace(_cell("torch-compile", s, p, contended=True), first_call_s=3.0)
                for p, s in enumerate((0.320, 0.364, 2.35))]
    cells = [*_three("torch-eager", 0.448, first=0.01), *compiled, *_three("jax-jit", 0.4), *_three("jax-eager", 1.0)]
    path = tmp_path / "m.db"
    _, found = _store(path, cells)
    (v,) = vd.verdicts(found)
    assert v["torch_pays"]["verdict"].startswith("cannot say (busy machine)"), v["torch_pays"]
    assert "cannot say (busy machine)" in view.cells(v)[6]
    evens = build.break_even(figures.group_rows(found))
    (tc,) = [e for e in evens if e["compiled"] == "torch-compile"]
    assert tc["verdict"].startswith("cannot say (busy machine)") and tc["calls"] is None
    # memory: the busy rows carry no memory figure; the table, the verdict and the report agree
    (row,) = [r for r in figures.combine_repeats(found) if r["backend"] == "torch-compile"]
    assert row["memory_added_bytes"] is None and row["busy"]


# ---- a command per row (stackwars/commands.py) ---------------------------------------------------------------
def _planned_by(command: str, monkeypatch, tmp_path) -> list[str]:
    """The cells `command` plans, through the real command line (no worker measures them)."""
    import shlex

    from stackwars import runner as runner_mod

    planned: list[str] = []

    class Planned(Exception):
        pass

    def start(cls, store, specs, *args, **kwargs):  # every process the command asks for, before screening
        planned.extend(s.key for s in specs)
        raise Planned

    from stackwars import orchestrate

    monkeypatch.setattr(orchestrate.Run, "start", classmethod(start))
    # a stand-in probe that does not call ``meanwhile`` either: no fork server starts for a plan
    monkeypatch.setattr(runner_mod, "probe_machine", lambda inline=False, meanwhile=None: {
        "torch": {"importable": True}, "jax": {"importable": True}})
    args = shlex.split(command)
    assert args[:2] == ["stackwars", "run"]
    done = runner.invoke(app, [*args[1:], "--db", str(tmp_path / "again.db")])
    assert isinstance(done.exception, Planned), done.output
    return planned


def test_each_verdict_row_carries_the_command_that_measures_it_again(tmp_path, monkeypatch):
    def with_spec(m, **spec):
        return dataclasses.replace(m, spec=dataclasses.replace(m.spec, preset="tiny", dtype="bfloat16",
                                                               overrides=(("causal", False),), **spec))

    cells = [with_spec(m, options=(("optimizer_impl", "for-loop"),))
             for m in _three("torch-eager", 2.0, workload="mha", first=0.01)]
    cells += [with_spec(m, options=(("mode", "max-autotune-no-cudagraphs"), ("optimizer_impl", "for-loop")))
              for m in _three("torch-compile", 1.0, workload="mha")]
    cells += [with_spec(m, options=(("xla_autotune_level", 0),)) for m in _three("jax-jit", 1.5, workload="mha")]
    _, found = _store(tmp_path / "c.db", cells)
    (v,) = vd.verdicts(found)
    cmd = v["command"]
    assert cmd.startswith("stackwars run mha --preset tiny --phase forward -b torch-compile -b torch-eager -b jax-jit")
    for part in ("--dtype bfloat16", "--set causal=False", "--compile-mode max-autotune-no-cudagraphs",
                 "--torch-optimizer for-loop", "--xla-autotune-level 0", "--processes 3"):
        assert part in cmd, (part, cmd)
    # run through the real command line, it plans exactly the row's cells, each in three processes
    wanted = {r["cell_key"] for r in found}
    assert set(_planned_by(cmd, monkeypatch, tmp_path)) == wanted
    # rows of two runs whose options one command line cannot give (eager without the optimizer option,
    # compiled with it): a command each
    other = [dataclasses.replace(m, spec=dataclasses.replace(m.spec, options=())) for m in cells[:3]]
    _, found2 = _store(tmp_path / "d.db", [*other, *cells[3:]])
    (v2,) = vd.verdicts(found2)
    assert v2["command"].count("stackwars run") == 2 and " && " in v2["command"]
    # and the table, the JSON and the report carry it
    assert f"again: {vd.title(v)}: {cmd}" in " ".join(view.to_text([v], width=400).split())
    assert f"`{cmd}`" in view.markdown([v])


def test_a_user_models_command_names_its_file(tmp_path, monkeypatch):
    path = tmp_path / "mine.py"
    path.write_text('import torch, stackwars\n'
                    'net = stackwars.Model(name="my-net", presets={"tiny": {"batch": 2, "features": 4}},\n'
                    '    batch=lambda size, rng: {"x": rng.standard_normal((size.batch, size.features)),\n'
                    '                             "target": rng.standard_normal((size.batch, 1))},\n'
                    '    torch=lambda size: torch.nn.Linear(size.features, 1))\n')
    from stackwars import registry
    assert registry.resolve_workload(f"{path}:net") == "my-net"
    assert registry.origin("workload", "my-net") == f"file {path}:net"
    cells = [dataclasses.replace(m, settings={"origin": {"workload": f"file {path}:net"}},
                                 spec=dataclasses.replace(m.spec, preset="tiny", workload="my-net"))
             for m in _three("torch-eager", 1.0)]
    _, found = _store(tmp_path / "u.db", cells)
    (v,) = vd.verdicts(found)
    assert v["command"] == f"stackwars run {path}:net --preset tiny --phase forward -b torch-eager --processes 3"


def test_a_busy_top_up_is_asked_only_where_it_can_reach_a_verdict(tmp_path):
    """A run of one process a cell (capped at two) on a busy machine: one more process could
    never give three clean ones, so none is asked for (it would cost a process and decide nothing)."""
    cells = [_cell("torch-eager", 1.0, 0, contended=True), _cell("jax-jit", 0.5, 0)]
    _, found = _store(tmp_path / "one.db", cells)
    (v,) = vd.verdicts(found)
    assert v["verdict"] == "cannot say" and v["reason_tag"] == "busy machine"
    assert _more([v]) == {}
    # one busy process is no sign the machine stays busy (figures.STAYED_BUSY_LOOKS): the row gives the command
    # of a run that can decide, not "no more processes"
    assert "no_top_up" not in v and "measured only while the machine was busy" in v["reason"]
    assert v["command"].endswith("--processes 3")
    cells = [_cell("torch-eager", 1.0, 0), _cell("jax-jit", 0.5, 0)]
    _, found = _store(tmp_path / "two.db", cells)
    (v,) = vd.verdicts(found)
    assert v["reason_tag"] == "too few processes" and _more([v]) == {}


# ---- stopping when decided (orchestrate.Run.measure's looks) ----------------------------------
class SyntheticExecutor(FakeExecutor):
    """An executor whose cells run on the synthetic machine: each process of a cell its own
    draws (``seed``, backend, process number), the same program on every backend."""

    def __init__(self, seed: int, between: float):
        self.seed, self.between = seed, between

    def run(self, specs, measure, on_start=None):
        for spec in specs:
            b = ("torch-eager", "jax-jit").index(spec.backend)
            rng = np.random.default_rng([self.seed, b, spec.repeat])
            samples = _processes(rng, 1e-3, 1, samples=20, between=self.between)[0]
            m = measurement(spec.backend, samples=tuple(samples))
            yield dataclasses.replace(m, spec=spec, parity=Parity(max_rel_err=1e-7, tolerance=2e-4), wall_s=1.0)


def test_a_runs_looks_share_its_float64_references_and_compile_caches(tmp_path, monkeypatch):
    """A top-up process compares with the float64 reference its cell's first look computed
    (on a GPU a model's reference is a worker of its own: seconds a look), and starts from the
    compile caches that look left; both folders go when the run ends."""
    from stackwars import orchestrate, runner
    from stackwars.records import CellSpec

    given, real = [], runner.execute

    def execute(*args, **kwargs):
        bound = inspect.signature(real).bind(*args, **kwargs).arguments
        given.append((bound.get("references"), bound.get("caches")))
        assert all(folder and os.path.isdir(folder) for folder in given[-1]), given
        return real(*args, **kwargs)

    class Scratch(SyntheticExecutor):
        def scratch(self, kind):
            return str(tmp_path / kind)

    monkeypatch.setattr(runner, "execute", execute)
    (tmp_path / "reference").mkdir()
    (tmp_path / "caches").mkdir()
    config = MeasureConfig(processes=3, max_processes=9)
    specs = [CellSpec("gemm", "small", "forward", b, repeat=r) for r in range(3) for b in ("torch-eager", "jax-jit")]
    with Store(tmp_path / "s.db") as store:
        run_id = store.create_run(specs, {"measure": config.to_dict()}, command="looks")
        orchestrate.Run(store, run_id, specs, config, MACHINE, Scratch(3, 0.4)).measure()
    assert len(given) >= 2 and len(set(given)) == 1, given  # every look the same two folders
    assert not any(os.path.exists(f) for f in given[0])  # removed at the run's end


class Clocked:
    """An executor whose cell-processes advance ``clock`` (a one-item list, the budget's
    clock in a test) by their wall time as they finish."""

    def __init__(self, inner, clock):
        self.inner, self.clock = inner, clock

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def run(self, specs, measure, on_start=None):
        for m in self.inner.run(specs, measure, on_start):
            self.clock[0] += m.wall_s
            yield m


def test_a_budget_stops_the_looks_that_would_not_fit_and_says_so(tmp_path, monkeypatch):
    """run --budget: processes 40% apart cannot decide in 3; a look of more starts only if what
    its cells took so far (1 s a cell-process here, on a clock the synthetic machine advances)
    fits what is left, and a run stopped undecided says how much it would have needed."""
    from stackwars import orchestrate
    from stackwars.records import CellSpec

    clock = [0.0]
    monkeypatch.setattr(orchestrate, "_now", lambda: clock[0])

    def measured(budget_s):
        config = MeasureConfig(processes=3, max_processes=12, budget_s=budget_s)
        specs = [CellSpec("gemm", "small", "forward", b, repeat=r) for r in range(3) for b in ("torch-eager", "jax-jit")]
        notes = []
        with Store(tmp_path / f"b-{budget_s}.db") as store:
            run_id = store.create_run(specs, {"measure": config.to_dict()}, command="budget")
            run = orchestrate.Run(store, run_id, specs, config, MACHINE, Clocked(SyntheticExecutor(7, 0.4), clock),
                                  budget=orchestrate.Budget(budget_s))
            run.measure(orchestrate.Hooks(on_note=notes.append))
            return len(rows(store, run_id)), notes

    unlimited, notes = measured(None)
    assert unlimited > 6 and "more process(es)" in notes[0]  # the undecided verdict looked again
    n, notes = measured(7.0)  # the planned 6 s leave 1 s: the next look's 2 rounds (4 s) do not fit
    assert n == 6 and len(notes) == 1
    assert re.search(r"the budget left \(1 s of 7 s\) does not afford the next look of: gemm · small · forward · cpu "
                     r"· float32 \(look 2 of 6 \(5 rounds\), 2 round\(s\), about 4 s\)", notes[0]), notes
    db = tmp_path / "b-7.0.db"
    with Store(db) as store:
        (v,) = vd.verdicts(rows(store), db=str(db))
        run_id = store.run_ids()[-1]
    # the row stays open and says what it would need, its estimate and spread taken as the truth, and the
    # command that measures it: the run resumed with a budget of its own
    assert v["sequence"]["state"] == "open" and re.fullmatch(r"about \d+ more round\(s\), about \d+ s|more rounds "
                                                              r"than its cap of 12 allows at its spread",
                                                              vd.would_need(v)), vd.would_need(v)
    assert v["more"]["command"] == f"stackwars run --resume {run_id} --budget {v['more']['command'].split()[-3]} " \
                                   f"--db {db}" and v["more"]["command"] in v["reason"]
    # resumed, with the budget it names: the looks go on where they stopped, on the same boundaries (on the
    # synthetic machine the run was measured on: its fingerprint, not this host's)
    monkeypatch.setattr(orchestrate.envmod, "fingerprint", lambda threads, probe: dict(MACHINE))
    with Store(db) as store:
        run = orchestrate.Run.resume(store, run_id, lambda: MACHINE, Clocked(SyntheticExecutor(7, 0.4), clock),
                                     budget_s=float(v["more"]["command"].split()[-3]))
        run.measure()
        assert len(rows(store, run_id)) > 6
        (after,) = vd.verdicts(rows(store, run_id))
    assert after["sequence"]["rounds_measured"] > v["sequence"]["rounds_measured"]
    assert after["sequence"]["looks"] == v["sequence"]["looks"]


def test_a_run_with_top_ups_prints_one_interval_at_its_looks_level_everywhere(tmp_path):
    """A verdict read at a later look (the boundary spends the 5% over the looks) is printed at that level,
    the same interval, by ``verdict``, ``verdict -f json``, ``verdict -f markdown``, the report's
    Markdown and HTML: none of them reads the run's rows at 95% again. The row's "again" command
    says the level a fresh run of it reads at."""
    from stackwars import orchestrate
    from stackwars.records import CellSpec
    from stackwars.report import format as fmt

    config = MeasureConfig(processes=3, max_processes=16)
    specs = [CellSpec("gemm", "small", "forward", b, repeat=r) for r in range(3) for b in ("torch-eager", "jax-jit")]
    db = tmp_path / "looks.db"
    with Store(db) as store:
        run_id = store.create_run(specs, {"measure": config.to_dict()}, command="looks")
        orchestrate.Run(store, run_id, specs, config, MACHINE, SyntheticExecutor(7, 0.4)).measure()
        (v,) = vd.verdicts(rows(store, run_id))
    assert v["look"] >= 2 and v["confidence"] > 0.95, v  # a later look: read at its boundary's level, not 95%
    text = fmt.interval(v["ratio"], v["ci_low"], v["ci_high"], v["confidence"])
    assert not text.endswith("95%)")
    env = {"COLUMNS": "300"}
    table = runner.invoke(app, ["verdict", "--db", str(db), "--explain"], env=env)
    assert table.exit_code == 0, table.output
    assert text in table.output, (text, table.output)
    brief = runner.invoke(app, ["verdict", "--db", str(db)], env=env).output  # the glance: its level, 2 places
    assert f"{v['ratio']:.2f} ({v['ci_low']:.2f}-{v['ci_high']:.2f}, {fmt.level(v['confidence'])})" in brief
    data = json.loads(runner.invoke(app, ["verdict", "--db", str(db), "-f", "json"]).output)
    (j,) = data["verdicts"]
    assert fmt.interval(j["ratio"], j["ci_low"], j["ci_high"], j["confidence"]) == text
    assert text in runner.invoke(app, ["verdict", "--db", str(db), "-f", "markdown"]).output
    report = runner.invoke(app, ["report", "--db", str(db), "--out", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    for name in ("report.md", "report.html"):
        assert text in (tmp_path / "report" / name).read_text(), name
    # the again command: where a fresh run of it reads (its own looks, from the start)
    assert v["command_looks"] == [3, 5, 7, 9, 11, 13, 15, 16]
    # said once for the table where every row's is the same (issue 65), not repeated on each row
    text = " ".join(table.output.split())
    assert v["command"] in text
    assert ("each command above: a fresh run of it reads its verdict at looks of 3, 5, ..., 16 rounds while "
            "undecided, spending 5% over them") in text


def _gpu_cell(backend, scale, proc, device_s, sha="p1", cache="cold", issue_s=None, sm_mhz=None, reasons=()):
    from stackwars.records import CompileStats

    m = _cell(backend, scale, proc)
    # as the harness records them: every readout from the steady window's own calls (harness/window.py)
    settings = {"device_time": {"samples": [device_s] * 5, "window": "steady"}, "cache": {"mode": cache}}
    if issue_s is not None:
        settings["issue"] = {"samples": [issue_s] * 20, "window": "steady",
                             "clocks": {"sm_mhz": sm_mhz, "sm_max_mhz": 1980, "reasons": list(reasons),
                                        "sm_mhz_range": [sm_mhz, sm_mhz], "window": "steady"}}
    return dataclasses.replace(m, compile=CompileStats(total_s=1.0, extra={"program_sha": sha}), settings=settings)


def test_a_spread_between_processes_is_explained_and_device_time_stands_beside_wall_time(tmp_path):
    """mha on the H100: torch-compile's process medians 182-355 µs. Here: the same program and
    the same device time in every process, the wall clock 2x apart: host time, said so in the
    notes of the table and in the verdict's JSON; and a verdict whose device clock disagrees
    with its wall clock says both."""
    from stackwars.report import tables
    from stackwars.verdict import figures

    cells = [_gpu_cell("torch-compile", s, p, 0.5e-3, cache="cold" if p == 0 else "warm")
             for p, s in enumerate((1.0, 2.0, 1.7))]
    cells += [_gpu_cell("jax-jit", 1.0, p, 0.9e-3, sha="x1") for p in range(3)]
    _, found = _store(tmp_path / "s.db", cells)
    notes = tables.spread_lines(found)
    assert len(notes) == 1 and "torch-compile" in notes[0], notes
    assert "the same compiled program in both" in notes[0] and "host time" in notes[0]
    assert "caches: fastest cold, slowest warm" in notes[0] and "(#0)" in notes[0] and "(#1)" in notes[0]
    (v,) = vd.verdicts(found)
    assert v["torch_spread_why"]["spread"] == pytest.approx(1.0, rel=0.05) and v["jax_spread_why"] is None
    # wall: JAX/PyTorch about 1/1.57; device: 0.9 / 0.5 = 1.8: the row says both
    assert v["device_ratio"] == pytest.approx(1.8) and "device time JAX/PyTorch 1.800" in v["why"]
    # a different program in the slowest process is named as such
    cells[1] = _gpu_cell("torch-compile", 2.0, 1, 1.0e-3, sha="p2")
    _, found = _store(tmp_path / "s2.db", cells)
    (line,) = tables.spread_lines(found)
    # the events rose with the wall clock: without the host's issue time that is no proof of a slower device
    assert "different compiled programs (p1 vs p2)" in line and "the device itself ran slower" not in line
    assert "slower kernels, or a device waiting for a slower host" in line and "issue time or a profile" in line
    # a record whose device time came from a window of its own after the timed one (before they came
    # from the timed calls): the note does not set it against the wall time
    for m in cells:
        m.settings["device_time"].pop("window")
    (line,) = tables.spread_lines(_store(tmp_path / "s3.db", cells)[1])
    assert "were read in windows of their own after the timed one" in line and "device time a call" not in line


def test_device_time_that_rises_with_the_wall_clock_is_told_apart_by_the_hosts_issue_time_and_the_sm_clock(tmp_path):
    """The H200's resnet50 torch-compile processes ran at 2.0 or 3.5 ms a call, the same program,
    the CUDA events rising as much: a host that took most of the call to issue it (the device
    waited for its launches), or a device that ran slower (the host well ahead, or a lower SM
    clock with NVML's reason). Each reading is named only where its evidence holds."""
    from stackwars.report import tables
    from stackwars.verdict import figures

    def spread(slow_issue_s, fast_mhz=1980, slow_mhz=1980, reasons=()):
        cells = [_gpu_cell("torch-compile", 2.0, 0, 2.0e-3, issue_s=1.9e-3, sm_mhz=fast_mhz),
                 _gpu_cell("torch-compile", 3.5, 1, 3.5e-3, issue_s=slow_issue_s, sm_mhz=slow_mhz, reasons=reasons),
                 _gpu_cell("torch-compile", 2.1, 2, 2.1e-3, issue_s=2.0e-3, sm_mhz=fast_mhz)]
        (line,) = tables.spread_lines(_store(tmp_path / f"{slow_issue_s}-{slow_mhz}.db", cells)[1])
        return line

    host = spread(3.3e-3)  # 94% of the call spent issuing it
    assert "as it does when the device waits for the host's launches" in host, host
    assert "the host took 3.30 ms to issue a call of 3.50 ms in the slowest (94%): host-bound" in host
    assert "NVML read the SM clock at 1980 MHz throughout, in both" in host and "the device itself ran slower" not in host
    device = spread(0.4e-3)  # the host issued it in 11% of its time: the device set the pace
    assert "the device itself ran slower" in device and "the device's work set the pace" in device, device
    clocked = spread(3.3e-3, slow_mhz=1400, reasons=("hardware power brake", "idle"))
    assert "NVML read the SM clock at 1980 vs 1400 MHz (hardware power brake): the device was slowed" in clocked, clocked
    assert "the device itself ran slower" in clocked and "idle" not in clocked
    busy_pool = [_gpu_cell("torch-compile", s, p, s * 1e-3, issue_s=s * 0.9e-3, sm_mhz=1980)
                 for p, s in enumerate((2.0, 3.5, 2.1))]
    busy_pool[1].settings["contention"] = {"fraction": 0.0, "descendants_fraction": 0.6, "window_s": 0.4}
    busy_pool[0].settings["contention"] = {"fraction": 0.0, "descendants_fraction": 0.0, "window_s": 0.4}
    (line,) = tables.spread_lines(_store(tmp_path / "pool.db", busy_pool)[1])
    assert "machine: its own child processes (Inductor's compile pool) took 0% / 60% of its CPUs" in line, line
    partly = spread(2.3e-3)  # 66%: neither reading holds alone
    assert "partly host-bound" in partly and "slower kernels, or a device waiting for a slower host" in partly
    assert "issue time or a profile" not in partly  # the issue time was measured; it just did not settle it



def test_the_slowest_processs_energy_window_says_whether_its_calls_slowed_with_the_sm_clock(tmp_path):
    """Process #4 on the H200 ran slow for 24 samples, then fast: one process at two speeds. Its
    energy window (a second of its calls, marked every 0.1 s with the SM clock) shows the same,
    and whether the clock moved with the calls."""
    from stackwars.report import tables
    from stackwars.verdict import figures

    def line(clocks, rates=(250.0, 480.0)):
        cells = [_gpu_cell("torch-compile", s, p, s * 1e-3, issue_s=s * 0.9e-3, sm_mhz=1980)
                 for p, s in enumerate((2.0, 3.5, 2.1))]
        cells[1].settings["energy"] = {"source": "nvml", "joules_per_call": 1.1, "mean_power_w": 380.0,
                                       "window_s": 1.0, "trace": {"calls_per_s": list(rates), "sm_mhz_range": clocks}}
        (out,) = tables.spread_lines(_store(tmp_path / f"e-{clocks}-{rates}.db", cells)[1])
        return out

    held = line([1965, 1980])
    assert "within its timed window the slowest made 250-480 calls a second while NVML read its SM clock at " \
           "1965-1980 MHz: not a slowed device" in held, held
    moved = line([1350, 1980])
    assert "NVML read its SM clock at 1350-1980 MHz: the clock moved with its calls" in moved, moved
    assert "calls a second" not in line([1980, 1980], rates=(470.0, 480.0))  # one speed: nothing to say


def test_a_clock_nvml_read_unchanged_is_never_said_to_have_changed(tmp_path, monkeypatch):
    """A fake NVML whose SM clock reads 1980 MHz at every mark of the window (the H100 did,
    while the note said "the device's clock rose"): the window's record holds that one clock,
    and no note of the spread between processes says a clock changed or the device slowed."""
    import sys
    import types

    from stackwars.harness import issue
    from stackwars.report import tables
    from stackwars.verdict import figures

    fake = types.SimpleNamespace(
        NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2, nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda i: f"gpu{i}", nvmlDeviceGetClockInfo=lambda h, which: {1: 1980, 2: 2619}[which],
        nvmlDeviceGetMaxClockInfo=lambda h, which: 1980, nvmlDeviceGetTemperature=lambda h, sensor: 60,
        nvmlDeviceGetPowerUsage=lambda h: 500_000, nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0x1)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    now = [0.0]
    clocks = issue.WindowClocks(clock=lambda: now[0])
    for i in range(30):  # a window of 3 s of samples, 0.1 s each
        now[0] += 0.1
        clocks.after_sample(now[0], i + 1)
    rec = clocks.record()
    assert rec["window"] == "steady" and rec["marks"] >= 10 and rec["sm_mhz_range"] == [1980, 1980]
    cells = []
    for p, s in enumerate((2.0, 3.5, 2.1)):  # a spread of 75%, the device time rising with the wall time
        m = _gpu_cell("torch-compile", s, p, s * 1e-3, issue_s=s * 0.7e-3, sm_mhz=1980)
        m.settings["issue"]["clocks"] = rec
        cells.append(m)
    (line,) = tables.spread_lines(_store(tmp_path / "c.db", cells)[1])
    assert "NVML read the SM clock at 1980 MHz throughout, in both" in line, line
    for claim in ("clock rose", "clock moved", "clock fell", "was slowed", "ran slower", "device's clock"):
        assert claim not in line, (claim, line)


def _profiled(proc, scale, kernels, busy_s, wall_s):
    """A torch-compile process whose --profile summary ran ``kernels`` {name: count a step}."""
    from stackwars.harness import profile as prof

    m = _cell("torch-compile", scale, proc)
    mix = prof.kernel_mix(kernels, {k: busy_s / len(kernels) for k in kernels}, 1)
    summary = {"median": {"wall_s": wall_s, "busy_s": busy_s, "gap_s": wall_s - busy_s,
                          "kernels": sum(kernels.values())}, "distinct_kernels": len(kernels), **mix}
    return dataclasses.replace(m, settings={"profile": {"summary": summary}})


def test_the_fastest_and_slowest_processes_profiles_say_whether_they_ran_the_same_kernels(tmp_path):
    """Issue 34: a spread between processes is explained by a profile of the fastest and the
    slowest: the same kernels and a longer gap between them (host time), or other kernels
    (cuBLAS chose another GEMM), named; a run without profiles says how to get them."""
    from stackwars.report import tables
    from stackwars.verdict import figures

    same = {"cublas_gemm_a": 2, "triton_poi_fused_add_0": 1}
    cells = [_profiled(0, 1.0, same, 40e-6, 2.4e-3), _profiled(1, 2.0, same, 41e-6, 4.2e-3),
             _profiled(2, 1.5, same, 40e-6, 3.1e-3)]
    (line,) = tables.spread_lines(_store(tmp_path / "a.db", cells)[1])
    assert "the same kernels in both profiles (3 a step)" in line
    # the profiled steps ran slower than the timed ones (the profiler's own cost): said, and the gaps
    # between kernels, the profiler's as much as the host's, are not where the note looks
    assert "kernels busy 40.0 µs vs 41.0 µs a step: the kernels were as busy in both: the difference is not in " \
           "the kernels" in line, line
    assert "a profiled step took #0 2.4x, #1 2.1x its timed call" in line, line
    assert "gaps between kernels (host time)" not in line and "gap" not in line.split("(a profiled step")[0]
    other = {"cutlass_gemm_b": 2, "triton_poi_fused_add_0": 1, "triton_poi_fused_add_1": 1}
    cells[1] = _profiled(1, 2.0, other, 90e-6, 110e-6)
    (line,) = tables.spread_lines(_store(tmp_path / "b.db", cells)[1])
    assert "different kernels in their profiles (3 vs 4 a step" in line
    assert "only the fastest ran cublas_gemm_a" in line
    assert "only the slowest ran cutlass_gemm_b, triton_poi_fused_add_1" in line
    assert "the kernels were busy +125% longer a step in the slowest" in line, line
    cells[1] = _profiled(1, 2.0, {**same, "cublas_gemm_a": 3}, 60e-6, 80e-6)  # one GEMM more a step
    (line,) = tables.spread_lines(_store(tmp_path / "d.db", cells)[1])
    assert "a step ran cublas_gemm_a 2 vs 3)" in line and "only the fastest" not in line and "only the slowest" not in line
    old = _profiled(1, 2.0, same, 41e-6, 130e-6)  # stored before profiles kept their kernel mix
    old.settings["profile"]["summary"] = {"median": old.settings["profile"]["summary"]["median"]}
    cells[1] = old
    (line,) = tables.spread_lines(_store(tmp_path / "f.db", cells)[1])
    assert "hold no kernel mix to compare" in line and "the same kernels" not in line
    (line,) = tables.spread_lines(_store(tmp_path / "c.db", [_cell("torch-compile", s, p)
                                                             for p, s in enumerate((1.0, 2.0, 1.5))])[1])
    assert "no profile of #0 and #1 (run --profile 3 to compare the kernels they ran)" in line


def _shared(proc, scale, fraction, window_s):
    """A torch-eager process whose timed window of ``window_s`` others took ``fraction`` of."""
    m = _cell("torch-eager", scale, proc)
    return dataclasses.replace(m, settings={"contention": {"fraction": fraction, "window_s": window_s,
                                                           "contended": False}})


def test_the_spread_note_states_others_share_only_where_the_window_could_judge_it(tmp_path):
    """The kernel counts CPU time in 10 ms ticks, so a window under 0.25 s is never flagged
    contended; its share (two ticks in 0.1 s on 2 CPUs read as 10%) must not be printed as if
    it were a figure either."""
    from stackwars.report import tables
    from stackwars.verdict import figures

    long = [_shared(p, s, f, 0.5) for p, (s, f) in enumerate(((1.0, 0.0), (2.0, 0.04), (1.5, 0.0)))]
    (line,) = tables.spread_lines(_store(tmp_path / "a.db", long)[1])
    assert "others took 0% / 4% of its CPUs" in line and "not judged" not in line
    # windows too short to be judged: their processes are not clean (verdict/gate.py), so no spread between
    # clean processes is explained, and the cell says why it has none
    short = [_shared(p, s, f, 0.1) for p, (s, f) in enumerate(((1.0, 0.10), (2.0, 0.10), (1.5, 0.0)))]
    found = _store(tmp_path / "b.db", short)[1]
    assert tables.spread_lines(found) == []
    (row,) = figures.combine_repeats(found)
    assert row["busy"] and row["busy_reasons"] == "3 not judged (window too short)"


def test_a_row_whose_fastest_candidate_failed_parity_spends_no_top_up(tmp_path):
    """Issue 56: jax-eager ran fastest but failed parity; the row's CI is too wide to decide. More
    processes would not make jax-eager pass, nor the passing jax-jit the fastest JAX program: the
    run measures no more of it, and the row says why. Without the failure the same row is topped up."""
    rng = np.random.default_rng(3)
    wide = [_cell("torch-eager", 1.0 + 0.6 * rng.random(), p) for p in range(3)] + \
           [_cell("jax-jit", 1.0 + 0.6 * rng.random(), p) for p in range(3)]
    failed = [*_three("jax-eager", 0.5, status="parity_fail", parity=3e-3)]
    config = MeasureConfig(processes=3, max_processes=6)
    _, found = _store(tmp_path / "p.db", wide + failed, config=config)
    (v,) = vd.verdicts(found)
    assert v["verdict"] == "cannot say" and v["reason_tag"] == "noisy", v["reason"]
    assert _more([v]) == {}
    assert "no more processes: JAX's jax-eager, faster than the side's best, failed parity" in v["reason"]
    _, found = _store(tmp_path / "q.db", wide, config=MeasureConfig(processes=3, max_processes=16))
    (v,) = vd.verdicts(found)
    assert v["reason_tag"] == "noisy" and "no_top_up" not in v
    assert set(_more([v]).values()) == {2}  # the rounds of its next look: 3 -> 5
    # capped at 6 rounds, the same row could not decide a 15% difference there: it stops (futility)
    _, found = _store(tmp_path / "r.db", wide, config=config)
    (v,) = vd.verdicts(found)
    assert v["sequence"]["state"] == "futile" and _more([v]) == {} and "(futility)" in v["reason"]


def test_a_side_whose_every_candidate_failed_parity_shows_the_failure_not_unchecked(tmp_path):
    """Issue 56: a run whose jax-jit failed parity read 'parity unchecked / unchecked'; the side's
    parity is its failure, named, and the row takes no top-up (one side missing)."""
    cells = [*_three("torch-eager", 1.0), *_three("jax-jit", 0.5, status="parity_fail", parity=0.145)]
    _, found = _store(tmp_path / "f.db", cells, config=MeasureConfig(processes=3, max_processes=6))
    (v,) = vd.verdicts(found)
    assert v["reason_tag"] == "one side missing" and _more([v]) == {}
    parity = view.cells(v)[8]
    assert parity.endswith(" / jax-jit 1.4e-01 ✗ (tol 2e-04)") and "unchecked" not in parity, parity


def test_a_lean_read_decides_as_the_full_one(tmp_path):
    """verdicts(lean=True), what a run's next look and the calibration read, leaves out the figures shown
    beside a row (each cell's bootstrap interval, the unpaired ratio), never a word or a level: on runs
    through orchestrate.Run with looks and rows that decide, are the same speed, or stay open,
    every row's verdict, reason, ratio, interval, level, look and state are the same."""
    from stackwars import orchestrate
    from stackwars.records import CellSpec

    checked = 0
    for seed, between, shift in ((1, 0.05, 0.0), (2, 0.4, 0.0), (3, 0.08, 0.3)):
        config = MeasureConfig(processes=4, max_processes=16)
        specs = [CellSpec("gemm", "small", "forward", b, repeat=r) for r in range(4) for b in ("torch-eager", "jax-jit")]
        with Store(tmp_path / f"l{seed}.db") as store:
            run_id = store.create_run(specs, {"measure": config.to_dict()}, command="lean")
            executor = SyntheticExecutor(seed, between)
            if shift:
                from tests.test_decides import Shifted
                executor = Shifted(seed, between, shift)
            orchestrate.Run(store, run_id, specs, config, MACHINE, executor).measure()
            found = rows(store, run_id)
        for full, lean in zip(vd.verdicts(found), vd.verdicts(found, lean=True)):
            for key in ("verdict", "reason", "reason_tag", "ratio", "ci_low", "ci_high", "confidence", "look"):
                assert full.get(key) == lean.get(key), (key, full.get(key), lean.get(key))
            assert full["sequence"]["state"] == lean["sequence"]["state"]
            checked += 1
    assert checked == 3


def test_a_run_stopped_after_its_first_round_resumes_into_its_screening_and_looks(tmp_path, monkeypatch):
    """Issue 88: a run stopped between its first round and its screening (Ctrl-C after its second
    result line) had nothing missing from its plan, and its resume said "nothing to resume" with
    2 of 6 processes stored. Its resume now screens, measures the first look's rounds and the looks
    after; a run whose rows all decided has nothing to resume, and says so."""
    from stackwars import orchestrate
    from stackwars.errors import SpecError
    from stackwars.records import CellSpec

    monkeypatch.setattr(orchestrate.envmod, "fingerprint", lambda threads, probe: dict(MACHINE))
    config = MeasureConfig(processes=3, max_processes=6)
    first = [CellSpec("gemm", "small", "forward", b) for b in ("torch-eager", "jax-jit")]
    db = tmp_path / "s.db"
    with Store(db) as store:
        run_id = store.create_run(first, {"measure": config.to_dict()}, command="stopped")
        session = store.start_session(run_id, MACHINE)
        for m in SyntheticExecutor(5, 0.02).run(first, None):  # the first round stored, then the stop
            store.add_cell(run_id, session, m)
        run = orchestrate.Run.resume(store, run_id, lambda: MACHINE, SyntheticExecutor(5, 0.02))
        assert run.specs == []  # nothing missing from the plan: the screening and the looks are what is left
        run.measure()
        found = rows(store, run_id)
    assert len(found) >= 2 + 2 * 3
    (v,) = vd.verdicts(found)
    assert v["processes"] >= 3 and v["verdict"] in vd.DECIDED, v["reason"]
    with Store(db) as store, pytest.raises(SpecError, match="no verdict a look could still decide: nothing to resume"):
        orchestrate.Run.resume(store, run_id, lambda: MACHINE, SyntheticExecutor(5, 0.02))


def test_every_command_printed_names_a_db_with_a_space_so_that_it_pastes_whole(tmp_path):
    """Issue 88: the commands a verdict prints (its details, the resume of an open row) named --db
    unquoted: a path with a space, pasted, ran on another database. Each is quoted for the shell
    (commands.db_flag), and splits back to the path."""
    import shlex

    from stackwars import commands, orchestrate
    from stackwars.records import CellSpec

    assert commands.db_flag(None) == "" and commands.db_flag("r.db") == " --db r.db"
    config = MeasureConfig(processes=3, max_processes=3)
    specs = [CellSpec("gemm", "small", "forward", b, repeat=r) for r in range(3) for b in ("torch-eager", "jax-jit")]
    db = tmp_path / "my results" / "it's.db"
    db.parent.mkdir()
    with Store(db) as store:
        run_id = store.create_run(specs, {"measure": config.to_dict()}, command="space")
        orchestrate.Run(store, run_id, specs, config, MACHINE, SyntheticExecutor(7, 0.4)).measure()
    out = runner.invoke(app, ["verdict", "--db", str(db)], env={"COLUMNS": "300"}).output
    (line,) = [ln for ln in out.splitlines() if "stackwars verdict" in ln and "--explain" in ln]
    words = shlex.split(line[line.index("stackwars verdict"):])
    assert words[words.index("--db") + 1] == str(db), line
