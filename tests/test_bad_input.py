"""Every bad input is refused before any work: exit code 2, a message that says what was
wrong and what is allowed, and nothing written (no database, no run or session row, no
output file). One table: the cases a reliability tester found accepted or crashing, and
their neighbours."""

import contextlib
import os
import sqlite3
from unittest import mock

import pytest
from typer.testing import CliRunner

from stackwars import runner as sw_runner
from stackwars.cli import app
from stackwars.store.results import Store

runner = CliRunner()


@contextlib.contextmanager
def refused_before_the_probe(name: str):
    """Around a refused command of the refusal tables (this file's and test_nothing_lost*'s):
    bad input that needs no machine to be seen is refused before the machine is probed (the
    probe starts a worker per framework, seconds of CPU; a resume of a finished run was once
    refused only after it). A case that can only be refused by what the probe finds does not
    belong in these tables."""
    asked = []
    real = sw_runner.probe_machine

    def probe(*args, **kwargs):
        asked.append(args)
        return real(*args, **kwargs)

    with mock.patch.object(sw_runner, "probe_machine", probe):
        yield
    assert not asked, f"{name}: the machine was probed before the refusal"


def _corrupt(d):
    (d / "bad.db").write_bytes(b"this is not a database, it only has a .db name" * 20)
    return {"DB": str(d / "bad.db")}


def _training_run(d):
    with Store(d / "t.db") as store:
        run_id = store.create_run([], {"study": "mnist"}, kind="train:mnist", command="stackwars train mnist")
        store.start_session(run_id, {})
    return {"DB": str(d / "t.db"), "RUN": run_id}


def _random_stablehlo(d):
    (d / "prog.mlir").write_bytes(os.urandom(256))
    (d / "prog.json").write_text("{not json")
    return {"FILE": str(d / "prog.mlir")}


def _foreign_sqlite(d):
    conn = sqlite3.connect(d / "app.db")
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.commit()
    conn.close()
    return {"DB": str(d / "app.db")}


TRAIN = ["train", "mnist", "--data-dir", "{MNIST}", "--epochs", "1"]
CASES = [
    # (id, arguments, environment, setup, message)
    ("memory-limit nan", ["run", "gemm", "--memory-limit", "nan"], {}, None, "--memory-limit (GiB) must be a finite number"),
    ("memory-limit inf", ["run", "gemm", "--memory-limit", "inf"], {}, None, "--memory-limit (GiB) must be a finite number"),
    ("memory-limit tiny", ["run", "gemm", "--memory-limit", "0.001"], {}, None, "memory limit must be between 0.5 GiB"),
    ("memory-limit huge", ["run", "gemm", "--memory-limit", "1000000"], {}, None, "memory limit must be between 0.5 GiB"),
    ("min-time inf", ["run", "gemm", "--min-time", "inf"], {}, None, "min-time must be a finite number"),
    ("min-time beyond timeout", ["run", "gemm", "--min-time", "700", "--processes", "1"], {}, None,
     "must be shorter than the per-cell timeout"),
    ("min-time per process beyond timeout", ["run", "gemm", "--min-time", "2500"], {}, None,
     "625 s per process, --min-time spread over 4 processes) must be shorter than the per-cell timeout"),
    # every sample is one block: 10 blocks of 30 s cannot fit a cell of 120 s (issue 67's command, bounded)
    ("min-block-time x min-samples beyond timeout",
     ["run", "gemm", "--preset", "tiny", "-b", "torch-eager", "--processes", "1", "--min-time", "0.05",
      "--min-block-time", "30", "--min-samples", "10", "--timeout", "120"], {}, None,
     "--min-block-time (30 s a block) x --min-samples (10) = 300 s of steady state, not shorter than the per-cell "
     "timeout (120 s)"),
    ("min-block-time 1e308", ["run", "gemm", "--min-block-time", "1e308"], {}, None,
     "--min-block-time (1e+308 s a block) x --min-samples (5) = inf s of steady state"),
    ("processes 0", ["run", "gemm", "--processes", "0"], {}, None, "--processes must be >= 1, got 0"),
    ("max-processes below processes", ["run", "gemm", "--processes", "3", "--max-processes", "2"], {}, None,
     "max-processes (2) must be at least --processes (3)"),
    ("timeout inf", ["run", "gemm", "--timeout", "inf"], {}, None, "timeout must be a finite number"),
    ("seed -1", ["run", "gemm", "--seed", "-1"], {}, None, "--seed must be a non-negative integer"),
    ("db in a missing directory", ["run", "gemm", "--db", "/nonexistent/dir/x.db"], {}, None,
     "directory /nonexistent/dir does not exist"),
    ("db is a directory", ["run", "gemm", "--db", "{TMP}"], {}, None, "is a directory"),
    ("STACKWARS_DB in a missing directory", ["run", "gemm"], {"STACKWARS_DB": "/nonexistent/x.db"}, None,
     "STACKWARS_DB /nonexistent/x.db: directory /nonexistent does not exist"),
    ("corrupt db: run", ["run", "gemm", "--db", "{DB}"], {}, _corrupt, "is not a usable results database"),
    ("corrupt db: show", ["show", "--db", "{DB}"], {}, _corrupt, "is not a usable results database"),
    ("corrupt db: runs", ["runs", "--db", "{DB}"], {}, _corrupt, "is not a usable results database"),
    ("corrupt db: export", ["export", "--db", "{DB}"], {}, _corrupt, "is not a usable results database"),
    ("corrupt db: train", [*TRAIN, "--db", "{DB}", "--out", "{TMP}/o"], {}, _corrupt,
     "is not a usable results database"),
    ("corrupt db: study recompile", ["study", "recompile", "mha", "--vary", "seq=16,32", "-p", "tiny", "--db", "{DB}"],
     {}, _corrupt, "is not a usable results database"),
    ("corrupt db: resume", ["run", "--resume", "x", "--db", "{DB}"], {}, _corrupt, "is not a usable results database"),
    ("another application's sqlite file", ["run", "gemm", "--db", "{DB}"], {}, _foreign_sqlite,
     "is an SQLite file of another application"),
    ("json into /proc", ["run", "gemm", "--json", "/proc/out.json"], {}, None, "cannot write in /proc"),
    ("json is a directory", ["run", "gemm", "--json", "{TMP}"], {}, None, "is a directory"),
    ("warm cache is a file", ["run", "gemm", "--warm-cache", "/etc/passwd"], {}, None, "exists and is not a directory"),
    ("resume a training run", ["run", "--resume", "{RUN}", "--db", "{DB}"], {}, _training_run,
     "this is a train:mnist run"),
    ("resume an unknown run", ["run", "--resume", "nope", "--db", "{DB}"], {}, _training_run, "no run 'nope'"),
    ("ir out into /proc", ["ir", "mha", "-p", "tiny", "--out", "/proc/x"], {}, None, "cannot write in /proc"),
    ("ir out is a file", ["ir", "mha", "-p", "tiny", "--out", "/etc/passwd"], {}, None,
     "exists and is not a directory"),
    ("train out into /proc", [*TRAIN, "--out", "/proc/x"], {}, None, "--out /proc/x: cannot write in /proc"),
    ("train lr inf", [*TRAIN, "--lr", "inf"], {}, None, "--lr must be a finite number"),
    ("train lr 1e30", [*TRAIN, "--lr", "1e30"], {}, None, "--lr must be <= 10"),
    ("train seed -1", [*TRAIN, "--seed", "-1"], {}, None, "--seed must be a non-negative integer"),
    ("train data dir is a file", ["train", "mnist", "--data-dir", "/etc/passwd"], {}, None, "is not a directory"),
    ("unknown plugin", ["list"], {"STACKWARS_PLUGINS": "no_such_module"}, None,
     "STACKWARS_PLUGINS names 'no_such_module', which cannot be imported"),
    ("a micro-op larger than the machine", ["run", "gemm", "--set", "m=10000000000"], {}, None,
     "more than this machine's"),
    ("a model larger than the machine", ["run", "gpt2", "--set", "batch=100000000"], {}, None,
     "more than this machine's"),
    ("random --stablehlo file", ["run", "gemm", "-p", "tiny", "-b", "torch-mlir-xla", "--stablehlo", "{FILE}"], {},
     _random_stablehlo, "not an exported StableHLO program"),
    ("--stablehlo without description", ["run", "gemm", "-b", "torch-mlir-xla", "--stablehlo", "/etc/hostname"], {}, None,
     "expected hostname and its description hostname.json"),
    ("peaks min-time nan", ["peaks", "--min-time", "nan"], {}, None, "--min-time must be a finite number"),
    ("export into /proc", ["export", "--output", "/proc/x.csv", "--db", "{DB}"], {}, _training_run,
     "cannot write in /proc"),
    ("show format", ["show", "--format", "xml", "--db", "{DB}"], {}, _training_run, "unknown format 'xml'"),
    ("study json into /proc", ["study", "cache", "mha", "--json", "/proc/x.json"], {}, None, "cannot write in /proc"),
    ("list device", ["list", "--device", "tpu"], {}, None, "unknown device 'tpu'"),
]


def _snapshot(d):
    """What is in the directory and in any database there (the files SQLite may add to open
    a database, -wal and -shm, hold no data of ours)."""
    files = {p.name for p in d.iterdir() if not p.name.endswith(("-wal", "-shm"))}
    rows = {}
    for p in d.glob("*.db"):
        try:
            conn = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
            rows[p.name] = {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                            for t in ("runs", "sessions", "cells", "study_rows")}
            conn.close()
        except sqlite3.DatabaseError:
            rows[p.name] = p.read_bytes()
    return files, rows


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_exits_2_says_why_and_writes_nothing(case, tmp_path, monkeypatch, mnist_dir):
    name, args, env, setup, message = case
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("STACKWARS_DB", str(work / "default.db"))
    monkeypatch.setenv("STACKWARS_CACHE_DIR", str(tmp_path / "cache"))
    values = {"TMP": str(work), "MNIST": str(mnist_dir), **(setup(work) if setup else {})}
    before = _snapshot(work)
    args = [a.format(**values) for a in args]
    with refused_before_the_probe(name):
        result = runner.invoke(app, args, env=env)
    text = " ".join(result.output.split())  # rich may wrap long lines
    assert result.exit_code == 2, (name, result.exit_code, result.output)
    assert message.format(**values) in text, (name, text)
    assert "Traceback" not in result.output
    assert _snapshot(work) == before, name  # nothing written: no database, no rows, no files


def test_there_are_at_least_29_cases():
    assert len(CASES) >= 29


@pytest.mark.parametrize("args,message", [
    (["run", "gemm", "-p", "tiny", "--cuda-graph-replay"], "needs --device cuda"),
    (["run", "gemm", "-p", "tiny", "--profile", "101"], "0 (off) to 100 steps"),
    (["run", "gemm", "-p", "tiny", "--profile", "2", "--profile-dir", "/proc/x"], "--profile-dir"),
])
def test_bad_timing_and_profile_options_exit_2_and_write_nothing(tmp_path, args, message):
    db = tmp_path / "r.db"
    r = CliRunner().invoke(app, [*args, "--db", str(db)])
    assert r.exit_code == 2, r.output
    assert message in r.output
    assert not db.exists()
