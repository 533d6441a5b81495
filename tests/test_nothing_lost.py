"""Nothing lost, nothing destroyed (issue 25): each class a hostile sweep found, tested with
several cases. A refused input exits 2 with a message that says what was wrong and what is
allowed, before any work, and leaves every file as it was (a real results database with a
stored run included); a write that fails after the work keeps what was finished and says how
to get the rest."""

import hashlib
import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stackwars import outputs
from stackwars.cli import app
from stackwars.store.results import Store, pending_paths
from tests.factories import measurement
from tests.test_bad_input import _snapshot, refused_before_the_probe

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent


def _results_db(d):
    """A real results database holding one run with two stored cells."""
    with Store(d / "r.db") as store:
        plan = [measurement("torch-eager").spec, measurement("jax-jit").spec]
        run_id = store.create_run(plan, {"measure": {}}, kind="cells", command="stackwars run gemm")
        session = store.start_session(run_id, {"machine": "test"})
        store.add_cell(run_id, session, measurement("torch-eager"))
        store.add_cell(run_id, session, measurement("jax-jit"))
    return {"DB": str(d / "r.db"), "RUN": run_id}


def _fifo(d):
    os.mkfifo(d / "out.fifo")
    return {**_results_db(d), "FIFO": str(d / "out.fifo")}


def _link_to_db(d):
    values = _results_db(d)
    (d / "link.csv").symlink_to(d / "r.db")
    return values


def _readonly_db(d):
    values = _results_db(d)
    os.chmod(d / "r.db", 0o444)
    return values


MICRO = ["-p", "tiny", "--processes", "1"]
CASES = [
    # (class, id, arguments, environment, setup, message)
    # 1. an output path that would destroy what it points at
    (1, "export over its database", ["export", "-o", "{DB}", "--db", "{DB}"], {}, _results_db,
     "is the results database this command uses"),
    (1, "run --json over its database", ["run", "gemm", *MICRO, "--json", "{DB}", "--db", "{DB}"], {}, _results_db,
     "is the results database this command uses"),
    (1, "study --json over its database", ["study", "recompile", "mha", "--vary", "seq=16,32", "-p", "tiny",
                                           "--json", "{DB}", "--db", "{DB}"], {}, _results_db,
     "is the results database this command uses"),
    (1, "a link to the database", ["export", "-o", "{TMP}/link.csv", "--db", "{DB}"], {}, _link_to_db,
     "is the results database this command uses"),
    (1, "export to a device", ["export", "-o", "/dev/full", "--db", "{DB}"], {}, _results_db, "is a device"),
    (1, "export to a FIFO", ["export", "-o", "{FIFO}", "--db", "{DB}"], {}, _fifo, "is a FIFO"),
    (1, "run --json to a device", ["run", "gemm", *MICRO, "--json", "/dev/null"], {}, None, "is a device"),
    (1, "study --json over the default database", ["study", "cache", "mha", "--json", "{DB}"], {"STACKWARS_DB": "{DB}"},
     _results_db, "is the results database this command uses"),
    # 2. a choice given twice: refused before any measuring, one rule everywhere
    (2, "workload twice", ["run", "gemm", "gemm", *MICRO], {}, None, "workload gemm is given twice"),
    (2, "backend twice", ["run", "gemm", *MICRO, "-b", "torch-eager", "-b", "torch-eager"], {}, None,
     "--backend torch-eager is given twice"),
    (2, "an old and a new name of one backend", ["run", "gemm", *MICRO, "-b", "torch-xla", "-b", "torch-mlir-xla"],
     {}, None, "torch-mlir-xla is given twice"),
    (2, "preset twice", ["run", "gemm", "--preset", "tiny", "--preset", "tiny"], {}, None,
     "--preset tiny is given twice"),
    (2, "autotune backend twice", ["study", "autotune", "gemm", "-b", "jax-jit", "-b", "jax-jit"], {}, None,
     "--backend jax-jit is given twice"),
    (2, "cache backend twice", ["study", "cache", "mha", "-b", "jax-jit", "-b", "jax-jit"], {}, None,
     "--backend jax-jit is given twice"),
    (2, "recompile variant twice", ["study", "recompile", "mha", "--vary", "seq=16,32", "--variant", "as-is",
                                    "--variant", "as-is"], {}, None, "--variant as-is is given twice"),
    (2, "scaling strategy twice", ["study", "scaling", "ffn", "--strategy", "dp", "--strategy", "dp"], {}, None,
     "--strategy dp is given twice"),
    (2, "vmap op twice", ["study", "vmap", "--op", "dot", "--op", "dot"], {}, None, "--op dot is given twice"),
    (2, "control-flow phase twice", ["study", "control-flow", "--phase", "forward", "--phase", "forward"], {}, None,
     "--phase forward is given twice"),
    (2, "train batch size twice", ["train", "mnist", "--data-dir", "{MNIST}", "--out", "{TMP}/o", "--batch-size",
                                   "1024", "--batch-size", "1024"], {}, None, "--batch-size 1024 is given twice"),
    (2, "--set one key twice", ["run", "gemm", "--set", "m=64", "--set", "m=32"], {}, None,
     "--set m is given twice (64 and 32)"),
    (2, "a value twice in a sweep", ["run", "gemm", "--set", "m=8,16,8"], {}, None, "8 is given twice"),
    # 3. a database that cannot take the work: refused before it starts
    (3, "FIFO as the database", ["run", "gemm", *MICRO, "--db", "{FIFO}"], {}, _fifo, "is not a regular file"),
    (3, "FIFO in STACKWARS_DB", ["runs"], {"STACKWARS_DB": "{FIFO}"}, _fifo, "is not a regular file"),
    (3, "/dev/null as the database", ["show", "--db", "/dev/null"], {}, None, "is not a regular file"),
    # 4. what this machine cannot do, refused before any work
    (4, "run on a GPU that is not there", ["run", "gemm", "--device", "cuda"], {}, None, "no NVIDIA GPU is visible"),
    (4, "reproduce on a GPU that is not there", ["reproduce", "--device", "cuda", "--out", "{TMP}/rep"], {}, None,
     "no NVIDIA GPU is visible"),
    (4, "fidelity on a GPU that is not there", ["fidelity", "--device", "cuda"], {}, None, "no NVIDIA GPU is visible"),
    (4, "peaks on a GPU that is not there", ["peaks", "--device", "cuda"], {}, None, "no NVIDIA GPU is visible"),
    (4, "a study on a GPU that is not there", ["study", "vmap", "--device", "cuda"], {}, None,
     "no NVIDIA GPU is visible"),
    # 5. settings checked against their meaning
    (5, "recompile timeout 0", ["study", "recompile", "mha", "--vary", "seq=16,32", "--timeout", "0"], {}, None,
     "--timeout must be > 0"),
    (5, "cache timeout -1", ["study", "cache", "mha", "--timeout", "-1"], {}, None, "--timeout must be > 0"),
    (5, "ir timeout -5", ["ir", "mha", "-p", "tiny", "--timeout", "-5"], {}, None, "--timeout must be > 0"),
    (5, "vocab -1", ["describe", "gpt2", "--set", "vocab=-1"], {}, None, "vocab must be a positive integer"),
    (5, "width -3", ["run", "resnet50", "--set", "width=-3"], {}, None, "width must be a positive integer"),
    (5, "norm_eps -1", ["run", "gpt2", "--set", "norm_eps=-1"], {}, None, "norm_eps must be > 0"),
    (5, "bn_momentum 5", ["describe", "resnet50", "--set", "bn_momentum=5"], {}, None, "bn_momentum must be <= 1"),
    (5, "bn_eps -1", ["run", "resnet50", "--set", "bn_eps=-1"], {}, None, "bn_eps must be > 0"),
    (5, "rope_theta -5", ["run", "llama3-8b", "--set", "rope_theta=-5"], {}, None, "rope_theta must be > 0"),
    (5, "local_window 0", ["describe", "gpt-neo-1.3b", "--set", "local_window=0"], {}, None,
     "local_window must be a positive integer"),
    (5, "type_vocab -1", ["run", "bert-base", "--set", "type_vocab=-1"], {}, None, "type_vocab must be a positive integer"),
    (5, "classes -1", ["run", "vit-b16", "--set", "classes=-1"], {}, None, "classes must be a positive integer"),
    (5, "tol 0", ["run", "newton", "--set", "tol=0"], {}, None, "tol must be > 0"),
    (5, "per-device batch 0", ["study", "scaling", "ffn", "--per-device-batch", "0"], {}, None,
     "--per-device-batch must be a positive integer, got 0"),
    (5, "an empty item in --vary", ["study", "recompile", "mha", "--vary", "seq=16,,32"], {}, None,
     "an empty item in the list"),
    (5, "an empty item in --devices", ["study", "scaling", "ffn", "--devices", "1,,2"], {}, None,
     "an empty item in the list"),
    (5, "an empty item in --set", ["run", "gemm", "--set", "m=8,,16"], {}, None, "an empty item in the list"),
    (5, "a 5000-value sweep", ["study", "recompile", "mha", "--vary", "seq=" + ",".join(map(str, range(1, 5001)))],
     {}, None, "more than the 256 a sweep may have"),
    (5, "a negative sequence length", ["study", "recompile", "mha", "--vary", "seq=-5"], {}, None,
     "positive integers"),
    (5, "--remat in the forward phase", ["study", "control-flow", "--remat", "--phase", "forward"], {}, None,
     "--remat"),
    (5, "ir --compare with --framework", ["ir", "mha", "-p", "tiny", "--compare", "--framework", "jax"], {}, None,
     "--framework"),
    # 6. --resume: what the stored run fixes cannot be changed
    (6, "resume with a preset", ["run", "--resume", "{RUN}", "--db", "{DB}", "--preset", "paper"], {}, _results_db,
     "--preset cannot change it"),
    (6, "resume with device, dtype, phase, seed", ["run", "--resume", "{RUN}", "--db", "{DB}", "--dtype", "bfloat16",
                                                   "--phase", "train-step", "--seed", "7"], {}, _results_db,
     "--phase, --dtype, --seed cannot change it"),
    (6, "resume with workloads", ["run", "gemm", "--resume", "{RUN}", "--db", "{DB}"], {}, _results_db,
     "workloads cannot change it"),
    # 7. plugins may add names, never replace one; a plugin that exits says so
    (7, "a plugin that shadows gemm: list", ["list"], {"STACKWARS_PLUGINS": "tests.plugins.shadow"}, None,
     "it registers the workload 'gemm', which is already taken (a built-in)"),
    (7, "a plugin that shadows gemm: run", ["run", "gemm", *MICRO], {"STACKWARS_PLUGINS": "tests.plugins.shadow"},
     None, "a plugin may add names, not replace them"),
    (7, "a plugin that calls sys.exit", ["describe", "gemm"], {"STACKWARS_PLUGINS": "tests.plugins.exits"}, None,
     "'tests.plugins.exits', which cannot be imported (SystemExit: 3)"),
    (7, "a plugin that raises KeyboardInterrupt", ["list"], {"STACKWARS_PLUGINS": "tests.plugins.interrupts"}, None,
     "'tests.plugins.interrupts', which cannot be imported (KeyboardInterrupt"),
    # 9. messages that say what was wrong, about the option that was wrong
    (9, "--db-b named in its own errors", ["compare", "{RUN}", "{RUN}", "--db", "{DB}", "--db-b", "/nonexistent/b.db"], {},
     _results_db, "--db-b"),
    (9, "an empty --db", ["runs", "--db", ""], {}, None, "--db is empty"),
    (9, "an empty --db=", ["show", "--db="], {}, None, "--db is empty"),
    (9, "--policy names what is allowed", ["study", "stream", "mha", "--policy", "bogus"], {}, None, "allowed:"),
]


def _values(work, setup, mnist_dir):
    return {"TMP": str(work), "MNIST": str(mnist_dir), **(setup(work) if setup else {})}


def _hashes(d):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in d.iterdir()
            if p.is_file() and not p.is_symlink() and stat.S_ISREG(p.stat().st_mode)}


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_refused_before_any_work_and_nothing_changed(case, tmp_path, monkeypatch, mnist_dir):
    _, name, args, env, setup, message = case
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("STACKWARS_DB", str(work / "default.db"))
    monkeypatch.setenv("STACKWARS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("STACKWARS_PLUGINS", raising=False)
    values = _values(work, setup, mnist_dir)
    before, digests = _snapshot(work), _hashes(work)
    with refused_before_the_probe(name):
        result = runner.invoke(app, [a.format(**values) for a in args],
                               env={k: v.format(**values) for k, v in env.items()})
    text = " ".join(result.output.split())
    assert result.exit_code == 2, (name, result.exit_code, result.output)
    assert message.format(**values) in text, (name, text)
    assert "Traceback" not in result.output
    assert _snapshot(work) == before, name
    assert _hashes(work) == digests, name  # byte for byte: the database and every file unchanged


def test_every_class_has_several_cases():
    classes = [c[0] for c in CASES]
    assert {n: classes.count(n) >= 3 for n in (1, 2, 3, 4, 5, 6, 7, 9)} == dict.fromkeys((1, 2, 3, 4, 5, 6, 7, 9), True)


# 1. the writer itself: through links, nothing half-written, stdout that fails


def test_an_output_through_a_link_replaces_the_target_and_keeps_the_link(tmp_path):
    target = tmp_path / "real.csv"
    target.write_text("old")
    (tmp_path / "link.csv").symlink_to(target)
    outputs.check(tmp_path / "link.csv", "-o")
    outputs.write(tmp_path / "link.csv", "new", "-o")
    assert (tmp_path / "link.csv").is_symlink()
    assert target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.csv", "real.csv"]


def test_a_write_that_fails_keeps_the_old_content_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    import errno

    target = tmp_path / "out.json"
    target.write_text("old results")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(outputs.OutputError, match="No space left on device.*its old content is unchanged") as exc:
        outputs.write(target, "new results", "--json")
    assert exc.value.exit_code == 1
    assert target.read_text() == "old results"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_an_export_through_a_link_writes_the_csv_where_the_link_points(tmp_path):
    values = _results_db(tmp_path)
    (tmp_path / "real.csv").write_text("")
    (tmp_path / "out.csv").symlink_to(tmp_path / "real.csv")
    before = hashlib.sha256(Path(values["DB"]).read_bytes()).hexdigest()
    r = runner.invoke(app, ["export", "-o", str(tmp_path / "out.csv"), "--db", values["DB"]])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "out.csv").is_symlink()
    assert "torch-eager" in (tmp_path / "real.csv").read_text()
    assert hashlib.sha256(Path(values["DB"]).read_bytes()).hexdigest() == before


@pytest.mark.parametrize("args", [["show", "-f", "json"], ["export"], ["runs"]])
def test_a_full_stdout_is_a_message_and_exit_1_not_a_traceback(tmp_path, args):
    values = _results_db(tmp_path)
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "stackwars", *args, "--db", values["DB"]], stdout=full,
                           stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120,
                           env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 1, r.stderr
    assert "No space left on device" in r.stderr
    assert "Traceback" not in r.stderr
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob("*.partial"))


def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(tmp_path):
    values = _results_db(tmp_path)
    r = subprocess.run(f"{sys.executable} -m stackwars export --db {values['DB']} | head -c 10", shell=True,
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert len(r.stdout) == 10
    assert "Traceback" not in r.stderr and "Broken pipe" not in r.stderr


# 3. a busy database: the run waits visibly, keeps what it could not store, and resumes


def long_folder(tmp_path: Path) -> Path:
    """A folder whose path is over 100 characters: the command that names it, in a message longer
    than the output's width, was broken between its words (copied, its first line ran alone)."""
    folder = tmp_path / ("results-of-a-long-study-" * 4 + "x")
    folder.mkdir()
    assert len(str(folder)) > 100
    return folder


def test_a_database_locked_through_a_run_keeps_every_cell_and_resume_stores_them(tmp_path, monkeypatch):
    """Another connection takes the exclusive lock as the first cell starts and holds it to the
    end: the run waits (and says so), keeps both cells in its pending file, exits 1 with the
    resume command; resume stores them, measured once."""
    from stackwars import runner as runner_mod

    db = long_folder(tmp_path) / "r.db"  # the command to copy holds it: printed whole on one line
    monkeypatch.setenv("STACKWARS_DB_WAIT_S", "3")
    with Store(db):
        pass
    holder = sqlite3.connect(str(db), isolation_level=None)
    measure = runner_mod.measure_one
    measured = []

    def measure_while_locked(*args, **kwargs):
        if not holder.in_transaction:
            holder.execute("BEGIN EXCLUSIVE")
        measured.append(args[0].backend)
        return measure(*args, **kwargs)

    monkeypatch.setattr(runner_mod, "measure_one", measure_while_locked)
    try:
        r = runner.invoke(app, ["run", "gemm", "-p", "tiny", "-b", "torch-eager", "-b", "jax-jit", "--processes",
                                "1", "--min-time", "0", "--inline", "--db", str(db)])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        monkeypatch.setattr(runner_mod, "measure_one", measure)
    text = " ".join(r.output.split())
    assert r.exit_code == 1, r.output
    assert "waiting" in text.lower()
    assert "2 measured cell(s) could not be stored" in text, text
    run_id = next(iter(Store(db).run_ids()))
    assert any(f"`stackwars run --resume {run_id} --db {db}`" in line for line in r.output.splitlines()), r.output
    kept = [p for p in pending_paths(db, run_id) if p.exists()]
    assert kept and len(kept[0].read_text().splitlines()) == 2
    assert Store(db).cells(run_id) == []
    # the lock is gone: resume stores the kept cells without measuring them again
    r = runner.invoke(app, ["run", "--resume", run_id, "--db", str(db), "--inline"])
    assert r.exit_code == 0, r.output
    assert sorted(measured) == ["jax-jit", "torch-eager"]  # not measured again
    cells = Store(db).cells(run_id)
    assert sorted(m.spec.backend for _, m in cells) == ["jax-jit", "torch-eager"]
    assert all(m.status == "ok" for _, m in cells)
    assert not any(p.exists() for p in pending_paths(db, run_id))


def test_a_full_database_keeps_the_measured_cells_and_says_how_to_store_them(tmp_path, monkeypatch):
    """The disk fills once the run is planned: every insert of a cell fails with SQLite's own
    error for it. Both cells are kept beside the database, exit 1, and resume stores them."""
    db = long_folder(tmp_path) / "r.db"
    add_cell = Store.add_cell

    class FullDisk:
        def __init__(self, conn):
            self.conn = conn

        def execute(self, sql, *args):
            if sql.lstrip().startswith("INSERT INTO cells"):
                raise sqlite3.OperationalError("database or disk is full")
            return self.conn.execute(sql, *args)

        def __getattr__(self, name):
            return getattr(self.conn, name)

    def add_cell_when_full(self, *args, **kwargs):
        real, self.conn = self.conn, FullDisk(self.conn)
        try:
            return add_cell(self, *args, **kwargs)
        finally:
            self.conn = real

    monkeypatch.setattr(Store, "add_cell", add_cell_when_full)
    r = runner.invoke(app, ["run", "gemm", "-p", "tiny", "-b", "torch-eager", "-b", "jax-jit", "--processes", "1",
                            "--min-time", "0", "--inline", "--db", str(db)])
    monkeypatch.setattr(Store, "add_cell", add_cell)
    text = " ".join(r.output.split())
    assert r.exit_code == 1, r.output
    assert "2 measured cell(s) could not be stored" in text and "the disk is full" in text
    assert "Traceback" not in r.output
    run_id = Store(db).run_ids()[0]
    assert any(f"`stackwars run --resume {run_id} --db {db}`" in line for line in r.output.splitlines()), r.output
    assert Store(db).cells(run_id) == []
    r = runner.invoke(app, ["run", "--resume", run_id, "--db", str(db), "--inline"])
    assert r.exit_code == 0, r.output
    assert sorted(m.spec.backend for _, m in Store(db).cells(run_id)) == ["jax-jit", "torch-eager"]


@pytest.fixture
def read_only_db(tmp_path):
    """A results database on a read-only path: a read-only file in a read-only directory, or,
    for root (who writes through file modes), a read-only tmpfs mounted for the test."""
    d = tmp_path / "ro"
    d.mkdir()
    if os.geteuid() != 0:
        values = _results_db(d)
        os.chmod(values["DB"], 0o444)
        os.chmod(d, 0o555)
        yield values
        os.chmod(d, 0o755)
        return
    source = tmp_path / "src"
    source.mkdir()
    values = _results_db(source)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(d)], capture_output=True).returncode == 0
    if not mounted:
        pytest.skip("running as root where no read-only filesystem can be mounted: no read-only file can be made")
    try:
        import shutil
        shutil.copy(values["DB"], d / "r.db")
        subprocess.run(["mount", "-o", "remount,ro", str(d)], check=True)
        yield {**values, "DB": str(d / "r.db")}
    finally:
        subprocess.run(["umount", str(d)], capture_output=True)


def test_a_read_only_database_is_refused_before_any_work_and_still_read(read_only_db):
    db = Path(read_only_db["DB"])
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    r = runner.invoke(app, ["run", "gemm", *MICRO, "--db", str(db)])
    text = " ".join(r.output.split())
    assert r.exit_code == 2, r.output
    assert "cannot be written" in text and "nothing was run" in text
    assert "read-only filesystem" in text or "readonly database" in text
    assert "Traceback" not in r.output
    for args in (["runs"], ["show"], ["export", "-f", "json"]):  # reading needs no write
        r = runner.invoke(app, [*args, "--db", str(db)], env={"COLUMNS": "250"})  # no column cut to fit
        assert r.exit_code == 0, (args, r.output)
        assert read_only_db["RUN"] in r.output or "torch-eager" in r.output
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


# 7. where a cell's workload and backend came from


def test_cells_record_where_their_workload_and_backend_came_from(tmp_path, monkeypatch):
    monkeypatch.setenv("STACKWARS_PLUGINS", "tests.plugins.faults")
    db = tmp_path / "r.db"
    r = runner.invoke(app, ["run", "fault", "-p", "ok", "-b", "torch-eager", "--processes", "1", "--min-time", "0",
                            "--inline", "--db", str(db)])
    assert r.exit_code == 0, r.output
    ((_, m),) = Store(db).cells()
    assert m.settings["origin"] == {"workload": "plugin tests.plugins.faults", "backend": "built-in"}
    r = runner.invoke(app, ["export", "-f", "json", "--db", str(db)])
    row = json.loads(r.output)[0]
    assert row["workload_origin"] == "plugin tests.plugins.faults" and row["backend_origin"] == "built-in"


# 8. signals: what finished is kept and said


def test_sigterm_during_a_study_stores_the_finished_rows(tmp_path):
    """SIGTERM while ``study recompile`` measures its second variant: the first variant's rows
    are stored, the exit status is 128 + 15, and no temporary folder is left."""
    db = tmp_path / "r.db"
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir), "STACKWARS_PLUGINS": "tests.plugins.faults", "COLUMNS": "200"}
    proc = subprocess.Popen([sys.executable, "-m", "stackwars", "study", "recompile", "mha", "-p", "tiny", "--vary",
                             "seq=8,16", "-b", "jax-jit", "-b", "torch-compile", "--db", str(db)], cwd=ROOT, env=env,
                            stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "compiles" in line:  # the first variant is done
            proc.terminate()
            break
    rest = proc.communicate(timeout=120)[1]
    text = " ".join(("".join(seen) + rest).split())
    assert proc.returncode == 128 + 15, text
    assert "stopped by SIGTERM" in text and "are stored as run" in text, text
    finished = {tuple(line.split(":")[0].split()) for line in (seen + rest.splitlines()) if "compiles" in line}
    rows = Store(db).study_rows(Store(db).run_ids()[0])
    assert rows and {(r["backend"], r["variant"]) for r in rows} <= finished, (rows, finished)
    assert not [p for p in tmpdir.iterdir() if p.name.startswith("stackwars")]


def test_a_parse_error_is_one_plain_line():
    for args, message in ((["run", "--bogus"], "error: No such option: --bogus"),
                          (["run", "gemm", "--processes", "x"], "error: Invalid value for '--processes'")):
        r = subprocess.run([sys.executable, "-m", "stackwars", *args], capture_output=True, text=True, cwd=ROOT,
                           timeout=120)
        assert r.returncode == 2
        assert r.stderr.startswith(message), r.stderr
        assert r.stderr.rstrip().endswith("; see stackwars run --help"), r.stderr
        assert "╭" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_ctrl_c_during_report_removes_the_folder_it_made_and_says_so(tmp_path, monkeypatch):
    from stackwars.report import page

    values = _results_db(tmp_path)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(page, "write", interrupted)
    r = runner.invoke(app, ["report", "--db", values["DB"], "--out", str(tmp_path / "rep")])
    assert r.exit_code == 130, r.output
    assert "interrupted: no report written" in " ".join(r.output.split())
    assert not (tmp_path / "rep").exists()
    # an existing folder is the user's: kept, with what was in it
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    r = runner.invoke(app, ["report", "--db", values["DB"], "--out", str(tmp_path / "mine")])
    assert r.exit_code == 130
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
