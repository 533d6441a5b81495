"""Shared test setup: CPU only, compile caches and stackwars's cache in a session directory, helpers; and, under
``pytest -n N`` (pytest-xdist), a test marked ``quiet`` runs with nothing else running."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The session's temporary files: one folder (TMPDIR), inherited by its workers and every process they start,
# removed at the end. A test or a part of the program that leaves a file in a user's temporary folder is a bug,
# found one at a time before (torchrun's logs, chromium's singleton socket, Ray's sessions, this module's own
# cache): now what is left in the folder when the session ends fails the run, named (pytest_sessionfinish).
# A short path: a Unix socket's path, a few folders below it (Ray's, chromium's), may have at most 107 bytes.
_TMP = os.environ.get("STACKWARS_TEST_TMP", "")
if not _TMP:
    # pytest's own folders (tmp_path) stay where they were, with pytest's retention of the last three
    # sessions: many a test finds a path in a message rich wrapped at 80 columns, and 14 more
    # characters broke three of them mid-path
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
    _TMP = os.environ["STACKWARS_TEST_TMP"] = os.environ["TMPDIR"] = tempfile.mkdtemp(prefix="sw-t-")
    os.environ["STACKWARS_TEST_TMP_OWNER"] = str(os.getpid())  # the process that checks and removes it
    tempfile.tempdir = None  # read TMPDIR again
    atexit.register(shutil.rmtree, _TMP, True)
# Inductor/JAX caches for in-process (inline) cells: one directory for the whole session,
# so the suite pays Inductor's cold start once, not once per test.
# Made once, by the session's first process: every process that imports this module later inherits it
# (pytest-xdist's workers; a submitit job, which imports a test's module to unpickle its function:
# one killed by its test left a folder of its own in /tmp every session)
_CACHE = os.environ.get("STACKWARS_TEST_CACHE", "")
if not _CACHE:
    _CACHE = os.environ["STACKWARS_TEST_CACHE"] = tempfile.mkdtemp(prefix="stackwars-test-cache-")
    atexit.register(shutil.rmtree, _CACHE, True)  # inside the session's folder, unless a caller gave another
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(_CACHE, "inductor"))
# JAX's persistent cache likewise, every executable however small (jax-eager compiles each primitive at each
# shape once a process: 361 compiles, 32 s of a bert-base train step's 70 s on the 2-CPU VM): a program compiled
# by one test is read by the next, in either pytest worker and in the processes they start. A cell of a run sets
# its own folder (backends/jax_common.py: cold for its first process), so what a run measures is unchanged;
# only a cell measured in the test's own process with no folder of its own (--inline, measure_cell) reads this one.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(_CACHE, "jax"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
# stackwars's own cache (the machine probe's answer, decoded MNIST): the session's, never the
# user's, and empty at its start, so each test process probes for real once, then reads it back
os.environ.setdefault("STACKWARS_CACHE_DIR", os.path.join(_CACHE, "stackwars"))
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# libgomp's threads (PyTorch's intra-op pool, MKL's, Inductor's compiled kernels) sleep between parallel
# regions instead of spinning: by default each torch process's second thread spins after every op, a CPU taken
# from the other workers of a suite that keeps both CPUs busy (a loop of 3,000 small matmuls: 1.28 s of CPU by
# default, 0.37 s passive, the same 1.1 s of wall; five torch-heavy files under -n 3, three runs each, in turn:
# 305-315 s of CPU and 165-170 s of wall by default, 259-278 s and 143-154 s passive; 2-CPU AMD EPYC VM,
# 2026-12-02). The tests check what is computed and recorded, not a speed; a user's run measures with the
# runtimes' defaults, not this.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")


@pytest.fixture(scope="session")
def cache_dir() -> str:
    return _CACHE


@pytest.fixture
def plugins_env(monkeypatch):
    """Workers (spawned processes) import the test plugins: fault-injecting workloads."""
    monkeypatch.setenv("STACKWARS_PLUGINS", "tests.plugins.faults")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    yield


@pytest.fixture
def isolated_plugins():
    """A test that loads a plugin or a model file in this process leaves the registry and the
    imported test plugin modules as it found them, as a new process would: a plugin that imports
    another (slow_parts imports faults) registers the other's names under its own origin, and a
    later test of the same worker naming the other would find them there (test_nothing_lost's
    origin check did, once the files ran in another order)."""
    from stackwars import discovery, registry

    registry._ensure_loaded()  # the built-ins first: restoring a table saved before they loaded
    # emptied it for good (the loaded flag stays set), and the next test found no backend at all
    tables = (registry._WORKLOADS, registry._BACKENDS, registry._STUDIES, registry._ORIGIN, discovery._files)
    saved = [dict(t) for t in tables], set(discovery._plugins), set(sys.modules)
    yield
    for table, old in zip(tables, saved[0]):
        table.clear()
        table.update(old)
    discovery._plugins.clear()
    discovery._plugins.update(saved[1])
    for name in set(sys.modules) - saved[2]:
        if name.startswith("tests.plugins."):
            del sys.modules[name]


@pytest.fixture(scope="session")
def mnist_dir(tmp_path_factory):
    """A generated MNIST-style directory (tests/mnist_fixture.py), shared by the session."""
    from tests import mnist_fixture
    return mnist_fixture.make(tmp_path_factory.mktemp("mnist-fixture"))


@pytest.fixture(scope="session")
def machine_probe():
    """What ``stackwars run`` learns of this machine first (runner.probe_machine: a worker that
    imports both frameworks and asks each for its devices), once a test process: a test that
    only needs it to plan or fingerprint cells does not pay the worker's seconds again
    (tests/test_probe.py checks the probe itself)."""
    from stackwars import runner

    return runner.probe_machine()


@pytest.fixture(scope="session")
def gpu_probe(machine_probe):
    """The machine probe where NVML sees a GPU: every framework must see it too, or the test
    fails with the framework's own reason (a skipped GPU test once hid that JAX never ran on
    the GPU at all)."""
    p = machine_probe
    blind = [f"{fw}: {p[fw].get('cuda_reason') or p[fw].get('error')}" for fw in ("torch", "jax")
             if not p[fw].get("cuda")]
    if blind:
        pytest.fail("NVML sees a GPU but a framework does not: " + "; ".join(blind))
    return p


# ``pytest -n N``: tests run N at a time, each in its own worker. A test marked ``quiet``
# measures the machine itself (whether others take its CPUs, the canary, the peaks' refusal
# of a contended round) and is false under a neighbour's load, so it takes the machine
# alone: every test holds a shared lock on one file while it runs (setup and teardown of its
# fixtures included, so a module fixture that measures counts too), a quiet test an
# exclusive one. A second file is the turnstile: a test takes it before it asks for the
# machine and lets it go once it has it, so a quiet test that waits is not overtaken by the
# next test of another worker. Without -n this is one process and nothing is locked.
_LOCKS = "STACKWARS_TEST_LOCKS"


def pytest_configure(config):
    if getattr(config.option, "dist", "no") == "loadfile":
        # the controller schedules the files in the order the workers collected them (below),
        # not the most tests first
        config.option.loadscopereorder = False
    if "PYTEST_XDIST_WORKER" not in os.environ and _LOCKS not in os.environ:
        folder = tempfile.mkdtemp(prefix="stackwars-test-locks-")  # the workers inherit it
        os.environ[_LOCKS] = folder
        atexit.register(shutil.rmtree, folder, True)


@pytest.hookimpl(trylast=True)  # after pytest-xdist has ended its workers (and they their servers)
def pytest_sessionfinish(session, exitstatus):
    """What the session left in its temporary folder fails the run, named: every process a test started
    has ended by now, or ends within 3 s (a worker's fork server, ending as its worker did). Kept by
    design: this module's cache and locks (removed at exit), pytest's own folders, the store's per-user
    lock folder (store/lock.py), Inductor's per-user folder of precompiled headers, and what this process
    removes at its exit."""
    if os.environ.get("STACKWARS_TEST_TMP_OWNER") != str(os.getpid()):
        return  # a worker, or a pytest a test started
    from stackwars.harness import tmp

    kept = {os.path.basename(_CACHE), os.path.basename(os.environ.get(_LOCKS, "")), f"stackwars-{os.getuid()}"}

    def left() -> list[str]:
        # and this process's own folders (a run without -n keeps its fork servers, each with one, from
        # test to test): its exit handlers remove them, after this hook
        return sorted(n for n in os.listdir(_TMP) if n not in kept and tmp.owner(n) != os.getpid()
                      and not n.startswith(("pytest-of-", "torchinductor_")))

    found, end = left(), time.monotonic() + 3
    while found and time.monotonic() < end:
        time.sleep(0.5)
        found = left()
    if found:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = (f"the tests left {len(found)} file(s) in the session's temporary folder ({_TMP}), where nothing "
                   f"may stay: {', '.join(found[:20])}")
        if reporter is not None:
            reporter.write_line(message, red=True, bold=True)
        else:
            print(message, file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_KEPT: list = []  # the machine's lock file, held alone from a quiet test to the next quiet test of this worker


@contextlib.contextmanager
def _machine(alone: bool, keep: bool = False):
    """``keep``: a quiet test whose next test on this worker is quiet too keeps the machine for it.
    Let go between them, the neighbour's next test came in, and this worker waited for its end,
    idle, once for each quiet test of a file."""
    folder = os.environ.get(_LOCKS)
    if "PYTEST_XDIST_WORKER" not in os.environ or not folder:
        yield
        return
    machine = _KEPT.pop() if _KEPT else None
    if machine is not None and not alone:  # kept for a quiet test that did not come: let go first
        fcntl.flock(machine, fcntl.LOCK_UN)
        machine.close()
        machine = None
    if machine is None:
        with open(os.path.join(folder, "turnstile"), "a") as turnstile:
            machine = open(os.path.join(folder, "machine"), "a")
            fcntl.flock(turnstile, fcntl.LOCK_EX)
            try:
                fcntl.flock(machine, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
            except BaseException:
                machine.close()
                raise
            finally:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
    try:
        yield
    finally:
        if alone and keep:
            _KEPT.append(machine)
        else:
            fcntl.flock(machine, fcntl.LOCK_UN)
            machine.close()


def _quiet(item) -> bool:
    return item is not None and item.get_closest_marker("quiet") is not None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    with _machine(_quiet(item), keep=_quiet(nextitem)), _environment_kept():
        return (yield)


@contextlib.contextmanager
def _environment_kept():
    """Each test leaves this process's environment as it found it, as a new process would start with it.
    The program writes into its own process's environment by design (a model file it loaded joins
    STACKWARS_PLUGINS for the workers, discovery.load_file; a resumed run sets the recorded plugins; the
    Triton twin sets TRITON_INTERPRET; harness/settings.py a cell's variables, inline): run in a pytest worker,
    what one test wrote went to every later test of the worker and every process they started. A model
    file loaded by one test (two tests did) was import-checked in a worker forked from a server that
    preloaded PyTorch, then imported with PyTorch, by each later `stackwars` command of the worker, `show` and
    `verdict` included, and by every cell of theirs, a JAX cell too (a suite run on the 2-CPU AMD EPYC VM:
    17 such commands, 17 servers); a variable a fork server is keyed by started servers of their own. Put back after
    the test's teardown, whatever wrote it (monkeypatch.delenv of a variable not set records nothing to
    undo, so a test that cleared STACKWARS_PLUGINS to be safe kept what the program then set)."""
    before = dict(os.environ)
    try:
        yield
    finally:
        for name in [n for n in os.environ if n not in before]:
            del os.environ[name]
        for name, value in before.items():
            if os.environ.get(name) != value:
                os.environ[name] = value


# ``pytest -n N --dist loadfile``: each file goes whole to the next free worker, in the order
# collected. xdist's default order (the most tests first) sent a 250 s file near the end while
# the other worker idled 47 s (the 2-core Zen 3 VM, 2026-11-26). Longest first instead (LPT):
# the files that took 25 s or more (setup, call and teardown of their tests under -n 3), by those seconds, on
# the 2-CPU AMD EPYC VM on 2026-12-04 (4513 s in all, 1715 s wall; the notebook's at its tutorial's budget cut to
# 20 s after, measured alone); every other file after them, in collection order. The figures only order the files:
# a stale one costs a little idle time.
FILE_SECONDS = {
    "test_user_model.py": 634, "test_models.py": 542, "test_forkserver.py": 325, "test_loops.py": 219,
    "test_notebook.py": 250, "test_docs.py": 179, "test_nothing_lost_four.py": 169, "test_scaling.py": 165,
    "test_sweeps.py": 156, "test_cli.py": 145, "test_nothing_lost_two.py": 134, "test_terminal.py": 112,
    "test_hardening.py": 108, "test_fairness.py": 101, "test_isolation.py": 99, "test_external.py": 87,
    "test_decides.py": 82, "test_parity.py": 77, "test_api.py": 71, "test_nothing_lost_three.py": 64,
    "test_studies.py": 62, "test_calibration.py": 60, "test_nothing_lost.py": 52, "test_reference.py": 51,
    "test_ir.py": 47, "test_executors.py": 44, "test_mnist.py": 43, "test_verdict.py": 40, "test_vmap_stream.py": 25,
    "test_digest.py": 25,
}


def pytest_collection_modifyitems(session, config, items):
    if "PYTEST_XDIST_WORKER" not in os.environ:  # one process: the order the files were named in
        return
    first_seen = {}
    for item in items:
        first_seen.setdefault(item.path.name, len(first_seen))
    items.sort(key=lambda item: (-FILE_SECONDS.get(item.path.name, 0), first_seen[item.path.name]))
