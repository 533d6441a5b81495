"""The suite's own lock (tests/conftest.py): under ``pytest -n`` a test marked ``quiet`` waits
for the test running beside it to end, and no test starts beside it until it has ended. And the
session's temporary folder: what a test leaves in it fails the run. And the process's environment: what a test
writes into it is gone for the next test."""

import os
import subprocess
import sys
import threading

from tests.conftest import _LOCKS, _machine, ROOT

NEIGHBOUR = """
import os, sys, time
from tests.conftest import _machine
with _machine(False):
    print("in", flush=True)
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.01)
print("out", flush=True)
"""


def _neighbour(go, env):
    return subprocess.Popen([sys.executable, "-c", NEIGHBOUR, str(go)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            text=True)


def test_a_quiet_test_waits_for_its_neighbour_and_runs_alone(tmp_path, monkeypatch):
    env = {**os.environ, "PYTEST_XDIST_WORKER": "gw1", _LOCKS: str(tmp_path), "PYTHONPATH": str(ROOT)}
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    monkeypatch.setenv(_LOCKS, str(tmp_path))
    first = _neighbour(tmp_path / "go-1", env)
    assert first.stdout.readline() == "in\n"  # a plain test holds the machine

    alone, leave = threading.Event(), threading.Event()

    def quiet():
        with _machine(True):
            alone.set()
            leave.wait(60)

    t = threading.Thread(target=quiet)
    t.start()
    assert not alone.wait(0.5)  # the quiet test waits while its neighbour runs
    (tmp_path / "go-1").touch()
    assert first.stdout.readline() == "out\n" and alone.wait(30)  # ... and starts once it has ended
    first.wait(30)

    second = _neighbour(tmp_path / "go-2", env)  # the next plain test waits for the quiet one
    line = []
    reader = threading.Thread(target=lambda: line.append(second.stdout.readline()))
    reader.start()
    reader.join(0.5)
    assert not line
    leave.set()
    t.join(30)
    reader.join(30)
    assert line == ["in\n"]
    (tmp_path / "go-2").touch()
    assert second.wait(30) == 0


def test_a_quiet_test_keeps_the_machine_for_the_next_quiet_test_and_lets_go_after(tmp_path, monkeypatch):
    """Between two quiet tests of one worker no neighbour's test starts (it did, and the second
    quiet test waited for its end, idle); the machine is let go after the last of them, or
    before a plain test where the next quiet one did not come."""
    env = {**os.environ, "PYTEST_XDIST_WORKER": "gw1", _LOCKS: str(tmp_path), "PYTHONPATH": str(ROOT)}
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    monkeypatch.setenv(_LOCKS, str(tmp_path))
    for then_plain in (False, True):
        with _machine(True, keep=True):
            pass
        go = tmp_path / f"go-{then_plain}"
        neighbour = _neighbour(go, env)
        line: list = []
        reader = threading.Thread(target=lambda: line.append(neighbour.stdout.readline()))
        reader.start()
        reader.join(0.5)
        assert not line  # kept: the neighbour waits
        if then_plain:
            with _machine(False):  # a plain test: lets the kept machine go and shares it
                reader.join(30)
        else:
            with _machine(True):  # the next quiet test takes the kept machine, without waiting
                reader.join(0.5)
                assert not line
            reader.join(30)
        assert line == ["in\n"], then_plain
        go.touch()
        assert neighbour.wait(30) == 0


def test_without_workers_nothing_is_locked(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.setenv(_LOCKS, str(tmp_path))
    with _machine(True):
        with _machine(True):  # the same process twice: would wait forever if it locked
            pass
    assert not list(tmp_path.iterdir())


LEAVES = """
import os, tempfile

def test_leaves_a_file():
    open(os.path.join(tempfile.gettempdir(), "left-behind.txt"), "w").close()

def test_cleans_up():
    with tempfile.TemporaryDirectory() as folder:
        open(os.path.join(folder, "x"), "w").close()
    # one the session's own process removes at its exit, as its fork servers' (without -n)
    import atexit, shutil
    from stackwars.harness import tmp
    atexit.register(shutil.rmtree, tmp.mkdtemp("forkserver"))
"""


def test_a_file_a_test_leaves_in_the_sessions_temporary_folder_fails_the_run(tmp_path):
    """A pytest session of its own (this conftest as its plugin, no variable of this session): a test
    that leaves a file in the temporary folder fails the run, the file named; one that cleans up passes,
    a folder its process removes at exit included; and the session's folder is gone after either,
    nothing of it in the TMPDIR it was started with."""
    (tmp_path / "test_leaves.py").write_text(LEAVES)
    outer = tmp_path / "t"
    outer.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STACKWARS_TEST_", "PYTEST_"))}
    env.update(PYTHONPATH=str(ROOT), TMPDIR=str(outer))

    def session(test: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
                               f"test_leaves.py::{test}"], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)

    dirty = session("test_leaves_a_file")
    assert dirty.returncode == 1, dirty.stdout + dirty.stderr
    assert "1 passed" in dirty.stdout and "left 1 file(s)" in dirty.stdout and "left-behind.txt" in dirty.stdout
    clean = session("test_cleans_up")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "left" not in clean.stdout
    assert os.listdir(outer) == []


WRITES_ENV = """
import os

def test_the_program_writes_into_its_environment(monkeypatch):
    monkeypatch.delenv("STACKWARS_PLUGINS", raising=False)  # not set: records nothing to undo
    os.environ["STACKWARS_PLUGINS"] = "/a/model.py"  # as discovery.load_file does for the workers
    os.environ["PATH"] = "/nowhere"
    del os.environ["SW_SET_BEFORE"]

def test_the_next_test_finds_the_environment_as_it_was():
    assert "STACKWARS_PLUGINS" not in os.environ
    assert os.environ["PATH"] != "/nowhere" and os.environ["SW_SET_BEFORE"] == "1"
"""


def test_what_a_test_writes_into_the_environment_is_gone_for_the_next(tmp_path):
    """A pytest session of its own (this conftest as its plugin): the variables one test set, changed or
    removed, in its own code or through the program, are as they were for the next test of the process."""
    (tmp_path / "test_writes_env.py").write_text(WRITES_ENV)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STACKWARS_TEST_", "PYTEST_", "STACKWARS_PLUGINS"))}
    env.update(PYTHONPATH=str(ROOT), TMPDIR=str(tmp_path), SW_SET_BEFORE="1")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
                           "test_writes_env.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout + done.stderr
