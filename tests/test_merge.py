"""stackwars merge: runs from other databases (other machines) into one, each keeping its
machine; a run measured in two places comes together; nothing duplicated, merging twice adds
nothing; a run id that names two different runs is refused with the target unchanged."""

import hashlib
from typer.testing import CliRunner

from stackwars.cli import app
from stackwars.store.results import Store, rows
from tests.factories import measurement

runner = CliRunner()


def _db(path, machine, backends, run_id=None):
    with Store(path) as store:
        plan = [measurement(b).spec for b in ("torch-eager", "jax-jit")]
        rid = run_id or store.create_run(plan, {"measure": {}}, kind="cells", command="stackwars run gemm")
        session = store.start_session(rid, {"cpu_model": machine, "cpu_count_logical": 2, "versions": {}})
        for b in backends:
            store.add_cell(rid, session, measurement(b))
        store.add_study_rows(rid, session, "recompile", "as-is", [{"call_index": 0, "machine": machine}])
        store.add_peak("cpu:" + machine, "float32", "highest", 1e11, 1e10, {"machine": machine}, {"cpu_model": machine})
    return rid


def _counts(path):
    s = Store(path, create=False)
    return {t: s.conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
            for t in ("runs", "sessions", "cells", "study_rows", "peaks")}


def test_runs_from_two_machines_merge_into_one_database_each_keeping_its_machine(tmp_path):
    a, b, into = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "all.db"
    run_a = _db(a, "Intel Xeon", ["torch-eager", "jax-jit"])
    run_b = _db(b, "AMD EPYC", ["torch-eager", "jax-jit"])
    r = runner.invoke(app, ["merge", str(a), str(b), "--db", str(into)])
    assert r.exit_code == 0, r.output
    assert _counts(into) == {"runs": 2, "sessions": 2, "cells": 4, "study_rows": 2, "peaks": 2}
    machines = {row["run_id"]: row["machine"] for row in rows(Store(into, create=False))}
    assert "Intel Xeon" in machines[run_a] and "AMD EPYC" in machines[run_b]
    # merging again adds nothing
    r = runner.invoke(app, ["merge", str(a), str(b), "--db", str(into)])
    assert r.exit_code == 0 and "added 0 runs, 0 sessions, 0 cells, 0 study rows, 0 peaks" in " ".join(r.output.split())
    assert _counts(into) == {"runs": 2, "sessions": 2, "cells": 4, "study_rows": 2, "peaks": 2}


def test_one_run_measured_in_two_places_comes_together_without_a_duplicate(tmp_path):
    """A run resumed on another node: each database holds the run and some of its cells."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    run_id = _db(a, "node 1", ["torch-eager"])
    run_row = Store(a, create=False).conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    with Store(b) as store:  # the same run (id, command, configuration) on a second node
        store.conn.execute("INSERT INTO runs (run_id, created_at, kind, command, config_json) VALUES (?,?,?,?,?)",
                           tuple(run_row))
    _db(b, "node 2", ["jax-jit"], run_id=run_id)
    r = runner.invoke(app, ["merge", str(b), "--db", str(a)])
    assert r.exit_code == 0, r.output
    cells = Store(a, create=False).cells(run_id)
    assert sorted(m.spec.backend for _, m in cells) == ["jax-jit", "torch-eager"]
    assert _counts(a)["sessions"] == 2


def test_two_copies_of_a_run_that_measured_one_key_otherwise_keep_one_record_and_the_other_apart(tmp_path):
    """Issue 64: a run copied and resumed in two places measured the same cells in both; merged, each
    key keeps one record (the one already here), the other copy's is kept apart as a merge conflict
    that no table or verdict reads, and the merge and `show` say so."""
    import dataclasses

    a, b = tmp_path / "a.db", tmp_path / "b.db"
    run_id = _db(a, "node 1", ["torch-eager", "jax-jit"])
    run_row = Store(a, create=False).conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    with Store(b) as store:
        store.conn.execute("INSERT INTO runs (run_id, created_at, kind, command, config_json) VALUES (?,?,?,?,?)",
                           tuple(run_row))
        session = store.start_session(run_id, {"cpu_model": "node 1", "cpu_count_logical": 2, "versions": {}})
        for backend in ("torch-eager", "jax-jit"):  # the same keys, other numbers
            m = measurement(backend)
            store.add_cell(run_id, session, dataclasses.replace(m, samples=tuple(2 * x for x in m.samples)))
    r = runner.invoke(app, ["merge", str(b), "--db", str(a)])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "added 0 runs, 1 sessions, 0 cells" in text and "2 cell(s) of a run here were measured otherwise" in text
    found = rows(Store(a, create=False), run_id)
    assert sorted(row["backend"] for row in found) == ["jax-jit", "torch-eager"]
    assert all(row["steady_median_s"] < 1.5e-3 for row in found)  # the records already here, once each
    shown = runner.invoke(app, ["show", run_id, "--db", str(a)], env={"COLUMNS": "250"})
    assert "2 cell(s) a merge kept apart" in " ".join(shown.output.split()), shown.output
    before = _counts(a)
    again = runner.invoke(app, ["merge", str(b), "--db", str(a)])  # merging again adds nothing, kept apart or not
    assert again.exit_code == 0 and "measured otherwise" not in " ".join(again.output.split())
    assert _counts(a) == before


def test_a_run_id_naming_two_different_runs_is_refused_and_nothing_is_written(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    run_id = _db(a, "node 1", ["torch-eager"])
    with Store(b) as store:
        store.conn.execute("INSERT INTO runs (run_id, created_at, kind, command, config_json) VALUES (?,?,?,?,?)",
                           (run_id, "2026-01-01", "cells", "stackwars run ffn", "{}"))
    before = hashlib.sha256(a.read_bytes()).hexdigest()
    r = runner.invoke(app, ["merge", str(b), "--db", str(a)])
    assert r.exit_code == 2
    assert f"run {run_id} is in {b} and in this database but is not the same run" in " ".join(r.output.split())
    assert hashlib.sha256(a.read_bytes()).hexdigest() == before


def test_merge_refuses_a_source_that_is_the_target_or_missing(tmp_path):
    a = tmp_path / "a.db"
    _db(a, "node 1", ["torch-eager"])
    r = runner.invoke(app, ["merge", str(a), "--db", str(a)])
    assert r.exit_code == 2 and "is the database merged into" in " ".join(r.output.split())
    r = runner.invoke(app, ["merge", str(tmp_path / "nope.db"), "--db", str(a)])
    assert r.exit_code == 2 and "no results database at" in " ".join(r.output.split())
    r = runner.invoke(app, ["merge", str(a), str(a), "--db", str(tmp_path / "b.db")])
    assert r.exit_code == 2 and "source" in r.output and "given twice" in r.output
    assert not (tmp_path / "b.db").exists()
