"""stackwars compare: two runs cell by cell. A real slowdown is a regression, a difference
inside the noise is not significant, a contended cell is unreliable, status changes are
named, and bad input exits 2."""

import dataclasses
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from stackwars.cli import app
from stackwars.records import CellSpec, MeasureConfig
from stackwars.report import compare as cmp
from stackwars.verdict import runs
from stackwars.store.results import Store

from tests.factories import measurement

runner = CliRunner()


def _samples(scale, seed, n=60, spread=0.02):
    rng = np.random.default_rng(seed)
    return tuple(float(x) for x in scale * 1e-3 * (1 + spread * rng.standard_normal(n)))


def _m(backend, scale=1.0, seed=0, workload="gemm", status="ok", contended=False, repeat=0, spread=0.02):
    m = measurement(backend, status=status, workload=workload,
                    samples=_samples(scale, seed, spread=spread) if status == "ok" else ())
    m = dataclasses.replace(m, spec=dataclasses.replace(m.spec, repeat=repeat))
    if contended:
        m = dataclasses.replace(m, settings={"contention": {"contended": True, "fraction": 0.4}})
    return m


def _procs(backend, scale=1.0, seed=0, n=3, **kw):
    """One cell measured in ``n`` processes (the default run's three)."""
    return [_m(backend, scale, seed=100 * seed + p, repeat=p, **kw) for p in range(n)]


def _rows(ms):
    return [m.to_row() for m in ms]


def _by_backend(result):
    return {r["backend"]: r for r in result}


def test_a_real_slowdown_is_a_regression_and_noise_is_not():
    a = [*_procs("torch-eager", 1.0, seed=1), *_procs("jax-jit", 1.0, seed=2), *_procs("torch-compile", 1.0, seed=3),
         *_procs("jax-eager", 1.0, seed=4, spread=0.001)]
    b = [*_procs("torch-eager", 1.3, seed=5), *_procs("jax-jit", 1.0, seed=6), *_procs("torch-compile", 0.7, seed=7),
         *_procs("jax-eager", 1.02, seed=8, spread=0.001)]
    result = _by_backend(runs.compare_cells(_rows(a), _rows(b), threshold=0.05))
    slow, same, fast, tiny = result["torch-eager"], result["jax-jit"], result["torch-compile"], result["jax-eager"]
    assert slow["verdict"] == "regression" and slow["ci_low"] > 1.2 and slow["ci_high"] < 1.4
    assert same["verdict"] == "not significant" and same["ci_low"] < 1 < same["ci_high"]
    assert fast["verdict"] == "improvement" and 0.65 < fast["ratio"] < 0.75
    # 2% slower, measured precisely enough to be sure of it, but under the 5% threshold
    assert tiny["significant"] and tiny["verdict"] == "same"
    assert slow["basis"] == "3 / 3 processes" and slow["n_a"] == slow["n_b"] == 3
    # the same slowdown, with a threshold above it, is no longer called a regression
    loose = _by_backend(runs.compare_cells(_rows(a), _rows(b), threshold=0.5))
    assert loose["torch-eager"]["verdict"] == "same"


def test_contended_cells_status_changes_and_cells_on_one_side():
    a = [_m("torch-eager"), _m("jax-jit", seed=1), _m("torch-compile", seed=2), _m("jax-eager", status="error")]
    b = [_m("torch-eager", 2.0, seed=3, contended=True), _m("jax-jit", status="timeout"),
         _m("jax-eager", seed=4), _m("gemm-new", seed=5, workload="ffn")]
    result = runs.compare_cells(_rows(a), _rows(b))
    by = {(r["workload"], r["backend"]): r for r in result}
    assert by[("gemm", "torch-eager")]["verdict"] == "unreliable"  # twice as slow, but the machine was busy
    assert by[("gemm", "jax-jit")]["verdict"] == "broke"
    assert by[("gemm", "jax-eager")]["verdict"] == "fixed"
    assert by[("gemm", "torch-compile")]["verdict"] == "only in A"
    assert by[("ffn", "gemm-new")]["verdict"] == "only in B"
    assert cmp.counts(result) == {"unreliable": 1, "broke": 1, "fixed": 1, "only in A": 1, "only in B": 1}
    # an unreliable ratio is left out of the geometric mean
    assert "geometric mean" not in cmp.summary_line(result)


def test_repeated_cells_are_compared_over_their_processes():
    a = [_m("jax-jit", 1.0, seed=s, repeat=s) for s in range(4)]
    b = [_m("jax-jit", 1.5, seed=10 + s, repeat=s) for s in range(4)]
    (row,) = runs.compare_cells(_rows(a), _rows(b))
    assert row["basis"] == "4 / 4 processes" and row["n_a"] == row["n_b"] == 4
    assert row["processes_a"] == 4 and row["verdict"] == "regression"


def test_one_process_a_side_never_names_a_regression():
    """A 50% slowdown in one process each is what it reads, not a verdict: one process's
    interval says nothing of the spread between launches."""
    (row,) = runs.compare_cells(_rows([_m("jax-jit", 1.0, seed=1)]), _rows([_m("jax-jit", 1.5, seed=2)]))
    assert row["verdict"] == "too few processes" and row["reading"] == "regression"
    assert "too few processes (reads regression)" in cmp._cells(row)


def test_environment_differences_are_named():
    env_a = {"cpu_model": "x", "versions": {"torch": "2.13.0", "jax": "0.10.2"}}
    env_b = {"cpu_model": "x", "versions": {"torch": "2.14.0", "jax": "0.10.2"}, "gpus": [{"name": "H100"}]}
    diffs = runs.environment_differences(env_a, env_b, {"measure": {"min_time_s": 1.0}},
                                        {"measure": {"min_time_s": 2.0}})
    assert "torch: 2.13.0 -> 2.14.0" in diffs and "GPUs: none -> H100" in diffs
    assert "measurement min_time_s: 1.0 -> 2.0" in diffs and not any(d.startswith("jax") for d in diffs)


def _store_run(store, ms, env=None, kind="cells"):
    run_id = store.create_run([m.spec for m in ms] if kind == "cells" else [], {"measure": MeasureConfig().to_dict()},
                              kind=kind, command="test")
    session = store.start_session(run_id, env or {"cpu_model": "test", "versions": {"torch": "2.13.0"}})
    for m in ms:
        store.add_cell(run_id, session, m)
    return run_id


@pytest.fixture
def two_runs(tmp_path):
    path = tmp_path / "r.db"
    with Store(path) as store:
        a = _store_run(store, [*_procs("torch-eager", 1.0, seed=1), *_procs("jax-jit", 1.0, seed=2)])
        b = _store_run(store, [*_procs("torch-eager", 1.4, seed=3), *_procs("jax-jit", 1.0, seed=4)])
        train = store.create_run([], {}, kind="train:mnist", command="train")
    return path, a, b, train


def test_cli_compare_table_json_and_exit_codes(two_runs, tmp_path):
    path, a, b, _ = two_runs
    done = runner.invoke(app, ["compare", a, b, "--db", str(path)], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    assert "regression" in done.output and "not significant" in done.output
    assert "2 cells: 1 regression, 1 not significant" in done.output
    narrow = runner.invoke(app, ["compare", a, b, "--db", str(path)], env={"COLUMNS": "80"})
    assert "┏" not in narrow.output and "regression" in narrow.output  # stacked: no table to cut
    assert max(len(line) for line in narrow.output.splitlines()) <= 80
    done = runner.invoke(app, ["compare", a, b, "--db", str(path), "--fail-on-regression"])
    assert done.exit_code == 1
    done = runner.invoke(app, ["compare", b, b, "--db", str(path), "--fail-on-regression"])
    assert done.exit_code == 0  # a run against itself: nothing changed
    done = runner.invoke(app, ["compare", a, b, "--db", str(path), "--format", "json"])
    data = json.loads(done.stdout)
    assert {c["verdict"] for c in data["cells"]} == {"regression", "not significant"}
    assert data["environment_differences"] == []
    # run B from another database (another machine's results)
    other = tmp_path / "other.db"
    with Store(other) as store:
        c = _store_run(store, _procs("torch-eager", 0.5, seed=9), env={"cpu_model": "other", "versions": {}})
    done = runner.invoke(app, ["compare", a, c, "--db", str(path), "--db-b", str(other), "--format", "markdown"])
    assert done.exit_code == 0, done.output
    assert "improvement" in done.output and "only in A" in done.output and "cpu_model: test -> other" in done.output


@pytest.mark.parametrize("args,message", [
    (["nope", "B"], "no run 'nope'"),
    (["A", "TRAIN"], "is a train:mnist run"),
    (["A", "B", "--threshold", "nan"], "--threshold must be a finite number"),
    (["A", "B", "--threshold", "1.5"], "--threshold must be <= 0.99"),
    (["A", "B", "--format", "xml"], "unknown format 'xml'"),
    (["A", "B", "--db-b", "/nonexistent/x.db"], "no results database"),
])
def test_cli_compare_bad_input(two_runs, args, message):
    path, a, b, train = two_runs
    args = [{"A": a, "B": b, "TRAIN": train}.get(x, x) for x in args]
    before = path.stat().st_mtime_ns
    done = runner.invoke(app, ["compare", *args, "--db", str(path)])
    assert done.exit_code == 2, done.output
    assert message in " ".join(done.output.split())
    assert path.stat().st_mtime_ns == before


def test_cli_compare_refuses_runs_with_nothing_in_common(tmp_path):
    path = tmp_path / "r.db"
    with Store(path) as store:
        a = _store_run(store, [_m("torch-eager")])
        b = _store_run(store, [_m("jax-jit")])
    done = runner.invoke(app, ["compare", a, b, "--db", str(path)])
    assert done.exit_code == 2 and "no cell in common" in done.output


def test_cell_identity_ignores_the_process_number():
    row = _m("jax-jit", repeat=2).to_row()
    assert runs.cell_id(row) == CellSpec("gemm", "small", "forward", "jax-jit").key


def test_a_busy_process_is_left_out_not_the_whole_cell():
    """Four processes a side, one of B's measured on a busy machine at twice the time: it is
    left out (not allowed to make a regression), and the three clean ones decide."""
    a = [_m("jax-jit", 1.0, seed=s, repeat=s) for s in range(4)]
    b = [_m("jax-jit", 1.0, seed=10 + s, repeat=s) for s in range(3)] + [_m("jax-jit", 2.0, seed=20, repeat=3,
                                                                          contended=True)]
    (row,) = runs.compare_cells(_rows(a), _rows(b))
    assert row["n_b"] == 3 and row["verdict"] == "not significant" and not row["busy_b"]
