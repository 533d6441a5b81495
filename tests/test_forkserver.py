"""Cell-processes forked from a preloading server (harness/forkserver.py): each a distinct
fresh process whose device backend is made after the fork, with its own compile caches; a
cell's first process cold and its later ones saying whether theirs were warm; and a server
or child killed losing no finished cell."""

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from stackwars import runner, stats
from stackwars.runner import servers
from stackwars.harness import env as envmod
from stackwars.harness import forkserver, isolation
from stackwars.harness.settings import environment
from stackwars.records import MeasureConfig
from stackwars.report import tables
from stackwars.verdict import figures
from stackwars.store.results import Store, rows
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

QUICK = MeasureConfig(warmup=1, min_samples=3, min_time_s=0.05, timeout_s=120.0)


PROBE: dict = {}  # the session's machine probe (conftest.machine_probe), for _run and the servers' start


@pytest.fixture(autouse=True)
def _probe(machine_probe):
    PROBE.update(machine_probe)


def _run(tmp_path, specs, config=QUICK, name="r.db"):
    env = envmod.fingerprint(None, PROBE)
    with Store(tmp_path / name) as store:
        run_id = runner.new_run(store, specs, config)
        runner.execute(store, run_id, specs, config, env)
        return {m.spec.key: m for _, m in store.cells(run_id)}, rows(store, run_id)


def test_each_cell_process_is_a_fresh_fork_whose_device_is_made_after_it(tmp_path):
    specs = runner.plan_cells(["gemm"], ["tiny"], ["forward"], ["torch-eager", "jax-jit"], repeats=2)
    cells, _ = _run(tmp_path, specs)
    assert len(cells) == 4 and all(m.status == "ok" for m in cells.values())
    origins = {k: m.settings["process"]["origin"] for k, m in cells.items()}
    for key, o in origins.items():
        assert o["how"] == "forked from a preloading server", key
        before = o["before_fork"]
        # nothing of a device existed in the server: no CUDA context, no XLA client, one Python thread
        assert before["cuda_initialised"] is False and before["jax_backends"] == [] and before["python_threads"] == 1
        assert o["pid"] != o["server_pid"] and o["pid"] != os.getpid()
        assert "torch" in o["preloaded"] or "jax" in o["preloaded"]
    # every cell-process its own process; a cell's second process from another server (generation)
    assert len({o["pid"] for o in origins.values()}) == 4
    for b in ("torch-eager", "jax-jit"):
        first, second = (origins[k] for k in sorted(origins) if f"/{b}/" in k)
        assert first["server_pid"] != second["server_pid"] and first["generation"] != second["generation"]
    # the device was initialised in the child, after the fork: JAX's client made there
    jit = next(m for k, m in cells.items() if "/jax-jit/" in k)
    assert jit.settings["device_init"] and jit.timeline["device_init_s"] > 0
    # its own programs compiled without autotuning (jax_common.INIT_COMPILE_OPTIONS: XLA refuses an
    # option it does not know, and the initialisation then compiles without it: a misspelt one fails here)
    assert jit.settings["device_init"]["compile_options"] == {"xla_gpu_autotune_level": 0}
    assert jit.timeline["import_s"] < 0.5  # the framework came with the server, not imported again


def test_the_inductor_cache_folder_takes_effect_per_cell(tmp_path):
    """TORCHINDUCTOR_CACHE_DIR is set in each child after the fork: two cells of one server each
    compile into their own folder."""
    specs = runner.plan_cells(["gemm", "ffn"], ["tiny"], ["forward"], ["torch-compile"])
    cells, _ = _run(tmp_path, specs)
    ms = list(cells.values())
    assert all(m.status == "ok" for m in ms)
    assert ms[0].settings["process"]["origin"]["server_pid"] == ms[1].settings["process"]["origin"]["server_pid"]
    dirs = [m.settings["cache"]["dir"] for m in ms]
    assert dirs[0] != dirs[1]
    for m in ms:
        assert m.settings["cache"]["mode"] == "cold"
        assert m.settings["cache"]["contents_after"]["inductor"] > 0, m.settings["cache"]
        # Inductor's check of the machine's vector instruction set: in the machine's folder, not the cell's
        checked = m.settings["backend"]["inductor_vec_isa"]["checked"]
        assert checked.startswith("in ") and "inductor-vec-isa, built once a machine" in checked
        assert m.settings["cache"]["dir"] not in checked


def test_first_process_cold_later_ones_warm_from_the_same_program_and_first_call_from_cold(tmp_path):
    """A cell's first process starts with an empty cache folder of the cell's own, its second
    finds it warm (Inductor's FX graphs, JAX's executables) and runs the program the first
    compiled: the same fingerprint whether XLA compiled it or JAX read it back (a read-back
    executable numbers its source locations in another order) and whether Inductor generated it
    or loaded it. First-call figures come from the cold process alone; steady state from both.
    The warm torch-compile process compiles with one thread (no compile pool beside its first
    calls); the cold one with Inductor's own number."""
    specs = runner.plan_cells(["ffn"], ["tiny"], ["forward"], ["torch-compile", "jax-jit"], repeats=2)
    cells, flat = _run(tmp_path, specs)
    shas = {}
    for b in ("torch-compile", "jax-jit"):
        first, second = (cells[k] for k in sorted(cells) if f"/{b}/" in k)
        assert first.status == second.status == "ok", (first.error, second.error)
        assert first.settings["cache"]["mode"] == "cold" and first.settings["cache"]["entries_before"] == 0
        assert second.settings["cache"]["mode"] == "warm" and second.settings["cache"]["entries_before"] > 0
        assert second.settings["cache"]["dir"] == first.settings["cache"]["dir"]
        shas[b] = [m.compile.extra["program_sha"] for m in (first, second)]
        assert shas[b][0] and shas[b][0] == shas[b][1], (b, shas[b])
        # first-call figures from the cold process alone; steady state from both
        procs = [r for r in flat if r["backend"] == b]
        got = figures._figures(procs, stats.NOISE_THRESHOLD)
        assert got["first_call_cache"] == "cold" and got["first_call_processes"] == 1
        cold = next(r for r in procs if r["cache"] == "cold")
        assert got["first_call_s"] == pytest.approx(cold["first_call_s"])
        assert len(got["process_medians"]) == 2
        if b == "torch-compile":
            threads = [m.settings["applied"]["inductor_compile_threads"] for m in (first, second)]
            default = threads[0]["inductor_default"]
            assert threads[0] == {"value": default, "inductor_default": default}, threads
            assert threads[1]["value"] == 1 and threads[1]["inductor_default"] == default, threads
            assert ("why" in threads[1]) == (default > 1), threads
            # the warm process loaded what the cold one compiled
            assert second.compile.extra["fx_graph_cache"].get("fxgraph_cache_hit", 0) >= 1, second.compile.extra
    # a different program has a different fingerprint
    gemm, _ = _run(tmp_path, runner.plan_cells(["gemm"], ["tiny"], ["forward"], ["jax-jit"]), name="gemm.db")
    assert next(iter(gemm.values())).compile.extra["program_sha"] != shas["jax-jit"][0]
    # every process cold where asked: Inductor's own threads in each
    every = MeasureConfig(**{**QUICK.to_dict(), "cold_every_process": True})
    cold_cells, _ = _run(tmp_path, runner.plan_cells(["gemm"], ["tiny"], ["forward"], ["torch-compile"], repeats=2),
                         every, "cold.db")
    assert {m.settings["cache"]["mode"] for m in cold_cells.values()} == {"cold"}
    assert all("why" not in m.settings["applied"]["inductor_compile_threads"] for m in cold_cells.values())


_ISA = """
import json, os
from torch._inductor import cpp_builder, cpu_vec_isa
built = []
real = cpp_builder.CppBuilder.build
cpp_builder.CppBuilder.build = lambda self: (built.append(1), real(self))[1]
said = []
if not os.environ.get("PLAIN"):  # else: what Inductor picks by itself, in its cache folder
    from stackwars.backends.torch_common import vec_isa_check_per_machine
    said = [vec_isa_check_per_machine(), vec_isa_check_per_machine()]
isa = str(cpu_vec_isa.pick_vec_isa())  # as Inductor asks at its first CPU kernel
print(json.dumps({"vec_isa": isa, "said": said, "built": len(built), "env": os.environ["TORCHINDUCTOR_CACHE_DIR"]}))
"""


def test_inductors_vector_isa_check_is_built_once_a_machine_outside_the_cells_cold_folder(tmp_path):
    """Inductor builds a test program per candidate vector instruction set with g++ and loads
    it, once a cache folder (3.8 s in an empty one on the 2-core VM, 0.5-0.7 s to load). A
    cell's cold folder is its own: the check is pointed at stackwars's cache folder instead,
    built by the first process and only loaded by the next, and picks what Inductor picks by
    itself; the cell's folder gets nothing of it."""
    def run(**env):
        done = subprocess.run([sys.executable, "-c", _ISA], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "STACKWARS_CACHE_DIR": str(tmp_path / "sw"), **env})
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    cell = str(tmp_path / "cell")
    first = run(TORCHINDUCTOR_CACHE_DIR=cell)
    second = run(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "another-cell"))
    plain = run(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "plain"), PLAIN="1")
    if plain["vec_isa"] == "INVALID_VEC_ISA":
        pytest.skip("no vector instruction set Inductor can build for here: nothing to check")
    assert first["built"] >= 1 and second["built"] == 0  # g++ once a machine, then the programs are loaded
    assert first["vec_isa"] == second["vec_isa"] == plain["vec_isa"]  # the choice Inductor makes by itself
    machine = tmp_path / "sw" / "inductor-vec-isa"
    assert first["said"] == [{"checked": f"in {machine}, built once a machine, loaded on the first compile that "
                                         f"needs it"}] * 2
    assert first["env"] == cell  # the cell's own folder again for its compiles
    assert not os.path.exists(cell) or not os.listdir(cell)  # nothing of the check in it
    assert os.listdir(machine)


def test_servers_differ_by_what_their_children_read_at_import():
    base, _ = environment(None, "cpu", "/c1", {})
    other_cache, _ = environment(None, "cpu", "/c2", {})
    flags, _ = environment(None, "cpu", "/c1", {"XLA_FLAGS": "--xla_gpu_autotune_level=0"})
    one, _ = environment(1, "cpu", "/c1", {})
    key = lambda e, g=0: forkserver.server_key(("jax",), e, g)  # noqa: E731
    assert key(base) == key(other_cache)  # the cache folder is read after the fork
    assert key(base) == key({**base, "STACKWARS_PLUGINS": "mine.py", "PYTEST_CURRENT_TEST": "t (call)",
                             "STACKWARS_CACHE_DIR": "/mine", "COLUMNS": "100"})
    # what the frameworks write into a process's environment as it works (a torch.compile'd call, Ray's
    # import: a test worker's earlier tests, a user's notebook), read by no server
    assert key(base) == key({**base, "_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR": "140002491812896",
                             "RAY_CLIENT_MODE": "0"})
    assert key(base) != key(flags) and key(base) != key(one) and key(base) != key(base, 1)


def test_stackwars_reads_no_environment_variable_at_import():
    """Servers are keyed without stackwars's own variables (``forkserver.read_after_fork``): sound
    only while no module of it reads one where a server would, at import, outside a function."""
    import ast
    from pathlib import Path

    import stackwars

    found = []
    for path in sorted(Path(stackwars.__file__).parent.rglob("*.py")):
        def visit(node, in_function):
            for child in ast.iter_child_nodes(node):
                inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                if not inside and isinstance(child, ast.Attribute) and child.attr in ("environ", "getenv"):
                    found.append(f"{path.name}:{child.lineno}")
                visit(child, inside)
        visit(ast.parse(path.read_text()), False)
    assert found == []


def test_tasks_that_differ_in_their_plugins_or_test_share_a_server_and_each_child_loads_its_own(plugins_env,
                                                                                                   monkeypatch):
    """The registry's plugin list and pytest's name of the running test are read in the child
    only: tasks that differ in nothing else fork from one server (every test of the suite started
    servers of its own while pytest's name was in the key), and each child has its own plugins
    and name, not the server's first task's."""
    def task(plugins: str) -> dict:
        return {"target": "tests.plugins.registered:names",
                "process": {"device": "cpu", "preload": ["stackwars.harness.worker"], "generation": GENERATION + 1,
                            "env": {"STACKWARS_PLUGINS": plugins}}}

    monkeypatch.setenv("PYTEST_CURRENT_TEST", "first")
    first = isolation.run_task(task("tests.plugins.faults"), timeout_s=60)
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "second")
    second = isolation.run_task(task("tests.plugins.faults,tests.plugins.slow_parts"), timeout_s=60)
    assert first.status == second.status == "ok", (first.error, second.error)
    origins = [o.result["process_settings"]["origin"] for o in (first, second)]
    assert all(o["how"] == "forked from a preloading server" for o in origins), origins
    assert origins[0]["server_pid"] == origins[1]["server_pid"]
    assert "fault" in first.result["workloads"] and "slow-parts" not in first.result["workloads"]
    assert {"fault", "slow-parts"} <= set(second.result["workloads"])
    assert [o.result["test"] for o in (first, second)] == ["first", "second"]
    assert second.result["plugins"] == "tests.plugins.faults,tests.plugins.slow_parts"


GENERATION = 917  # the fault tasks' own fork server: no run of these tests uses this process number


def _task(mode):
    from stackwars.records import CellSpec

    return {"target": "stackwars.harness.measure:measure_cell",
            "kwargs": {"spec": CellSpec("fault", mode, "forward", "torch-eager").to_dict(),
                       "config": QUICK.to_dict()},
            "process": {"device": "cpu", "preload": ["stackwars.harness.measure"], "generation": GENERATION}}


def _kill(target: str, found: list, handed: list) -> None:
    """Kill the task's forked child (``child``) or its server (``server``) once the client holds
    the child (``handed``: the pids ``Server.fork`` returned). A server killed between its fork
    and its answer is one that did not answer: the client spawns the task instead, rightly, and
    that spawned worker would hang on. (The hang the suite saw under load was another: a child
    that first ran after its server was killed watched init's pid; fixed, and tested below.) Only the server of
    ``_task``'s generation, never another (idle servers started ahead by earlier runs in this
    worker) nor another test's."""
    deadline = time.time() + 60
    while time.time() < deadline:
        servers = [s for key, s in list(forkserver._servers.items()) if key[2] == GENERATION]
        for server in servers:
            try:
                kids = [k for k in psutil.Process(server.proc.pid).children() if k.pid in handed]
            except psutil.NoSuchProcess:
                continue
            if kids:
                victim = kids[0] if target == "child" else psutil.Process(server.proc.pid)
                found.append(victim.pid)
                victim.kill()
                return
        time.sleep(0.1)


@pytest.fixture
def handed(monkeypatch) -> list[int]:
    """The pids ``Server.fork`` handed to the client in this test (``_kill`` waits for one)."""
    pids: list[int] = []
    real_fork = forkserver.Server.fork

    def fork(self, *args, **kwargs):
        child = real_fork(self, *args, **kwargs)
        if child is not None:
            pids.append(child.pid)
        return child

    monkeypatch.setattr(forkserver.Server, "fork", fork)
    return pids


def test_a_killed_child_or_server_is_an_error_and_the_next_task_runs(plugins_env, handed):
    import threading

    for target in ("child", "server"):
        found = []
        t = threading.Thread(target=_kill, args=(target, found, handed))
        t.start()
        o = isolation.run_task(_task("hang"), timeout_s=60)
        t.join()
        assert found, target
        assert o.status == "error" and "died without a result" in o.error and o.wall_s < 30, (target, o.error)
        again = isolation.run_task(_task("ok"), timeout_s=60)
        assert again.status == "ok", again.error


def test_a_child_whose_server_is_killed_before_the_child_first_runs_still_ends(plugins_env, handed):
    """The child learns its server's pid from the server, not from getppid() once it runs: a
    server killed in between (a loaded machine) has handed the child to init already, and a
    child watching init's pid would hang on until the cell's timeout."""
    import threading

    task = _task("hang")
    task["process"]["preload"] = ["tests.plugins.late_child", *task["process"]["preload"]]
    found: list[int] = []
    t = threading.Thread(target=_kill, args=("server", found, handed))
    t.start()
    o = isolation.run_task(task, timeout_s=60)
    t.join()
    assert found
    assert o.result is None and o.status == "error" and "died without a result" in o.error, o.error
    assert o.wall_s < 30, o.wall_s


def test_a_server_that_dies_before_it_answers_leaves_the_task_to_a_spawned_worker(plugins_env):
    """The server is stopped before the request reaches it, then killed while the client waits
    for its answer: the task runs in a spawned worker, whose record says why, and the next
    task gets a new server of the same generation."""
    import threading

    first = isolation.run_task(_task("ok"), timeout_s=60)  # the generation's server, running
    assert first.status == "ok", first.error
    pid = first.result["process_settings"]["origin"]["server_pid"]
    (server,) = [s for s in forkserver._servers.values() if s.proc.pid == pid]
    os.kill(server.proc.pid, signal.SIGSTOP)  # it cannot fork, nor answer
    killer = threading.Timer(1.0, os.kill, (server.proc.pid, signal.SIGKILL))
    killer.start()
    try:
        o = isolation.run_task(_task("ok"), timeout_s=60)
    finally:
        killer.join()
    assert o.status == "ok", o.error
    origin = o.result["process_settings"]["origin"]
    assert origin["how"] != "forked from a preloading server", origin
    assert origin["spawned_because"] == "the fork server did not answer", origin
    again = isolation.run_task(_task("ok"), timeout_s=60)
    assert again.result["process_settings"]["origin"]["how"] == "forked from a preloading server"
    assert again.result["process_settings"]["origin"]["server_pid"] != server.proc.pid


def test_killing_the_server_during_a_run_loses_no_finished_cell(tmp_path):
    db = tmp_path / "k.db"
    cmd = [sys.executable, "-m", "stackwars", "run", "gemm", "mha", "--preset", "tiny", "--phase", "forward",
           "-b", "torch-eager", "--processes", "1", "--max-processes", "1", "--min-time", "0.05", "--db", str(db)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed = None
    deadline = time.time() + 120
    while killed is None and time.time() < deadline and proc.poll() is None:
        # once the first cell is stored, kill the server of the second
        if db.exists():
            import sqlite3
            try:
                n = sqlite3.connect(db).execute("SELECT COUNT(*) FROM cells").fetchone()[0]
            except sqlite3.Error:
                n = 0
            if n >= 1:
                for p in psutil.Process(proc.pid).children(recursive=True):
                    if "stackwars.harness.forkserver" in " ".join(p.cmdline()):
                        killed = p.pid
                        p.kill()
                        break
        time.sleep(0.05)
    out, _ = proc.communicate(timeout=300)
    with Store(db) as store:
        cells = {m.spec.workload: m for _, m in store.cells()}
    assert cells["gemm"].status == "ok", out  # finished before the kill: kept
    assert set(cells) == {"gemm", "mha"}, out  # the run went on and stored the other cell too
    assert killed is not None


def test_settings_read_at_import_take_effect_per_cell(tmp_path):
    """Thread counts, XLA flags and JAX's platform are read when the framework is imported, in
    the server: a run with other values gets servers of its own, and each cell reads its own."""
    from stackwars.harness.settings import available_cpus

    if len(available_cpus()) < 2:
        pytest.skip("needs two CPUs to tell one thread from all of them")
    one = MeasureConfig(**{**QUICK.to_dict(), "threads": 1})
    specs = runner.plan_cells(["gemm"], ["tiny"], ["forward"], ["torch-eager", "jax-jit"],
                              options={"xla_autotune_level": 0})
    cells, _ = _run(tmp_path, specs, one, "one.db")
    torch_cell = next(m for k, m in cells.items() if "/torch-eager/" in k)
    jax_cell = next(m for k, m in cells.items() if "/jax-jit/" in k)
    assert torch_cell.settings["applied"]["torch_num_threads"] == 1
    assert torch_cell.settings["process"]["cpu_affinity"] == [available_cpus()[0]]
    assert "--xla_gpu_autotune_level=0" in jax_cell.settings["applied"]["xla_flags"]
    assert jax_cell.settings["applied"]["jax_platforms"] == "cpu"
    cells, _ = _run(tmp_path, runner.plan_cells(["gemm"], ["tiny"], ["forward"], ["torch-eager", "jax-jit"]),
                    name="all.db")
    torch_all = next(m for k, m in cells.items() if "/torch-eager/" in k)
    jax_all = next(m for k, m in cells.items() if "/jax-jit/" in k)
    assert torch_all.settings["applied"]["torch_num_threads"] == len(available_cpus())
    assert "autotune" not in jax_all.settings["applied"]["xla_flags"]
    # other values at import, other servers
    assert (torch_all.settings["process"]["origin"]["server_pid"]
            != torch_cell.settings["process"]["origin"]["server_pid"])


def test_a_process_age_agrees_with_the_clock_its_parent_read_around_the_fork():
    """The timeline's start-up is the process's age when its cell begins. psutil's create_time()
    rests on the boot time in whole seconds, so every age was off by the same fraction of a
    second (a child 0.67 s old as it was forked, on one VM). The child was made between the
    parent's clock readings before and after fork(): its age now lies between the two, to the
    clock tick (10 ms) it is counted in; the fork of a large test process may itself take a
    while on a busy machine, which only widens that interval."""
    import json
    import os
    import time

    from stackwars.harness.measure import since_process_start

    read, write = os.pipe()
    told_r, told_w = os.pipe()
    before = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: its age at once and after a sleep, each beside the monotonic clock
        try:
            os.close(told_w)  # else its own copy keeps the pipe from ever ending
            os.close(read)
            ages = []
            for pause in (0.0, 0.3):
                time.sleep(pause)
                ages.append((since_process_start(), time.monotonic()))
            with os.fdopen(told_r) as f:
                after = float(f.read())
            os.write(write, json.dumps({"ages": ages, "after": after}).encode())
        finally:
            os._exit(0)
    after = time.monotonic()
    os.close(write)
    os.close(told_r)
    with os.fdopen(told_w, "w") as f:
        f.write(repr(after))
    with os.fdopen(read) as f:
        got = json.loads(f.read())
    os.waitpid(pid, 0)
    tick = 1 / os.sysconf("SC_CLK_TCK")
    for age, now in got["ages"]:
        assert now - after - tick - 0.005 <= age <= now - before + tick + 0.005, (got, before, after)
    assert got["ages"][1][0] - got["ages"][0][0] >= 0.29


def test_the_servers_of_a_process_number_start_together_before_its_first_cell(tmp_path, monkeypatch):
    """Each cell-process used to wait for its server's imports alone (1.9-2.6 s for PyTorch on
    the 2-core VM, twelve times in the main job); servers now start together, between cells,
    before the first cell of their process number (with the next numbers' where they fit), and
    the run's account of time says what that took, since no worker's wall time holds it."""
    from stackwars import executors

    specs = runner.plan_cells(["gemm"], ["tiny"], ["forward"], ["torch-eager", "jax-jit"], repeats=2)
    for cap, batches_expected in ((forkserver.MAX_SERVERS, [{0, 1}]), (2, [{0}, {1}])):
        monkeypatch.setattr(forkserver, "MAX_SERVERS", cap)
        forkserver.close_all()  # servers of earlier runs in this worker would be reused, not started
        cells, flat = _run(tmp_path, specs, name=f"ahead-{cap}.db")
        origins = {k: m.settings["process"]["origin"] for k, m in cells.items()}
        assert all(m.status == "ok" for m in cells.values())
        assert not any(o["started_the_server"] for o in origins.values())  # no cell waited for a server
        batches = {k: o["server_started_ahead"] for k, o in origins.items() if o.get("server_started_ahead")}
        assert len(batches) == 4  # one record for each server: two backends, two process numbers
        by_batch: dict = {}
        for key, b in batches.items():
            by_batch.setdefault(b["batch"], set()).add(cells[key].spec.repeat)
            assert b["servers"] == 4 // len(batches_expected) and b["failed"] == 0 and b["seconds"] > 0
        # every server up at once where they fit; else a batch a process number, never more than the cap
        assert sorted(by_batch.values(), key=min) == batches_expected, (cap, by_batch)
        line = tables.overhead_summary(flat)
        assert f"(4 servers in {len(batches_expected)} batches)" in line, line
        assert "fork servers started ahead of their cells" in line
    # servers that run already are not started again
    monkeypatch.setattr(forkserver, "MAX_SERVERS", 6)
    assert runner.start_servers_ahead(specs[-2:], QUICK, PROBE, executors.here) is None


def test_a_cuda_cells_reference_is_computed_while_its_cells_servers_start_and_evicts_none(tmp_path, monkeypatch):
    """A CUDA cell computes its float64 reference in a worker of its own first. On the H200
    gpt2's took 11.6 s before its first cell, after the 14.7 s its servers took to start. It is
    now computed while they start, in a spawned worker (the servers' lock is theirs meanwhile),
    and recorded by the first cell of its key; no reference workers' server is started, so none
    of the cells' is evicted (its own, started as its worker came, once evicted one of the
    batch: 7.9 s waited again in a cold process on the H200). Here on the CPU, a gpt2 cell
    stands for a CUDA one (its reference wanted in its own worker)."""
    from stackwars.harness import reference as refmod
    from stackwars.harness import worker as workermod

    real = refmod.own_worker_wanted
    monkeypatch.setattr(refmod, "own_worker_wanted", lambda wl, device, mode, directory:
                        real(wl, "cuda", mode, directory))
    monkeypatch.setattr(forkserver, "MAX_SERVERS", 2)  # a process number's two: full without a reference server
    forkserver.close_all()
    def timed(real, spans):
        def call(*args, **kwargs):
            t0 = time.monotonic()
            try:
                return real(*args, **kwargs)
            finally:
                spans.append((t0, time.monotonic(), args[5:6] == (True,)))  # reference_first's spawn
        return call

    spans: list = []
    batches: list = []
    monkeypatch.setattr(servers, "reference_first", timed(servers.reference_first, spans))
    monkeypatch.setattr(forkserver, "start_ahead", timed(forkserver.start_ahead, batches))
    specs = runner.plan_cells(["gpt2"], ["tiny"], ["forward"], ["torch-eager", "jax-jit"], repeats=2)
    cells, flat = _run(tmp_path, specs)
    assert all(m.status == "ok" for m in cells.values()), [m.error for m in cells.values()]
    origins = {k: m.settings["process"]["origin"] for k, m in cells.items()}
    assert not any(o["started_the_server"] for o in origins.values()), origins  # no cell waited for a server
    assert all("stackwars.harness.reference" not in o["preloaded"] for o in origins.values())
    # a model's JAX cells come from servers that imported its JAX twin (and flax.nnx with it: 0.25 s
    # a process on the idle 2-core VM), its PyTorch cells from the PyTorch servers the micro-ops use
    for k, o in origins.items():
        assert ("stackwars.workloads.models.jax_nets" in o["preloaded"]) == ("/jax-jit/" in k), (k, o["preloaded"])
    micro = runner.process_request(runner.plan_cells(["gemm"], ["tiny"], ["forward"], ["jax-jit"])[0],
                                   MeasureConfig(), None, None)
    assert "stackwars.workloads.models.jax_nets" not in micro["preload"]
    first_key = specs[0].key
    worker = cells[first_key].settings["reference_worker"]
    assert worker["source"] == "computed" and worker["status"] == "ok", worker
    assert worker["origin"]["how"] == workermod.SPAWNED  # not a fork: the servers were starting
    assert worker["computed"] == "while the fork servers started, before the cells"
    others = [cells[k].settings["reference_worker"] for k in cells if k != first_key]
    assert all(w["source"] == "already in the run's cache" for w in others), others
    # it ran while the first batch of servers started: the two spans overlap
    (spawned,) = [(a, b) for a, b, spawn in spans if spawn]
    assert spawned[0] < batches[0][1] and batches[0][0] < spawned[1], (spawned, batches)
    assert servers._EARLY == {}  # taken by the cell that records it
    line = tables.overhead_summary(flat)
    assert "(4 servers in 2 batches)" in line, line
    # the account counts only what the reference took beyond the servers' start it ran beside
    (row,) = [r for r in flat if r["reference_worker_s"] is not None]
    assert 0.0 <= row["reference_worker_extra_s"] == worker["after_servers_s"] < row["reference_worker_s"], row
    assert "1 computed in workers of their own" in line and "more than the fork servers' start they ran beside" \
        in line, line


def _fake_cuda_server(*preload: str) -> forkserver.Server:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    server = forkserver.Server(("tests.plugins.fake_cuda", *preload), env)
    server.ready(timeout=120)
    return server


def test_a_device_count_asked_while_preloading_is_answered_without_the_driver():
    """Inductor asks torch.cuda.is_available() as it is imported; on the H200 that touched the
    CUDA driver in the server, and every forked torch-compile cell failed its first CUDA call.
    The server answers such a query from NVML, says who asked, and its children find CUDA usable."""
    server = _fake_cuda_server("tests.plugins.asks_cuda")
    try:
        assert server.info is not None, server.error
        state = server.info["before_fork"]
        assert state["cuda_fork_poisoned"] is False
        (query,) = state["cuda_driver_queries"]
        assert "asks_cuda" in query, query
    finally:
        server.close()


def test_a_server_whose_preload_touched_the_cuda_driver_refuses_to_fork():
    server = _fake_cuda_server("tests.plugins.touches_cuda")
    try:
        assert server.info is None
        assert "initialised the CUDA driver: a forked child cannot use CUDA" in server.error, server.error
    finally:
        server.close()


def test_a_later_rounds_compile_server_works_out_inductors_process_facts_before_it_forks():
    """runner.process_request: a torch.compile cell's later processes on the CPU come from a server that
    preloads backends/inductor_keys (the hashes of Inductor's and Triton's sources, the CPU's vector
    instruction sets: what Inductor works out once a process and keeps), never its first process (its
    first call is the figure), a JAX cell's, or a CUDA cell's. Imported, the module leaves those answers
    in its process's caches, no cache folder of its own behind, and TORCHINDUCTOR_CACHE_DIR as it found it."""
    from stackwars import registry
    from stackwars.records import CellSpec, MeasureConfig
    from stackwars.runner import servers

    config = MeasureConfig(processes=4)

    def preload(backend, repeat, device="cpu"):
        return runner.process_request(CellSpec("gemm", "tiny", "forward", backend, device=device, repeat=repeat),
                                      config, None, None)["preload"]

    assert servers.INDUCTOR_KEYS in preload("torch-compile", 1) and servers.INDUCTOR_KEYS in preload("torch-compile", 5)
    assert servers.INDUCTOR_KEYS not in preload("torch-compile", 0)
    assert servers.INDUCTOR_KEYS not in preload("torch-eager", 0) and servers.INDUCTOR_KEYS not in preload("jax-jit", 1)
    assert servers.INDUCTOR_KEYS in preload("torch-eager", 1)  # a later round's server is both modes' (below)
    assert servers.warm_keys(registry.backend("torch-compile"), CellSpec("gemm", "tiny", "forward", "torch-compile",
                                                                         device="cuda", repeat=1)) == ()
    code = ("import os; os.environ.pop('TORCHINDUCTOR_CACHE_DIR', None)\n"
            "from stackwars.backends import inductor_keys\n"
            "from torch._inductor import codecache, cpu_vec_isa\n"
            "try:\n    codecache.torch_key.set(b'')\nexcept RuntimeError:\n    pass  # already worked out\n"
            "else:\n    raise AssertionError('torch_key not worked out')\n"
            "assert cpu_vec_isa.valid_vec_isa_list.cache_info().currsize == 1\n"
            "assert 'TORCHINDUCTOR_CACHE_DIR' not in os.environ\n"
            "assert inductor_keys.FOLDER and not os.path.exists(inductor_keys.FOLDER)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_later_round_serves_both_pytorch_modes_from_one_server_and_inductor_changes_no_setting():
    """Later rounds' processes of torch-eager and torch-compile on the CPU come from one server a round
    (the union of their preloads), a cell's first process from its own mode's (an eager user's process
    holds no Inductor, and the first call and memory are figures); other backends keep theirs. Importing
    Inductor changes none of torch's global settings an eager process runs under."""
    from stackwars.records import CellSpec, MeasureConfig

    config = MeasureConfig(processes=4)

    def key(backend, repeat):
        p = runner.process_request(CellSpec("ffn", "tiny", "train-step", backend, repeat=repeat), config, None, None)
        return tuple(p["preload"]), p["generation"]

    assert key("torch-eager", 2) == key("torch-compile", 2)
    assert key("torch-eager", 0) != key("torch-compile", 0)
    assert "torch._inductor.compile_fx" not in key("torch-eager", 0)[0]
    assert key("torch-mlir-xla", 2)[0] != key("torch-compile", 2)[0] and key("jax-jit", 2)[0] == key("jax-eager", 2)[0]
    code = ("import torch, torch.profiler, torch._dynamo\n"
            "def state():\n"
            "    return (torch.get_num_threads(), torch.get_num_interop_threads(), torch.backends.mkldnn.enabled,\n"
            "            torch.get_float32_matmul_precision(), torch.are_deterministic_algorithms_enabled(),\n"
            "            torch.is_grad_enabled(), torch.get_default_dtype(), torch.backends.cpu.get_cpu_capability(),\n"
            "            torch._C._get_mkldnn_enabled(), torch.is_autocast_enabled())\n"
            "before = state()\n"
            "import torch._inductor.compile_fx\n"
            "assert state() == before, (before, state())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert done.returncode == 0, done.stderr[-2000:]
