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
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Inductor/JAX caches for in-process (inline) cells: one directory for the whole session,
# so the suite pays Inductor's cold start once, not once per test.
_CACHE = tempfile.mkdtemp(prefix="stackwars-test-cache-")
atexit.register(shutil.rmtree, _CACHE, True)  # not left in /tmp by every session
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(_CACHE, "inductor"))
# stackwars's own cache (the machine probe's answer, decoded MNIST): the session's, never the
# user's, and empty at its start, so each test process probes for real once, then reads it back
os.environ.setdefault("STACKWARS_CACHE_DIR", os.path.join(_CACHE, "stackwars"))
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


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
# next test of the other worker. Without -n this is one process and nothing is locked.
_LOCKS = "STACKWARS_TEST_LOCKS"


def pytest_configure(config):
    if "PYTEST_XDIST_WORKER" not in os.environ and _LOCKS not in os.environ:
        folder = tempfile.mkdtemp(prefix="stackwars-test-locks-")  # the workers inherit it
        os.environ[_LOCKS] = folder
        atexit.register(shutil.rmtree, folder, True)


@contextlib.contextmanager
def _machine(alone: bool):
    folder = os.environ.get(_LOCKS)
    if "PYTEST_XDIST_WORKER" not in os.environ or not folder:
        yield
        return
    with open(os.path.join(folder, "turnstile"), "a") as turnstile, \
            open(os.path.join(folder, "machine"), "a") as machine:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(machine, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(machine, fcntl.LOCK_UN)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    with _machine(item.get_closest_marker("quiet") is not None):
        return (yield)
