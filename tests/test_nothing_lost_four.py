"""Nothing lost, round four (issue 64): each class the hostile sweep found, refused or kept in one
place, a case a class. Every case asserts its exit status, one `error:` line (or the data kept),
no traceback, and the files it must not touch byte for byte. The rounds a verdict reads are cells
of their run (stackwars/verdict), so a stopped run's rounds are kept and resumed like any cell:
test_a_run_stopped_during_its_rounds_resumes_them_once_and_reads_the_same_verdict."""

from __future__ import annotations

import dataclasses
import functools
import os
import sqlite3
import time

import pytest
from typer.testing import CliRunner

from stackwars.cli import app
from stackwars.report import format as fmt
from stackwars import verdict as vd
from stackwars.report import verdict as view
from stackwars.store.results import Store, rows
from tests.factories import FakeExecutor, measurement
from tests.test_bad_input import _snapshot, refused_before_the_probe

runner = CliRunner()


def _damaged(version=None, drop=None):
    def make(work):
        with Store(work / "d.db"):
            pass
        conn = sqlite3.connect(work / "d.db")
        if version is not None:
            conn.execute("DELETE FROM schema_version")
            conn.execute("INSERT INTO schema_version VALUES (?, 'by hand')", (version,))
        if drop:
            conn.execute(f"DROP TABLE {drop}")
        conn.commit()
        conn.close()
        return {"DB": str(work / "d.db")}
    return make


def _loop(work):
    os.symlink(work / "b.db", work / "a.db")
    os.symlink(work / "a.db", work / "b.db")
    return {"DB": str(work / "a.db")}


def _fifo_state(work):
    (work / "out").mkdir()
    os.mkfifo(work / "out" / "reproduce-state.json")
    return {"OUT": str(work / "out")}


def _busy_pairs(work):
    """A run whose only back-to-back pair (processes 2 and 3) has a busy member."""
    from tests.test_verdict import _cell, _store

    _store(work / "aa.db", [_cell("jax-jit", 1.0, p, contended=p == 2) for p in range(3)])
    return {"DB": str(work / "aa.db")}


LONG = "x" * 300
CASES = [
    # (id, arguments, environment, setup, message): exit 2, the message, nothing written
    ("a database that links to itself", ["runs", "--db", "{DB}"], {}, _loop, "its links loop"),
    ("a --json name over 255 bytes", ["run", "gemm", "--json", f"{{TMP}}/{LONG}.json"], {}, None,
     "more than the 255 a file name may have"),
    ("an --out name over 255 bytes", ["report", "--out", f"{{TMP}}/{LONG}"], {}, None,
     "more than the 255 a file name may have"),
    ("a --profile-dir that is not UTF-8", ["run", "gemm", "--profile", "1", "--profile-dir", "{TMP}/\udcff"], {},
     None, "the name is not valid UTF-8"),
    ("a schema version no stackwars writes", ["runs", "--db", "{DB}"], {}, _damaged(version=-7),
     "is damaged: its schema_version table holds version -7"),
    ("a dropped cells table", ["run", "gemm", "--db", "{DB}"], {}, _damaged(drop="cells"),
     "lacks the table(s) cells"),
    ("--repeat and --processes together", ["run", "gemm", "--repeat", "2", "--processes", "1"], {}, None,
     "--repeat and --processes given 2 times: --processes and --repeat name one setting; give it once"),
    ("--screen and --no-screen together", ["run", "gemm", "--screen", "--no-screen"], {}, None,
     "--screen and --no-screen given 2 times"),
    ("a sweep value that follows itself", ["study", "recompile", "gemm", "--vary", "m=16,16", "-p", "tiny"], {}, None,
     "16 follows itself"),
    ("a FIFO where the reproduction's state is", ["reproduce", "--out", "{OUT}", "--dry-run"], {}, _fifo_state,
     "is not a regular file"),
    ("--min-block-time past the cell's limit", ["run", "gemm", "--min-block-time", "30", "--timeout", "100"], {},
     None, "not shorter than the per-cell timeout (100 s)"),
    # issue 88: an A/A check that would measure no pair said nothing
    ("--aa with --no-screen", ["run", "gemm", "--aa", "--no-screen"], {}, None,
     "(leave out --no-screen, given); with neither it would measure no pair"),
    ("--aa with --processes 1", ["run", "gemm", "--aa", "--processes", "1"], {}, None,
     "--processes 2 or more (got 1)"),
    # issue 88: verdict --aa never said how many pairs it found or why they did not count
    ("verdict --aa with no pair that counts", ["verdict", "--aa", "--db", "{DB}"], {}, _busy_pairs,
     "1 back-to-back pair(s) measured in 1 cell(s), 0 counted (left out: 1 busy)"),
    # issue 88: a user's text was printed as markup (an emoji, a bracketed word lost), a --db name over 255
    # bytes was a traceback
    ("a user's path printed as text", ["runs", "--db", "{TMP}/x:smile:y[slurm].db"], {}, None,
     "x:smile:y[slurm].db"),
    ("a --db name over 255 bytes", ["runs", "--db", f"{{TMP}}/{LONG}.db"], {}, None,
     "more than the 255 a file name may have"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_class_of_bad_input_is_refused_in_one_place(case, tmp_path, monkeypatch):
    name, args, env, setup, message = case
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("STACKWARS_DB", str(work / "default.db"))
    values = {"TMP": str(work), **(setup(work) if setup else {})}
    before = _snapshot(work) if not any(p.is_fifo() or p.is_symlink() for p in work.rglob("*")) else None
    t0 = time.monotonic()
    with refused_before_the_probe(name):
        result = runner.invoke(app, [a.format(**values) for a in args], env=env)
    text = " ".join(result.output.split())
    assert result.exit_code == 2, (name, result.exit_code, result.output)
    assert message in text and text.count("error:") == 1, (name, text)
    assert "Traceback" not in result.output
    if before is not None:
        assert _snapshot(work) == before, name
    assert time.monotonic() - t0 < 60


def test_columns_0_prints_the_tables_all_the_same(tmp_path):
    """COLUMNS=0 printed nothing and exited 0: a width no table fits is set aside."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "stackwars", "list"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "0"})
    assert done.returncode == 0 and "gemm" in done.stdout and "presets" in done.stdout, done


def test_a_bad_xla_flags_is_bad_input_not_a_missing_jax(tmp_path):
    """XLA aborts its process on a flag it does not know: that was stored as "unsupported: jax is not
    installed"; it is refused, naming the flag, before anything is written."""
    import subprocess
    import sys

    db = tmp_path / "x.db"
    done = subprocess.run([sys.executable, "-m", "stackwars", "run", "gemm", "-p", "tiny", "-b", "jax-jit",
                           "--processes", "1", "--db", str(db)], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "XLA_FLAGS": "--xla_no_such_flag=1", "STACKWARS_PROBE_CACHE": "0"})
    stderr = " ".join(done.stderr.split())
    assert done.returncode == 2 and "Unknown flag in XLA_FLAGS: --xla_no_such_flag=1" in stderr, done.stderr
    assert not db.exists() and "Traceback" not in done.stderr


def test_a_failed_analysis_path_makes_no_phantom_row_keeps_its_diagnostic_and_fails_nothing(tmp_path):
    """An errored torch-mlir-xla cell records no matmul precision: it made a third verdict row that
    claimed "no JAX backend: none measured". Its run's precision is its own; its message keeps the
    line naming the operator; and an analysis path's failure is said, not the run's exit status."""
    error = ("RuntimeError: torch-mlir lowering failed with the following diagnostics:\n"
             "error: failed to legalize operation 'torch.aten.fancy_op'\n  at model.py:3\n")
    cells = []
    for r in range(3):
        for backend in ("torch-eager", "jax-jit"):
            m = measurement(backend)
            cells.append(dataclasses.replace(m, spec=dataclasses.replace(m.spec, repeat=r)))
    cells.append(measurement("torch-mlir-xla", status="error", samples=(), error=error, framework="torch"))
    with Store(tmp_path / "p.db") as store:
        run_id = store.create_run([m.spec for m in cells], {"measure": {"matmul_precision": "float32"}},
                                  command="stackwars run gemm")
        session = store.start_session(run_id, {"cpu_model": "Test CPU", "cpu_count_logical": 2})
        for m in cells:
            store.add_cell(run_id, session, m)
        found = rows(store, run_id)
    assert len(vd.verdicts(found)) == 1  # one table, one row: the failed cell is in it, shown as failed
    assert fmt.error_line(error) == ("RuntimeError: torch-mlir lowering failed with the following diagnostics: "
                                     "error: failed to legalize operation 'torch.aten.fancy_op'")
    from stackwars.cli.run_cmd import _show

    with pytest.raises(SystemExit) as code:
        _show(found, {"cpu_model": "Test CPU"}, [], [], run_id, None, None, "resume")
        raise SystemExit(0)
    assert code.value.code == 0  # the analysis path's error fails nothing


SPEED = {"torch-eager": 1.0, "torch-compile": 1.05, "jax-jit": 1.0}


class Synthetic(FakeExecutor):
    """An executor whose every process draws its own samples (seed, backend, process number): a
    resume redraws none. ``after``: how many processes it measures before Ctrl-C."""

    def __init__(self, after=None, between=0.2, in_the_gap=False):
        self.after, self.done, self.between, self.in_the_gap = after, 0, between, in_the_gap

    def run(self, specs, measure, on_start=None):
        import numpy as np

        from stackwars.records import Parity
        from tests.test_verdict import _processes

        for spec in specs:
            if self.after is not None and self.done >= self.after:
                raise KeyboardInterrupt
            rng = np.random.default_rng([3, list(SPEED).index(spec.backend), spec.repeat])
            samples = _processes(rng, 1e-3 * SPEED[spec.backend], 1, samples=20, between=self.between)[0]
            self.done += 1
            m = measurement(spec.backend, samples=tuple(samples))
            yield dataclasses.replace(m, spec=spec, parity=Parity(max_rel_err=1e-7, tolerance=2e-4), wall_s=1.0)
        if self.in_the_gap and self.after is not None and self.done >= self.after:
            # Ctrl-C after a batch's last process is stored and before the run decides what comes next (the
            # screening, a look): nothing planned is missing, and the resume must still go on (issue 88)
            raise KeyboardInterrupt


BETWEEN = 0.05  # the rounds run's spread between processes: its looks go on past the first (0.2 stopped it as futile)


def _rounds_run(db, stops=(), full_from=None, in_the_gap=False, model=None):
    """The run of tests below through orchestrate.Run: each of ``stops`` is a session stopped by
    Ctrl-C after that many processes, then resumed as ``--resume`` resumes (the pending file
    stored, the plan's missing cells measured, then the looks); ``full_from``: the disk is full
    for every process of a round (repeat >= 1) from that many stored on, in the first session.
    ``model``: a user's model file's name (``path:NAME``) measured instead of gemm, kept with the run
    (runner.model_files) and restored at each resume as ``--resume`` restores it (runner.restore_models).
    Returns the stored rows and what each session left (stored, missing, pending)."""
    from stackwars import discovery, orchestrate, registry, runner
    from stackwars.records import CellSpec, MeasureConfig
    from stackwars.store.results import StoreWriteError, pending_paths, store_pending
    from tests.test_verdict import MACHINE

    config = MeasureConfig(processes=3, max_processes=6)
    name, preset = (registry.resolve_workload(model), "tiny") if model else ("gemm", "small")
    first = [CellSpec(name, preset, "forward", b) for b in ("torch-eager", "torch-compile", "jax-jit")]
    add_cell, left = Store.add_cell, []
    stored_rounds = [0]

    def full(self, run_id, session, m):
        if m.spec.repeat >= 1:
            if stored_rounds[0] >= full_from:
                raise StoreWriteError(self.path, "a cell", sqlite3.OperationalError("database or disk is full"))
            stored_rounds[0] += 1
        return add_cell(self, run_id, session, m)

    with Store(db) as store:
        run_id = store.create_run(first, {"measure": config.to_dict(),
                                          **({"models": runner.model_files(first)} if model else {})},
                                  command="rounds")
        specs = first
        for i in range(len(stops) + 1 + (full_from is not None)):
            if i:  # as Run._resume: its model files restored, the pending cells, then what the plan still lacks
                if model:  # a new process: the model known only from what the run kept
                    origin = registry.origin("workload", name)
                    registry.forget_origin(origin)
                    discovery._files.pop(str(runner._model_file(origin)[0]), None)
                    assert registry.registered_workload(name) is None
                runner.restore_models(store, store.run(run_id))
                assert not model or registry.registered_workload(name) is not None
                store_pending(store, run_id, store.start_session(run_id, MACHINE))
                specs = store.missing(run_id)
            after = stops[i] if i < len(stops) else None
            if full_from is not None and i == 0:
                Store.add_cell = full
            try:
                unsaved = orchestrate.Run(store, run_id, specs, config, MACHINE,
                                          Synthetic(after, BETWEEN, in_the_gap and i == 0)).measure()
            except KeyboardInterrupt:
                unsaved = None
            finally:
                Store.add_cell = add_cell
            pending = sum(1 for p in pending_paths(db, run_id) if p.is_file() for _ in p.open())
            # and whether `--resume` would go on (Run._resume refuses a run with nothing missing, nothing pending
            # and no verdict a look could still decide)
            goes_on = bool(store.missing(run_id)) or pending > 0 or orchestrate._more_to_decide(store, run_id, config)
            left.append((len(rows(store, run_id)), len(store.missing(run_id)), pending, unsaved, goes_on))
        return rows(store, run_id), left


def _same_verdicts(got, whole):
    strip = lambda v: {k: v[k] for k in ("best_torch", "best_jax", "verdict", "processes", "ratio")}  # noqa: E731
    keys = [r["cell_key"] for r in got]
    assert len(keys) == len(set(keys)), keys  # each key once
    assert sorted(keys) == sorted(r["cell_key"] for r in whole)  # every planned process, none more
    assert [strip(v) for v in vd.verdicts(got)] == [strip(v) for v in vd.verdicts(whole)]


@pytest.mark.parametrize("kind", ["built-in", "a user's model"])
def test_a_run_stopped_during_its_rounds_at_any_point_resumes_them_once_and_reads_the_same_verdict(kind, tmp_path):
    """Issue 64: the rounds that decide are cells of their run. A run stopped by Ctrl-C after any
    number of its processes (first processes, the screening, the rounds, the top-ups), and one
    stopped twice, keeps what it measured, and the resume measures the rest of the plan, its looks
    included, each key once, ending with every process and the verdict rows an unstopped run has.
    Issue 88: for a built-in workload and for a user's model file (restored at each resume)."""
    from tests.test_user_model import TWINS

    model = None
    if kind != "built-in":
        (tmp_path / "twins.py").write_text(TWINS.format(out=4, extra="", call="self.fc(x)"))
        model = f"{tmp_path / 'twins.py'}:net"
    _rounds = functools.partial(_rounds_run, model=model)
    whole, _ = _rounds(tmp_path / "whole.db")
    n = len(whole)
    assert n > 9 and any(r["repeat"] >= 3 for r in whole)  # a screening, the rounds and a top-up were run
    for after in range(1, n):
        got, left = _rounds(tmp_path / f"stopped-{after}.db", stops=(after,))
        assert left[0][0] == after and left[0][3] is None, (after, left)  # what it measured is kept
        _same_verdicts(got, whole)
    for stops in ((2, 1), (4, 3), (n - 4, 1)):  # stopped again while resuming
        got, _ = _rounds(tmp_path / f"twice-{stops[0]}-{stops[1]}.db", stops=stops)
        _same_verdicts(got, whole)
    # and in the gap: after a batch's last process, before the decision that plans the next (the screening,
    # a look); the sweep of issue 88 found such a stop unresumable ("nothing to resume", 2 of 6 stored)
    gaps = 0
    for after in range(1, n):
        got, left = _rounds(tmp_path / f"gap-{after}.db", stops=(after,), in_the_gap=True)
        assert left[0][0] == after, (after, left)
        gaps += left[0][1] == 0  # stopped with nothing of the plan missing: the next decision not yet made
        assert left[0][4], (after, left)  # and `--resume` goes on from there, not "nothing to resume"
        _same_verdicts(got, whole)
    assert gaps >= 2, gaps  # the screening's gap and a look's at least


@pytest.mark.parametrize("full_from", [0, 2, 5])
def test_a_disk_that_fills_during_the_rounds_keeps_what_they_measured_and_the_resume_stores_it(full_from, tmp_path):
    """Issue 64: the disk fills during the pairing phase (every round's process refused by the database
    from the ``full_from``-th on): the run stops with those processes kept in its pending file, and the
    resume stores them, measures the rest and reads the verdict an unstopped run reads."""
    whole, _ = _rounds_run(tmp_path / "whole.db")
    got, left = _rounds_run(tmp_path / "full.db", full_from=full_from)
    stored, missing, pending, unsaved, _ = left[0]
    assert unsaved and pending == len(unsaved) and missing >= pending  # kept beside the database, not lost
    assert all(m.spec.repeat >= 1 for m, _, _ in unsaved)
    assert left[1][2] == 0  # the resume stored the pending file's processes and removed it
    _same_verdicts(got, whole)


def test_a_row_that_cannot_say_reads_alike_everywhere_and_names_every_stuck_side(tmp_path):
    """Issue 65: the narrow terminal said "cannot say" where the table and Markdown said "cannot say
    (busy machine)", and a row stuck on both sides blamed PyTorch's alone, its parity "unchecked"
    though every cell passed it; the forest plot of rows with nothing to draw said "CI ... at , the
    level"."""
    from tests.test_verdict import _cell, _store

    cells = [_cell(b, 1.0, p, contended=True) for p in range(3) for b in ("torch-eager", "jax-jit")]
    _, found = _store(tmp_path / "busy.db", cells)
    (v,) = vd.verdicts(found)
    assert v["verdict"] == "cannot say" and v["reason_tag"] == "busy machine"
    narrow, wide = view.to_text([v], width=100), view.to_text([v], width=250)
    assert "cannot say (busy machine)" in " ".join(narrow.split()) and "cannot say (busy machine)" in wide
    assert "no more processes: PyTorch's and JAX's sides cannot get the clean ones they need" in v["reason"]
    # its cells ran and passed parity while busy: the row says so, not "unchecked" (issue 65)
    parity = view.cells(v)[view.COLUMNS.index("parity (PyTorch / JAX)")]
    assert "unchecked" not in parity and parity.startswith("torch-eager ") and " / jax-jit " in parity, parity
    assert parity.count("✓") == 2
    png = view.forest_png([v])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_report_of_a_users_models_alone_has_no_published_studies_section(tmp_path):
    """Issue 65: a user-model report carried the published studies' section, about nothing it holds."""
    from stackwars.report import build

    data = {"cells": [{"workload": "my-own-net"}], "studies": {}}
    assert not build._answers_published(data)
    assert build._answers_published({"cells": [{"workload": "gemm"}], "studies": {}})


def test_export_gives_every_screening_decision_and_the_cells_say_which_were_set_aside(tmp_path):
    """Issue 64, point 8: a run's screening decisions are not cells. `show` and the cells' rows (export,
    report) say which were set aside and why (``screened_out``); `export --screening` writes every
    decision, the cells that went on included, with why."""
    import json

    db = tmp_path / "r.db"
    _rounds_run(db)
    run_id = Store(db).run_ids()[0]
    with Store(db) as store:
        decided = store.study_rows(run_id, "screening")
    aside = [d for d in decided if not d["keep"]]
    assert len(decided) == 3 and len(aside) == 1  # torch-eager, not chosen after its first process
    r = CliRunner().invoke(app, ["show", run_id, "--db", str(db)], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "Screened out after one process" in r.output and "not chosen:" in r.output, r.output
    r = CliRunner().invoke(app, ["export", "--run", run_id, "-f", "json", "--db", str(db)])
    cells = json.loads(r.stdout)
    assert {c["screened_out"] for c in cells if c["cell_key"].startswith(aside[0]["cell"])} == {aside[0]["why"]}
    assert all(c["screened_out"] is None for c in cells if not c["cell_key"].startswith(aside[0]["cell"]))
    r = CliRunner().invoke(app, ["export", "--run", run_id, "--screening", "-f", "json", "--db", str(db)])
    got = json.loads(r.stdout)
    assert [(d["cell"], d["keep"], d["why"]) for d in got] == [(d["cell"], d["keep"], d["why"]) for d in decided]
    assert any("best" in d["why"] for d in got if d["keep"])  # why each cell went on, which no cell row says
    r = CliRunner().invoke(app, ["export", "--screening", "--db", str(db)])
    assert r.exit_code == 2 and "give it with --run RUN" in " ".join(r.output.split())


def test_the_progress_total_grows_with_the_plan_and_ends_at_what_was_measured(tmp_path):
    """Issue 65: the live line read "19/12": the screening took the planned rounds off a total that
    held the first processes alone. The total starts at the session's cell-processes and grows by
    what each look plans (Hooks.on_more); it ends where the count of those measured does."""
    from stackwars import orchestrate
    from stackwars.records import CellSpec, MeasureConfig
    from tests.test_verdict import MACHINE

    config = MeasureConfig(processes=3, max_processes=6)
    first = [CellSpec("gemm", "small", "forward", b) for b in ("torch-eager", "torch-compile", "jax-jit")]
    seen = {"total": len(first), "done": 0, "worst": 0}

    def done(m):
        seen["done"] += 1
        seen["worst"] = max(seen["worst"], seen["done"] - seen["total"])

    def more(n):
        assert n > 0
        seen["total"] += n

    with Store(tmp_path / "r.db") as store:
        run_id = store.create_run(first, {"measure": config.to_dict()}, command="rounds")
        orchestrate.Run(store, run_id, first, config, MACHINE, Synthetic()).measure(
            orchestrate.Hooks(on_done=done, on_more=more))
        measured = len(rows(store, run_id))
    assert seen["done"] == seen["total"] == measured > len(first) and seen["worst"] <= 0, seen


def test_a_damaged_screening_decision_is_named_and_skipped_by_every_reader(tmp_path):
    """Issue 64, point 3 (every row kind read through one validating reader): a screening decision
    without its cell gave a KeyError in `show`, `export` and `report`, and one whose keep is not true
    or false was read as kept. Each reader skips them with a warning naming each; the good
    decisions are kept."""
    import json

    db = tmp_path / "r.db"
    _rounds_run(db)
    run_id = Store(db).run_ids()[0]
    with Store(db) as store:  # two decisions written by hand beside the run's own three
        session = store.start_session(run_id, {})
        store.add_study_rows(run_id, session, "screening", "by hand", [{"keep": False, "why": "no cell"},
                                                                      {"cell": "gemm/x", "keep": "yes", "why": "?"}])
    for args in (["show", run_id], ["export", "--run", run_id], ["export", "--run", run_id, "--screening"],
                 ["verdict", run_id], ["report", run_id, "--out", str(tmp_path / "rep")]):
        r = CliRunner().invoke(app, [*args, "--db", str(db)], env={"COLUMNS": "200"})
        assert r.exit_code == 0 and r.exception is None or isinstance(r.exception, SystemExit), (args, r.output)
        assert "Traceback" not in r.output and "KeyError" not in r.output, (args, r.output)
        assert r.stderr.count("a screening decision without a cell, a keep or a why") == 2, (args, r.stderr)
    r = CliRunner().invoke(app, ["export", "--run", run_id, "--screening", "-f", "json", "--db", str(db)])
    assert len(json.loads(r.stdout)) == 3  # the run's own decisions, whole


def _seq(width: int = 16) -> str:
    """test_user_model's PyTorch-only Sequential under its own name, its hidden layer ``width`` wide."""
    from tests.test_user_model import SEQUENTIAL

    return SEQUENTIAL.replace('"seq"', '"seq-resumed"').replace("Linear(size.features, 16)", f"Linear(size.features, {width})") \
        .replace("Linear(16, 4)", f"Linear({width}, 4)")


def test_a_users_models_run_stopped_resumes_from_its_file_and_refuses_the_file_changed(tmp_path):
    """Issue 88: a run of a model file, stopped with processes of its plan missing, resumes in a new
    process that never named the file (the run keeps it, with its contents' sha256); the same
    stop, the file edited before the resume, is refused naming the file, nothing measured."""
    import subprocess
    import sys

    (tmp_path / "mine.py").write_text(_seq())
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "STACKWARS_PLUGINS")}
    cli = [sys.executable, "-m", "stackwars"]

    def stopped(db):  # a run whose plan holds more than it measured, as a stop leaves it (deterministic, unlike
        # a Ctrl-C timed against a loaded machine, where the run could finish first)
        done = subprocess.run([*cli, "run", "mine.py:net", "-p", "tiny", "-b", "torch-eager", "--phase", "forward",
                               "--processes", "1", "--min-time", "0", "--db", str(db)],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        with Store(db) as store:
            (run_id,) = store.run_ids()
            store.extend_plan(run_id, [s.__class__(**{**s.to_dict(), "repeat": i}) for s in store.run(run_id).plan
                                       for i in (1, 2)])
            assert len(store.cells(run_id)) == 1 and len(store.missing(run_id)) == 2
        return run_id

    run_id = stopped(tmp_path / "a.db")
    elsewhere = tmp_path / "elsewhere"  # not beside the file, and nothing names it
    elsewhere.mkdir()
    done = subprocess.run([*cli, "run", "--resume", run_id, "--db", str(tmp_path / "a.db")], cwd=elsewhere,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(Store(tmp_path / "a.db").cells(run_id)) == 3

    run_id = stopped(tmp_path / "b.db")
    (tmp_path / "mine.py").write_text(_seq(64))
    before = (tmp_path / "b.db").read_bytes()
    done = subprocess.run([*cli, "run", "--resume", run_id, "--db", str(tmp_path / "b.db")], cwd=elsewhere,
                          env=env, capture_output=True, text=True, timeout=300)
    text = " ".join(done.stderr.split())
    assert done.returncode == 2, done.stderr[-3000:]
    assert f"measured model 'seq-resumed' from {tmp_path / 'mine.py'}, which has changed since" in text, text
    assert "Traceback" not in done.stderr and (tmp_path / "b.db").read_bytes() == before
