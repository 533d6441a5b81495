"""Sweeps beyond one process: the same tiny sweep (gemm, two backends, two phases: 4 cells)
through Ray and through submitit's local executor gives the serial executor's cells, statuses
and parity, each in one run of one database; a Ray worker killed mid-cell leaves that cell
recorded as lost, the run goes on, and `--resume` measures it again without a duplicate.

The SLURM path runs against a SLURM of one host (tests/fake_slurm). Ray and submitit are
optional extras: without them these tests skip and say so, except where
STACKWARS_REQUIRE_SWEEPS=1 (CI), where a missing package fails."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest

from stackwars import executors
from stackwars.errors import SpecError
from stackwars.records import CellSpec, Measurement
from stackwars.store.results import Store, rows

from tests.conftest import ROOT


def _need(module: str):
    try:
        return __import__(module)
    except ImportError as exc:
        if os.environ.get("STACKWARS_REQUIRE_SWEEPS") == "1":
            pytest.fail(f"{module} is required here (STACKWARS_REQUIRE_SWEEPS=1) and does not import: {exc}")
        pytest.skip(f"{module} is not installed (pip install 'stackwars[ray,slurm]')")


SWEEP = ["run", "gemm", "-p", "tiny", "--phase", "forward", "--phase", "train-step", "-b", "torch-eager",
         "-b", "jax-jit", "--processes", "1", "--max-processes", "1", "--min-time", "0.05", "--warmup", "1",
         "--min-samples", "3"]


def _stackwars(args, extra_env=None):
    return subprocess.run([sys.executable, "-m", "stackwars", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200", **(extra_env or {})}, timeout=600)


def _cells(db):
    """The run of ``db``: its id and its cells as rows, each with its key and parity verdict."""
    with Store(db, create=False) as store:
        (run,) = store.runs()
        rid = run["run_id"]
        cells = [m for _, m in store.cells(rid)]
        return rid, [{**row, "cell": m.spec.key, "parity_ok": m.parity.ok if m.parity else None}
                     for row, m in zip(rows(store, rid), cells)]


def _outcome(cell_rows):
    """What must not depend on where a cell ran: its key, status and parity verdict."""
    return sorted((r["cell"], r["status"], r["parity_ok"]) for r in cell_rows)


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    db = tmp_path_factory.mktemp("serial") / "r.db"
    r = _stackwars([*SWEEP, "--db", str(db)])
    assert r.returncode == 0, r.stderr[-3000:]
    return _cells(db)[1]


def _ray_cell_processes():
    """Ray workers running one of our cells right now (Ray names the process after the task),
    with the cell's own worker started under them."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if cmd and cmd[0].startswith("ray::stackwars_cell"):
            try:
                if p.children():
                    found.append(p)
            except psutil.NoSuchProcess:
                pass
    return found


# a Ray cluster on the loopback interface only (Ray otherwise swaps 127.0.0.1 for the host's
# address), with the token authentication `ray start` turns on, as a driver must ask for it
RAY_LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "token"}


@pytest.fixture
def ray_tmp():
    """Where Ray keeps its sessions (sockets, logs) in this test: a temporary folder of its own, removed
    after (Ray reads TMPDIR on Linux), not /tmp/ray, where every suite run left two sessions (11 MB
    after a day). A short path: a Ray socket lies five folders below it, within the 107 bytes a
    socket's path may have."""
    folder = tempfile.mkdtemp(prefix="ray-")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _ray_head(tmp: str):
    """A one-node Ray cluster on 127.0.0.1 with two CPUs, its sessions under ``tmp``; its address."""
    ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")
    env = {**os.environ, **RAY_LOOPBACK, "TMPDIR": tmp}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = subprocess.run([ray_cli, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
                              "--num-cpus", "2", "--num-gpus", "0", "--object-store-memory", str(2**27),
                              "--include-dashboard", "false", "--disable-usage-stats"],
                             capture_output=True, text=True, timeout=120, env=env)
    try:
        assert started.returncode == 0, started.stderr[-3000:]
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([ray_cli, "stop", "--force"], capture_output=True, timeout=120, env=env)


def test_ray_gives_the_serial_cells_and_a_killed_worker_is_lost_then_resumed(serial, tmp_path, ray_tmp):
    _need("ray")
    db = tmp_path / "r.db"
    proc = subprocess.Popen([sys.executable, "-m", "stackwars", *SWEEP, "--db", str(db), "--executor", "ray"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "200", "TMPDIR": ray_tmp})
    killed = None
    deadline = time.monotonic() + 300
    while killed is None and proc.poll() is None and time.monotonic() < deadline:
        running = _ray_cell_processes()
        if running:
            killed = running[0].pid
            os.kill(killed, signal.SIGKILL)  # the Ray worker dies mid-cell
        time.sleep(0.05)
    out, err = proc.communicate(timeout=600)
    assert killed is not None, f"no Ray worker was seen running a cell\n{err[-3000:]}"
    assert proc.returncode == 1, err[-3000:]  # a lost cell is a failure of this run, and the run went on
    run_id, first = _cells(db)
    assert len(first) == len(serial)  # every cell was recorded, the lost one too
    lost = [r for r in first if r["lost"]]
    assert len(lost) == 1 and lost[0]["lost"] == "ray" and lost[0]["status"] == "error"
    assert "lost: the ray worker running this cell died" in lost[0]["error"]
    assert f"stackwars run --resume {run_id} --db {db} --executor ray`" in " ".join(err.split())  # same executor
    assert all(r["status"] == "ok" for r in first if not r["lost"])

    # resumed through a Ray cluster the test starts (a head node on 127.0.0.1), as on a real
    # cluster: --ray-address, and a shared folder for the run's reference cache
    shared = tmp_path / "shared"
    with _ray_head(ray_tmp) as address:
        r = _stackwars(["run", "--resume", run_id, "--db", str(db), "--executor", "ray", "--ray-address", address,
                        "--shared-dir", str(shared)], extra_env={**RAY_LOOPBACK, "TMPDIR": ray_tmp})
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(list(Path(ray_tmp, "ray").glob("session_2*"))) == 2  # the private cluster's and the head's
    assert shared.is_dir() and not any(shared.iterdir())  # the reference cache went with the run
    assert "1 of 4 cells still to measure" in r.stderr
    _, after = _cells(db)
    assert Counter(x["cell"] for x in after) == Counter(x["cell"] for x in serial)  # nothing lost, nothing twice
    assert _outcome(after) == _outcome(serial)
    assert not any(x["lost"] for x in after)
    # Ray placed every cell on this host's CPU, and each cell says so
    assert {(x["host"], x["placed_on"]) for x in after} == {(serial[0]["host"], "cpu")}
    assert len({x["machine"] for x in after}) == 1


def test_submitit_local_gives_the_serial_cells(serial, tmp_path):
    _need("submitit")
    db = tmp_path / "r.db"
    r = _stackwars([*SWEEP, "--db", str(db), "--executor", "submitit-local"])
    assert r.returncode == 0, r.stderr[-3000:]
    _, got = _cells(db)
    assert _outcome(got) == _outcome(serial)
    assert {x["placed_on"] for x in got} == {"cpu"}
    assert not list(tmp_path.glob("stackwars-submitit-*"))


def _crashing_measure(spec, placement):
    if spec.repeat == 0:
        os.kill(os.getpid(), signal.SIGKILL)  # the job's process dies: pre-empted, OOM-killed, node lost
    return Measurement(spec=spec, status="ok", framework="jax", settings={"placement": placement.to_dict()})


def test_a_submitit_job_that_dies_is_a_lost_cell_and_the_others_run(tmp_path):
    _need("submitit")
    specs = [CellSpec("gemm", "tiny", "forward", "jax-jit", "cpu", repeat=i) for i in range(2)]
    ex = executors.Submitit("local", str(tmp_path / "jobs"), timeout_s=60)
    got = {m.spec.repeat: m for m in ex.run(specs, _crashing_measure)}
    assert sorted(got) == [0, 1]
    assert got[0].status == "error" and got[0].settings["lost"]["executor"] == "submitit-local"
    assert got[1].status == "ok" and got[1].settings["placement"]["kind"]["cpu_model"]


def test_a_lost_cell_is_missing_until_measured_again_and_then_stored_once(tmp_path):
    from stackwars import runner
    from stackwars.records import MeasureConfig

    specs = [CellSpec("gemm", "tiny", "forward", "jax-jit", "cpu", repeat=i) for i in range(3)]
    with Store(tmp_path / "r.db") as store:
        rid = runner.new_run(store, specs, MeasureConfig())
        session = store.start_session(rid, {})
        store.add_cell(rid, session, Measurement(spec=specs[0], status="ok", framework="jax"))
        store.add_cell(rid, session, executors.lost(specs[1], "ray", "WorkerCrashedError"))
        store.add_cell(rid, session, Measurement(spec=specs[2], status="error", framework="jax", error="a real crash"))
        # the real crash is a result; the lost cell is not, so it is planned again
        assert [s.key for s in store.missing(rid)] == [specs[1].key]
        store.add_cell(rid, session, Measurement(spec=specs[1], status="ok", framework="jax"))
        kept = [(m.spec.key, m.status, m.error) for _, m in store.cells(rid)]
        assert store.missing(rid) == []
        (listed,) = store.runs()
        history = store.conn.execute("SELECT COUNT(*) FROM cells").fetchone()[0]
    # readers see each cell once (the lost record replaced); the append-only table keeps it as history
    assert kept == [(specs[0].key, "ok", None), (specs[2].key, "error", "a real crash"), (specs[1].key, "ok", None)]
    assert listed["done"] == 3 and listed["statuses"] == {"ok": 2, "error": 1} and history == 4


def test_an_executor_whose_package_is_missing_is_named_with_its_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.setitem(sys.modules, "submitit", None)
    with pytest.raises(SpecError, match=r"--executor ray needs ray, which is not installed.*stackwars\[ray\]"):
        executors.make("ray")
    with pytest.raises(SpecError, match=r"--executor submitit-local needs submitit.*stackwars\[slurm\]"):
        executors.make("submitit-local")


def test_cells_placed_on_another_kind_of_machine_keep_their_verdicts_apart(tmp_path):
    from stackwars.records import Env
    from stackwars.report import verdict as view

    env = Env({"cpu_model": "AMD EPYC", "cpu_count_logical": 2, "gpus": [{"name": "NVIDIA H100"}],
               "versions": {"torch": "2.11.0", "jax": "0.11.2"}})
    same = {"cpu_model": "AMD EPYC", "cpu_count_logical": 2, "gpu": "NVIDIA H100",
            "versions": {"torch": "2.11.0", "jax": "0.11.2"}}
    other = {**same, "cpu_model": "Intel Xeon", "cpu_count_logical": 64, "gpu": "NVIDIA A100"}
    older = {**same, "versions": {"torch": "2.9.0", "jax": "0.11.2"}}  # a node with another PyTorch
    assert env.machine(same) == env.machine() and env.machine(None) == env.machine()
    assert env.machine(other) != env.machine() and "NVIDIA A100" in env.machine(other)
    assert "torch 2.9.0" in env.machine(older) and env.machine(older) != env.machine()
    assert view.mixed_machines([{"run_id": "a", "machine": env.machine()}] * 2) is None
    warning = view.mixed_machines([{"run_id": "a", "machine": env.machine()}, {"run_id": "a",
                                                                            "machine": env.machine(other)}])
    assert "run a's cells ran on 2 kinds of machine" in warning


def test_a_ray_address_that_does_not_answer_is_refused_at_once():
    _need("ray")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    start = time.monotonic()
    with pytest.raises(SpecError, match=f"nothing answers at 127.0.0.1:{port}"):
        executors.Ray(f"127.0.0.1:{port}").reach()
    assert time.monotonic() - start < 10  # Ray itself would retry for minutes
    with pytest.raises(SpecError, match="give HOST:PORT"):
        executors.Ray("headnode").reach()


def test_an_exception_escaping_a_command_is_itself_not_masked(monkeypatch):
    """main() once named a class typer does not have in an except clause, so any exception that
    escaped a command (Ray's SIGTERM handler's SystemExit, a bug) became an AttributeError."""
    from stackwars import registry
    from stackwars.cli import main

    def boom():
        raise RuntimeError("boom")

    monkeypatch.setattr(registry, "workloads", boom)
    with pytest.raises(RuntimeError, match="boom"):
        main(["list"])


def test_choosing_submitit_leaves_this_process_logging_alone():
    """submitit configures logging on import (dictConfig, closing every handler already there:
    pytest's capture died of it); the driver imports it told not to, and its jobs are unchanged."""
    _need("submitit")
    code = ("import logging, os; from stackwars import executors; executors.make('submitit-local'); "
            "print(len(logging.getLogger('submitit').handlers), os.environ.get('SUBMITIT_LOG_LEVEL'))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env={k: v for k, v in os.environ.items() if k != "SUBMITIT_LOG_LEVEL"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "None"]


def test_slurm_job_arrays_give_the_serial_cells(serial, tmp_path):
    """The SLURM path end to end against a SLURM of one host (tests/fake_slurm: sbatch, srun,
    sacct, scancel as submitit calls them): one job array of the CPU cells, each job asking for
    a whole node, at most --max-jobs at once; the cells are the serial run's."""
    _need("submitit")
    fake = ROOT / "tests" / "fake_slurm"
    state = tmp_path / "slurm"
    state.mkdir()
    env = {"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}", "FAKE_SLURM_DIR": str(state),
           "FAKE_SLURM_PYTHON": sys.executable}
    db, shared = tmp_path / "r.db", tmp_path / "shared"
    r = _stackwars([*SWEEP, "--db", str(db), "--executor", "slurm", "--shared-dir", str(shared), "--max-jobs", "2",
                    "--slurm-partition", "cpu"], extra_env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    _, got = _cells(db)
    assert _outcome(got) == _outcome(serial)
    (job,) = json.loads((state / "jobs.json").read_text()).values()
    assert {"--exclusive", "--array=0-3%2", "--partition=cpu"} <= set(job["flags"])  # a whole node per CPU cell
    assert not any(f.startswith("--gpus") for f in job["flags"])
    assert set(job["tasks"].values()) == {"COMPLETED"}
