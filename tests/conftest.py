"""Shared test setup: CPU only, compile caches in a session directory, helpers."""

from __future__ import annotations

import atexit
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
def gpu_probe():
    """The machine probe where NVML sees a GPU: every framework must see it too, or the test
    fails with the framework's own reason (a skipped GPU test once hid that JAX never ran on
    the GPU at all)."""
    from stackwars import runner

    p = runner.probe_machine()
    blind = [f"{fw}: {p[fw].get('cuda_reason') or p[fw].get('error')}" for fw in ("torch", "jax")
             if not p[fw].get("cuda")]
    if blind:
        pytest.fail("NVML sees a GPU but a framework does not: " + "; ".join(blind))
    return p
