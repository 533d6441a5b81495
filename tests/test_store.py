import json
import os
from pathlib import Path
import sqlite3

import pytest

from stackwars import load_results
from stackwars.errors import SpecError, StackwarsError
from stackwars.records import ROW_KEYS, MeasureConfig
from stackwars.store import db
from stackwars.store.results import Store

from tests.factories import measurement


def _run(store, ms):
    run_id = store.create_run([m.spec for m in ms], {"measure": MeasureConfig().to_dict()}, command="test")
    session = store.start_session(run_id, {"cpu_model": "test"})
    return run_id, session


def test_round_trip_keeps_every_sample(tmp_path):
    ms = [measurement("torch-eager"), measurement("jax-jit", samples=(2e-3, 2.5e-3)),
          measurement("jax-eager", status="oom", samples=(), error="worker RSS exceeded")]
    with Store(tmp_path / "r.db") as store:
        run_id, session = _run(store, ms)
        for m in ms:
            store.add_cell(run_id, session, m)
        back = [m for _, m in store.cells(run_id)]
    assert back == ms  # dataclass equality: nothing lost, nothing invented
    assert back[1].samples == (2e-3, 2.5e-3)


def test_append_only(tmp_path):
    with Store(tmp_path / "r.db") as store:
        run_id, session = _run(store, [measurement()])
        store.add_cell(run_id, session, measurement())
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            store.conn.execute("UPDATE cells SET status = 'ok'")
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            store.conn.execute("DELETE FROM runs")


def test_schema_version_and_refusal_of_newer(tmp_path):
    path = tmp_path / "r.db"
    with Store(path) as store:
        assert db.version(store.conn) == db.LATEST
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, 'future')", (db.LATEST + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(StackwarsError, match="newer"):
        Store(path)


def test_migration_from_an_empty_file(tmp_path):
    path = tmp_path / "old.db"
    sqlite3.connect(path).close()
    with Store(path) as store:
        assert db.version(store.conn) == db.LATEST
        tables = {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "run_plan", "sessions", "cells", "peaks", "schema_version"} <= tables


def test_missing_cells_for_resume(tmp_path):
    ms = [measurement(b) for b in ("torch-eager", "torch-compile", "jax-jit")]
    with Store(tmp_path / "r.db") as store:
        run_id, session = _run(store, ms)
        store.add_cell(run_id, session, ms[1])
        assert [s.backend for s in store.missing(run_id)] == ["torch-eager", "jax-jit"]
        assert store.latest_run_id() == run_id
        with pytest.raises(SpecError, match="no run"):
            store.run("nope")


def test_load_results_dataframe_has_the_required_columns(tmp_path):
    path = tmp_path / "r.db"
    with Store(path) as store:
        run_id, session = _run(store, [measurement()])
        store.add_cell(run_id, session, measurement())
    df = load_results(path)
    assert set(ROW_KEYS) <= set(df.columns)
    row = df.iloc[0]
    assert row["steady_median_s"] == pytest.approx(1.025e-3)
    assert row["achieved_flops_per_s"] == pytest.approx(2 * 1024**3 / 1.025e-3)
    # roofline: floor = max(flops / 4e12, bytes / 1e11) over the median
    assert row["roofline_fraction"] == pytest.approx(max(2 * 1024**3 / 4e12, 12 * 1024**2 / 1e11) / 1.025e-3)


def test_missing_values_are_null_not_invented():
    row = measurement(status="timeout", samples=(), error="no result").to_row()
    for key in ("first_call_s", "second_call_s", "steady_median_s", "steady_iqr_s", "compile_s",
                "peak_memory_bytes", "parity_max_rel_err"):
        assert row[key] is None
    assert row["steady_samples"] == []
    json.dumps(row)  # serialisable as is


def test_load_results_on_missing_db_is_a_clear_error(tmp_path):
    with pytest.raises(SpecError, match="no results database"):
        load_results(tmp_path / "absent.db")


def test_peaks_latest(tmp_path):
    with Store(tmp_path / "r.db") as store:
        store.add_peak("cpu:x:2t", "float32", "float32", 1e11, 1e10, {}, {})
        store.add_peak("cpu:x:2t", "float32", "float32", 2e11, 2e10, {}, {})
        p = store.latest_peak("cpu:x:2t", "float32", "float32")
        assert p["flops_per_s"] == 2e11
        assert store.latest_peak("cpu:x:2t", "bfloat16", "float32") is None


def _open_and_write(path: str, start_at: float) -> str:
    import time

    from stackwars.store.results import Store
    while time.time() < start_at:  # all processes hit the new file together
        pass
    with Store(path) as store:
        run_id = store.create_run([], {"who": "many"}, kind="cells")
        store.start_session(run_id, {})
    return run_id


def test_many_processes_create_one_new_database_at_once(tmp_path):
    """Schema creation is one immediate transaction, retried while another process holds
    the lock: every opener succeeds and each migration is applied exactly once (before,
    15 of 20 concurrent opens failed with 'table runs already exists' or 'database is
    locked')."""
    import multiprocessing
    import sqlite3
    import time

    from stackwars.store import db as dbmod

    path = str(tmp_path / "fresh.db")
    start_at = time.time() + 2.0
    with multiprocessing.get_context("spawn").Pool(8) as pool:
        run_ids = pool.starmap(_open_and_write, [(path, start_at)] * 16)
    assert len(set(run_ids)) == 16
    conn = sqlite3.connect(path)
    versions = [v for (v,) in conn.execute("SELECT version FROM schema_version ORDER BY version")]
    assert versions == list(range(1, dbmod.LATEST + 1))
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 16


def test_the_version_comes_from_the_project_not_from_a_repository_around_it(tmp_path):
    """An H100 run of a checkout copied without its .git into another repository's folder named
    that repository's commit as stackwars's."""
    import shutil
    import subprocess

    from stackwars.harness.env import _git

    outer = tmp_path / "other-project"
    (outer / "copy" / "stackwars").mkdir(parents=True)
    run = lambda *a: subprocess.run(["git", "-C", str(outer), *a], check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    (outer / "file").write_text("x")
    run("add", "file")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "other")
    assert _git(outer / "copy") == (None, None)  # the copy's git top level is not its own folder
    assert _git(outer)[0] is not None and len(_git(outer)[0]) == 40  # its own root: its own commit
    if shutil.which("git") and (Path(__file__).resolve().parents[1] / ".git").exists():
        assert _git()[0] is not None  # this checkout is its own
    from stackwars.records import Env
    summary = Env({"versions": {"stackwars": "0.1.0"}, "git_revision": None}).summary()
    assert "stackwars 0.1.0 (no git checkout)" in summary


def test_a_database_another_process_is_creating_is_not_taken_for_a_pseudo_file(tmp_path, monkeypatch):
    """The path checked while another process creates the database: empty when its size was asked, its
    first page there when read. The size is asked again after the read, so it is a database file (before,
    one of test_many_processes_create_one_new_database_at_once's openers was refused as a pseudo-file);
    /proc's files, which report no size however much they read, are still refused."""
    from stackwars.store import results

    path = tmp_path / "new.db"
    path.write_bytes(b"SQLite format 3\0" + bytes(84))
    real_stat = os.stat

    def stat_before_the_write(p, *args, **kwargs):  # the moment before the other process wrote its first page
        st = real_stat(p, *args, **kwargs)
        if os.fspath(p) == str(path):
            return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid, 0,
                                   st.st_atime, st.st_mtime, st.st_ctime))
        return st

    monkeypatch.setattr(results.os, "stat", stat_before_the_write)
    assert results.not_a_database_file(path) is None
    assert "is a pseudo-file" in results.not_a_database_file(Path("/proc/self/status"))
