"""Fault injection through real worker processes: a crash, a hang, an OOM (raised, and
runaway allocation caught by the watchdog) are each recorded with the right status,
while the cells around them finish."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from stackwars import runner
from stackwars.harness import env as envmod
from stackwars.harness.isolation import run_task
from stackwars.records import MeasureConfig
from stackwars.store.results import Store

pytestmark = pytest.mark.slow


def _worker_pids(root: int | None = None):
    """Workers below ``root`` (default: this process; never another test's, which may run
    beside this one under pytest -n): spawned ones, and the children forked from a fork
    server (the servers themselves stay, for the next cells)."""
    cmds = {}
    for p in psutil.Process(root).children(recursive=True):
        try:
            cmds[p.pid] = (" ".join(p.cmdline()), p.ppid())
        except psutil.NoSuchProcess:
            pass
    server = "stackwars.harness.forkserver"
    return {pid for pid, (cmd, ppid) in cmds.items()
            if "stackwars.harness.worker" in cmd or (server in cmd and server in cmds.get(ppid, ("", 0))[0])}


def test_faulty_cells_get_their_status_and_the_run_goes_on(plugins_env, tmp_path, machine_probe):
    specs = runner.plan_cells(["fault"], ["crash", "ok", "hang", "oom", "alloc", "raise"], ["forward"],
                              ["torch-eager"])
    specs.insert(2, runner.plan_cells(["gemm"], ["tiny"], ["forward"], ["jax-jit"])[0])
    config = MeasureConfig(warmup=1, min_samples=3, min_time_s=0.0, timeout_s=15.0,
                           memory_limit_bytes=int(1.5 * 2**30))
    env = envmod.fingerprint(None, machine_probe)
    before = _worker_pids()
    with Store(tmp_path / "r.db") as store:
        run_id = runner.new_run(store, specs, config)
        done = runner.execute(store, run_id, specs, config, env)
        stored = {m.spec.key: m for _, m in store.cells(run_id)}
    status = {m.spec.preset if m.spec.workload == "fault" else m.spec.workload: m for m in done}
    assert status["crash"].status == "error" and "SIGSEGV" in status["crash"].error
    assert status["ok"].status == "ok"
    assert status["gemm"].status == "ok"
    assert status["hang"].status == "timeout" and "15 s" in status["hang"].error
    # the record says where the worker was when it was killed
    assert "during the first call" in status["hang"].error and status["hang"].settings["stage"] == "first call"
    assert status["oom"].status == "oom" and "MemoryError" in status["oom"].error
    assert status["alloc"].status == "oom" and "memory limit" in status["alloc"].error
    assert status["raise"].status == "error" and "simulated bug" in status["raise"].error
    assert len(stored) == len(specs)  # every cell, failed or not, is a stored result
    assert _worker_pids() <= before  # no worker (hung or crashed) outlives its cell


def test_unavailable_backend_is_unsupported_not_a_crash(tmp_path):
    spec = runner.plan_cells(["gemm"], ["tiny"], ["forward"], ["torch-cudagraphs"], devices=["cpu"])[0]
    m = runner.measure_one(spec, MeasureConfig(), probe={"torch": {"importable": True}}, peak=None)
    assert m.status == "unsupported" and "runs on cuda" in m.error
    spec = runner.plan_cells(["gemm"], ["tiny"], ["forward"], ["jax-jit"], devices=["cuda"])[0]
    m = runner.measure_one(spec, MeasureConfig(), probe={"jax": {"importable": True, "cuda": False,
                                                                   "cuda_reason": "no GPU"}}, peak=None)
    assert m.status == "unsupported" and "no GPU" in m.error
    m = runner.measure_one(spec, MeasureConfig(), probe={"jax": {"importable": False, "error": "No module"}}, peak=None)
    assert m.status == "unsupported" and "not installed" in m.error


def test_orphaned_worker_exits(plugins_env, tmp_path):
    """A parent killed with SIGKILL cannot clean up; its hung worker must not run on."""
    code = ("import sys; from stackwars.harness.isolation import run_task; "
            "from stackwars.records import CellSpec, MeasureConfig; "
            "s = CellSpec('fault', 'hang', 'forward', 'torch-eager').to_dict(); "
            "run_task({'target': 'stackwars.harness.measure:measure_cell', "
            "'kwargs': {'spec': s, 'config': MeasureConfig().to_dict()}, 'process': {'device': 'cpu'}}, 600)")
    parent = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.time() + 60
    while not _worker_pids(parent.pid) and time.time() < deadline:
        time.sleep(0.2)
    orphans = {psutil.Process(pid) for pid in _worker_pids(parent.pid)}  # the parent's workers, before it dies
    assert orphans, "the worker never started"
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 15
    while any(p.is_running() for p in orphans) and time.time() < deadline:  # is_running: the same process
        time.sleep(0.2)
    assert not any(p.is_running() for p in orphans)


def test_interrupted_run_keeps_finished_cells_and_resumes(plugins_env, tmp_path):
    db = tmp_path / "r.db"
    cmd = [sys.executable, "-m", "stackwars", "run", "fault", "-p", "ok", "-p", "sleep", "-b", "torch-eager",
           "--min-time", "0", "--min-samples", "2", "--processes", "1", "--db", str(db)]
    # Ctrl-C's default action in the child, however pytest was started (a shell's background job
    # inherits SIGINT ignored, and Python then never raises KeyboardInterrupt)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120
    count = 0
    while time.time() < deadline and proc.poll() is None:
        if db.exists():
            try:
                count = sqlite3.connect(db).execute("SELECT COUNT(*) FROM cells").fetchone()[0]
            except sqlite3.OperationalError:
                count = 0
            if count == 1:
                break
        time.sleep(0.1)
    assert count == 1, proc.communicate()[0] if proc.poll() is not None else "first cell never stored"
    time.sleep(1.0)  # the second (sleeping) cell is now in flight
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    assert "--resume" in output
    with Store(db) as store:
        run_id = store.latest_run_id()
        assert [s.preset for s in store.missing(run_id)] == ["sleep"]
    done = subprocess.run([sys.executable, "-m", "stackwars", "run", "--resume", run_id, "--db", str(db)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with Store(db) as store:
        assert store.missing(run_id) == []
        cells = store.cells(run_id)
    assert sorted(m.spec.preset for _, m in cells) == ["ok", "sleep"]
    assert all(m.status == "ok" for _, m in cells)
    assert os.path.exists(db)


def test_run_task_reports_a_dead_worker_with_its_signal(plugins_env):
    from stackwars.records import CellSpec
    spec = CellSpec("fault", "crash", "forward", "torch-eager").to_dict()
    out = run_task({"target": "stackwars.harness.measure:measure_cell",
                    "kwargs": {"spec": spec, "config": MeasureConfig().to_dict()}, "process": {"device": "cpu"}}, 120)
    assert out.status == "error" and out.result is None
    assert "SIGSEGV" in out.error


def test_a_worker_whose_parent_died_before_it_started_exits(tmp_path):
    """The parent names itself in the environment: a worker handed to init while its
    interpreter was still starting (the parent killed at once) must not run on forever
    (one did, from this very test's predecessor, comparing getppid() against init's pid)."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    task, result = tmp_path / "task.json", tmp_path / "result.json"
    task.write_text('{"target": "time:sleep", "kwargs": {}, "process": null}')
    env = {**os.environ, "STACKWARS_PARENT_PID": str(dead.pid)}
    done = subprocess.run([sys.executable, "-m", "stackwars.harness.worker", str(task), str(result)], env=env,
                          timeout=60, capture_output=True)
    assert done.returncode == 3 and not result.exists()


def test_the_watchdog_lists_a_workers_descendants_once_a_second_and_reads_their_memory_each_poll(monkeypatch):
    """Listing descendants reads all of /proc (2.3 ms a poll on the 2-core VM: 5% of a CPU
    taken from the timed cell by its own parent); the memory of those listed is read at every
    poll, and a child started since is counted from the next listing."""
    from stackwars.harness.isolation import TreeRSS

    now = [0.0]
    me = psutil.Process()
    lists = []
    real_children = psutil.Process.children

    def children(self, recursive=False):
        lists.append(now[0])
        return real_children(self, recursive=recursive)

    watch = TreeRSS(me, clock=lambda: now[0])
    monkeypatch.setattr(psutil.Process, "children", children)
    alone = [watch.read() for _ in range(20)]  # twenty polls within the second
    child = subprocess.Popen([sys.executable, "-c", "b = bytearray(200 * 2**20); import time; time.sleep(30)"])
    try:
        deadline = time.time() + 30
        while psutil.Process(child.pid).memory_info().rss < 150 * 2**20 and time.time() < deadline:
            time.sleep(0.05)
        before = watch.read()  # not listed yet
        now[0] += TreeRSS.REFRESH_S
        after = watch.read()
    finally:
        child.kill()
        child.wait()
    assert lists == [0.0, TreeRSS.REFRESH_S]
    assert min(alone) > 0 and before < min(alone) + 100 * 2**20
    assert after - before > 150 * 2**20  # the child's 200 MiB, from the listing after it started


_INLINE_JAX = """
import json, os, shutil, warnings
import jax, jax.numpy as jnp
from stackwars.backends.jax_common import configure_jax
from stackwars.harness import tmp
cell = tmp.mkdtemp("caches")
configure_jax({"cache_dir": cell})
jax.jit(lambda x: x * 2)(jnp.ones(3)).block_until_ready()
shutil.rmtree(cell)  # the run that made it ended
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    applied = configure_jax({})  # the next inline cell, without a folder of its own
    jax.jit(lambda x: x + 3)(jnp.ones(3)).block_until_ready()
mine = os.path.join(os.environ["HOLD"], "mine")
os.makedirs(mine)
jax.config.update("jax_compilation_cache_dir", mine)
shutil.rmtree(mine)
kept = configure_jax({})["jax_compilation_cache_dir"]
print(json.dumps({"dir": applied["jax_compilation_cache_dir"], "kept": kept,
                  "warned": [str(w.message)[:200] for w in caught if "persistent" in str(w.message)]}))
"""


_INLINE_RUN = """
import json, os, sys, warnings
import jax, jax.numpy as jnp
from stackwars import runner
from stackwars.harness import env as envmod
from stackwars.records import MeasureConfig
from stackwars.store.results import Store
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)  # the process's own options
before = {k: getattr(jax.config, k) for k in ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")}
specs = runner.plan_cells(["gemm"], ["tiny"], ["forward"], ["jax-jit"])
config = MeasureConfig(warmup=1, min_samples=3, min_time_s=0.0)
probe = runner.probe_machine(inline=True)
with Store(sys.argv[1]) as store:
    run_id = runner.new_run(store, specs, config)
    (m,) = runner.execute(store, run_id, specs, config, envmod.fingerprint(None, probe), inline=True)
cell = m.settings["applied"]["jax_compilation_cache_dir"]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    jax.jit(lambda x: x * 5)(jnp.ones(7)).block_until_ready()
after = {k: getattr(jax.config, k) for k in before}
print(json.dumps({"status": m.status, "cell": cell, "before": before, "after": after,
                  "warned": [str(w.message)[:200] for w in caught if "persistent" in str(w.message)]}))
"""


def test_an_inline_run_gives_the_process_its_own_cache_options_back(tmp_path):
    """A JAX cell measured inline points JAX's persistent cache at the cell's folder; after it, the
    process's own options are back: the suite's in-process compiles after an inline run went on
    writing into that run's removed folder (113 warnings in one suite run, nothing cached)."""
    env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "own"), "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", _INLINE_RUN, str(tmp_path / "r.db")], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["status"] == "ok" and got["cell"] and got["cell"] != str(tmp_path / "own")  # the cell had its own
    assert got["before"] == {"jax_compilation_cache_dir": str(tmp_path / "own"),
                             "jax_persistent_cache_min_compile_time_secs": 0.5}
    assert got["after"] == got["before"] and got["warned"] == []


@pytest.mark.parametrize("own", (True, False), ids=("the process's own folder", "none"))
def test_an_inline_cell_without_a_cache_folder_does_not_write_into_an_earlier_cells_removed_one(tmp_path, own):
    """--inline measures many cells in one process; JAX's persistent cache, once pointed at a
    cell's folder, stayed there after that run removed it, and every later executable was a
    failed write and a warning (about 250 a test session). A folder stackwars made and removed
    is let go, for the process's own (JAX_COMPILATION_CACHE_DIR) where it has one: the test
    session's shared cache was read by no in-process cell after the first run measured inline;
    one the user chose is left as it is."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    if own:
        env["JAX_COMPILATION_CACHE_DIR"] = str(tmp_path / "own")
    done = subprocess.run([sys.executable, "-c", _INLINE_JAX], capture_output=True, text=True, timeout=300,
                          env={**env, "HOLD": str(tmp_path), "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["dir"] == (str(tmp_path / "own") if own else None) and got["warned"] == []
    assert got["kept"] == str(tmp_path / "mine")
