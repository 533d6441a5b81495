"""The machine probe forces no platform on any framework: it reports each framework's
devices as that framework sees them, whatever JAX_PLATFORMS the parent has (the test
session itself pins JAX to the CPU). The cells still pin their own platform."""

import os

import pytest

from stackwars import runner
from stackwars.runner import servers
from stackwars.harness import settings


@pytest.fixture
def restored_env(monkeypatch):
    """settings.apply writes the process environment: restore it after the test."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "JAX_PLATFORMS", "XLA_FLAGS",
                "XLA_PYTHON_CLIENT_PREALLOCATE"):
        monkeypatch.setenv(var, os.environ.get(var, ""))
    before = os.sched_getaffinity(0)
    yield monkeypatch
    os.sched_setaffinity(0, before)


@pytest.fixture
def fresh(monkeypatch):
    """The probe itself, not an answer kept by an earlier test (harness/probe.py's cache)."""
    monkeypatch.setenv("STACKWARS_PROBE_CACHE", "0")
    return monkeypatch


def test_probe_runs_with_no_platform_forced(fresh):
    monkeypatch = fresh
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")  # what the parent (this test session) has
    p = runner.probe_machine()
    assert p["status"] == "ok"
    assert p["process_settings"]["jax_platforms"] == settings.NO_PLATFORM
    jax = p["jax"]
    assert jax["importable"] and jax["jax_platforms_env"] is None  # the probe's JAX saw no JAX_PLATFORMS
    assert jax["default_backend"] in ("cpu", "gpu")
    # where JAX sees no GPU, the reason is JAX's own words, not ours
    assert jax["cuda"] or "gpu" in jax["cuda_reason"].lower() or "backend" in jax["cuda_reason"].lower()
    assert os.environ["JAX_PLATFORMS"] == "cpu"  # the parent is untouched


def test_cells_pin_their_platform(restored_env):
    applied = settings.apply(None, "cpu", None)
    assert applied["jax_platforms"] == "cpu" and os.environ["JAX_PLATFORMS"] == "cpu"


def test_process_env_is_applied_before_the_framework(restored_env):
    restored_env.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
    applied = settings.apply(None, "cpu", None, {"XLA_FLAGS": "--xla_gpu_autotune_level=0"})
    assert os.environ["XLA_FLAGS"] == "--xla_cpu_enable_fast_math=false --xla_gpu_autotune_level=0"
    assert applied["env"]["XLA_FLAGS"].endswith("--xla_gpu_autotune_level=0")


def test_each_frameworks_probe_runs_in_its_own_worker_at_once_and_fails_alone(fresh):
    """PyTorch's side and JAX's are probed in two workers at the same time (one after the other
    in one worker, the run's first cell waited for both); a side whose worker fails is named
    unavailable with the reason, and the other side stands."""
    import threading

    from stackwars.harness.isolation import Outcome

    both = threading.Barrier(2, timeout=60)  # broken unless both workers are in flight together
    real = runner.run_task

    def run_task(task, **kwargs):
        both.wait()
        if task["target"].endswith(":probe_jax"):
            return Outcome(status="error", result=None, error="the JAX worker died", wall_s=0.1)
        return real(task, **kwargs)

    fresh.setattr(runner, "run_task", run_task)
    p = runner.probe_machine()
    assert p["torch"]["importable"] is True and "torch_mlir" in p
    assert p["jax"] == {"importable": False, "error": "probe failed: the JAX worker died"}


def test_the_probes_guess_imports_no_framework_and_names_what_is_installed():
    """runner.probe_guess: what the fork servers started during the probe are planned from.
    It finds the packages without importing them, and says CUDA only where a GPU is asked for
    and NVML sees one."""
    import importlib.util
    import subprocess
    import sys

    code = ("import sys; from stackwars import runner; g = runner.probe_guess(['cpu', 'cuda']); "
            "print(sorted(m for m in ('torch', 'jax', 'torch_mlir') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout  # found, not imported
    g = runner.probe_guess("cpu")
    for name in ("torch", "jax", "torch_mlir"):
        assert g[name]["importable"] == (importlib.util.find_spec(name) is not None)
    assert not g["torch"]["cuda"] and not g["jax"]["cuda"]  # a CPU run asks for no GPU
    assert runner.probe_guess("cuda")["torch"]["cuda"] == (runner.machine_memory()[1] is not None)


def test_servers_during_the_probe_start_nothing_for_a_plan_the_guess_refuses(monkeypatch):
    """A guess the plan refuses (no backend it allows, say) costs nothing: no server starts,
    and the run starts its servers itself after the probe, as before."""
    from stackwars.errors import SpecError
    from stackwars.harness import forkserver
    from stackwars.records import MeasureConfig

    def refuses(found):
        assert found["torch"]["importable"] in (True, False)  # planned from the guess
        raise SpecError("no backend can run here")

    started = []
    monkeypatch.setattr(forkserver, "start_ahead", lambda *a, **k: started.append(a))
    assert runner.start_servers_during_probe(refuses, "cpu", MeasureConfig()) is None
    assert runner.start_servers_during_probe(lambda found: [], "cpu", MeasureConfig()) is None
    assert not started



def test_a_new_runs_references_are_computed_into_its_folder_while_the_probe_runs(monkeypatch, tmp_path):
    """`run` makes the new run's reference folder before the probe (runner.run_references) and
    the servers started meanwhile compute into it the references its CUDA cells want in workers
    of their own; without the run's folder the batch's stand-in folder is gone afterwards and
    the references wait for their cells. Here a gpt2 cell on the CPU stands for a CUDA one."""
    from stackwars.harness import forkserver
    from stackwars.harness import reference as refmod
    from stackwars.records import MeasureConfig

    real = refmod.own_worker_wanted
    monkeypatch.setattr(refmod, "own_worker_wanted", lambda wl, device, mode, directory:
                        real(wl, "cuda", mode, directory))
    monkeypatch.setattr(forkserver, "start_ahead", lambda requests, during=None: {"servers": len(requests)})
    config = MeasureConfig()
    specs = runner.plan_cells(["gpt2"], ["tiny"], ["forward"], ["torch-eager"], repeats=1)
    key = refmod.cell_key(specs[0], config.seed)
    folder = runner.run_references()
    runner.start_servers_during_probe(lambda found: specs, "cpu", config, folder)
    assert refmod.ReferenceCache(folder).has(key)
    early = servers._EARLY.pop((folder, key))
    assert early["status"] == "ok" and early["computed"] == \
        "while the fork servers started, during the machine probe, before the cells"
    # the stand-in folder: the reference server requested in the batch instead, nothing computed
    asked = []
    monkeypatch.setattr(forkserver, "start_ahead", lambda requests, during=None: asked.extend(requests))
    monkeypatch.setattr(runner.tmp, "mkdtemp", lambda kind: str(tmp_path / kind))
    (tmp_path / "probe-references").mkdir()
    runner.start_servers_during_probe(lambda found: specs, "cpu", config)
    assert any("stackwars.harness.reference" in preload for preload, _, _ in asked)
    assert not (tmp_path / "probe-references").exists() and servers._EARLY == {}

# ---- the answer kept between commands ---------------------------------------------------------------

def _counting_probe(monkeypatch, jax_side=None):
    """runner.run_task standing for the probe's two workers (no interpreter started): a plain
    CPU machine's answer, or ``jax_side`` for JAX's; the list of the targets it was asked for."""
    from stackwars.harness.isolation import Outcome

    asked = []

    def run_task(task, **kwargs):
        asked.append(task["target"].split(":")[1])
        if task["target"].endswith(":probe_torch"):
            result = {"status": "ok", "torch": {"importable": True, "version": "9.9", "cuda_build": None,
                                                "num_threads": 2, "cuda": False, "cuda_reason": "CPU-only build"},
                      "torch_mlir": {"importable": False, "error": "ModuleNotFoundError: No module named 'torch_mlir'"}}
        else:
            result = {"status": "ok", "jax": jax_side or {"importable": True, "version": "9.8", "cuda": False,
                                                          "cuda_reason": "Unknown backend: 'gpu'"}}
        return Outcome(status="ok", result={**result, "process_settings": {"pid": len(asked)}}, error=None, wall_s=0.1)

    monkeypatch.setattr(runner, "run_task", run_task)
    return asked


@pytest.fixture
def kept(monkeypatch, tmp_path):
    """An empty cache folder of this test's own, caching on."""
    monkeypatch.setenv("STACKWARS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("STACKWARS_PROBE_CACHE", raising=False)
    return tmp_path / "cache" / "probe"


def test_a_second_command_reads_the_answer_back_and_the_record_says_so(monkeypatch, kept):
    asked = _counting_probe(monkeypatch)
    first = runner.probe_machine()
    assert sorted(asked) == ["probe_jax", "probe_torch"] and first["probed"]["from_cache"] is False
    assert len(list(kept.glob("*.json"))) == 1
    second = runner.probe_machine()
    assert len(asked) == 2  # no worker this time
    assert second["probed"] == {"at": first["probed"]["at"], "from_cache": True, "age_s": second["probed"]["age_s"]}
    assert 0 <= second["probed"]["age_s"] < 60
    assert {k: v for k, v in second.items() if k != "probed"} == {k: v for k, v in first.items() if k != "probed"}
    from stackwars.harness import env as envmod
    from stackwars.records import Env
    assert "machine probe kept from " + first["probed"]["at"] in Env(envmod.fingerprint(None, second)).summary()
    assert "machine probe kept" not in Env(envmod.fingerprint(None, first)).summary()
    runner.probe_machine(inline=True)  # --inline probes in its own process, every time, and keeps nothing
    assert len(asked) == 2 and len(list(kept.glob("*.json"))) == 1


@pytest.mark.parametrize("change", [
    ("CUDA_VISIBLE_DEVICES", "0"), ("XLA_FLAGS", "--xla_force_host_platform_device_count=4"),
    ("OMP_NUM_THREADS", "1"), ("PYTHONPATH", "/elsewhere"), ("LD_LIBRARY_PATH", "/usr/local/cuda/lib64")],
    ids=lambda c: c[0])
def test_what_a_framework_reads_changed_means_probing_again(monkeypatch, kept, change):
    asked = _counting_probe(monkeypatch)
    runner.probe_machine()
    monkeypatch.setenv(*change)
    assert runner.probe_machine()["probed"]["from_cache"] is False and len(asked) == 4
    assert runner.probe_machine()["probed"]["from_cache"] is True and len(asked) == 4  # kept under its own key


def test_an_install_a_new_version_or_another_cpu_set_means_probing_again(monkeypatch, kept):
    from stackwars.harness import env as envmod
    from stackwars.harness import probe as probemod

    asked = _counting_probe(monkeypatch)
    runner.probe_machine()
    real_key, real_version = probemod.cache_key, envmod._version
    key = real_key()
    assert key["packages"] and all(isinstance(t, int) for t in key["packages"].values())  # the folders' times
    monkeypatch.setattr(envmod, "_version", lambda p: "0.0.1" if p == "jax" else real_version(p))
    runner.probe_machine()
    assert len(asked) == 4
    monkeypatch.setattr(envmod, "_version", real_version)
    monkeypatch.setattr(probemod, "cache_key", lambda: {**real_key(), "packages": {p: 1 for p in key["packages"]}})
    runner.probe_machine()  # a pip install touched site-packages
    assert len(asked) == 6
    monkeypatch.setattr(probemod, "cache_key", real_key)
    runner.probe_machine()
    assert len(asked) == 6  # back as it was: the first answer, still kept
    before = os.sched_getaffinity(0)
    if len(before) > 1:  # this process pinned to fewer CPUs: PyTorch's thread count would differ
        os.sched_setaffinity(0, {min(before)})
        try:
            assert runner.probe_machine()["probed"]["from_cache"] is False and len(asked) == 8
        finally:
            os.sched_setaffinity(0, before)


def test_an_answer_that_may_differ_next_time_is_not_kept(monkeypatch, kept):
    """A side whose worker failed, or a framework that failed to import for any reason but not
    being installed, is probed again by the next command."""
    from stackwars.harness.isolation import Outcome

    broken = {"importable": False, "error": "ImportError: libcudart.so.13: cannot open shared object file"}
    asked = _counting_probe(monkeypatch, jax_side=broken)
    assert runner.probe_machine()["jax"] == broken
    runner.probe_machine()
    assert len(asked) == 4 and not list(kept.glob("*.json"))

    asked = _counting_probe(monkeypatch)
    real = runner.run_task
    monkeypatch.setattr(runner, "run_task", lambda task, **kw: Outcome(status="timeout", result=None, error="timed out",
                                                                       wall_s=300.0)
                        if task["target"].endswith(":probe_jax") else real(task, **kw))
    assert runner.probe_machine()["jax"]["error"] == "probe failed: timed out"
    assert not list(kept.glob("*.json"))


def test_a_gpu_nvml_sees_that_a_framework_missed_is_probed_again():
    """On a GPU host, an importable CUDA-capable framework that saw no GPU (busy, half
    initialised, a driver mid-update) is not an answer to keep; a CPU-only PyTorch build is."""
    from stackwars.harness.probe import cacheable

    torch_cpu = {"importable": True, "cuda_build": None, "cuda": False}
    torch_cuda = {"importable": True, "cuda_build": "13.0", "cuda": True}
    jax_gpu = {"importable": True, "cuda": True}
    mlir = {"importable": False, "error": "ModuleNotFoundError: No module named 'torch_mlir'"}
    assert cacheable({"status": "ok", "torch": torch_cuda, "jax": jax_gpu, "torch_mlir": mlir}, gpus_seen=True)
    assert cacheable({"status": "ok", "torch": torch_cpu, "jax": jax_gpu, "torch_mlir": mlir}, gpus_seen=True)
    assert not cacheable({"status": "ok", "torch": {**torch_cuda, "cuda": False}, "jax": jax_gpu, "torch_mlir": mlir},
                         gpus_seen=True)
    assert not cacheable({"status": "ok", "torch": torch_cuda, "jax": {**jax_gpu, "cuda": False}, "torch_mlir": mlir},
                         gpus_seen=True)
    assert cacheable({"status": "ok", "torch": torch_cpu, "jax": {**jax_gpu, "cuda": False}, "torch_mlir": mlir},
                     gpus_seen=False)


def test_caching_off_an_old_answer_or_a_corrupt_file_means_probing_again(monkeypatch, kept):
    import json
    import time

    from stackwars.harness import probe as probemod

    asked = _counting_probe(monkeypatch)
    monkeypatch.setenv("STACKWARS_PROBE_CACHE", "0")
    runner.probe_machine()
    runner.probe_machine()
    assert len(asked) == 4 and not kept.exists()  # off: probed each time, nothing written
    monkeypatch.delenv("STACKWARS_PROBE_CACHE")
    runner.probe_machine()
    (path,) = kept.glob("*.json")
    stored = json.loads(path.read_text())
    stored["probed_at"] = time.time() - probemod.CACHE_MAX_AGE_S - 1
    path.write_text(json.dumps(stored))
    assert runner.probe_machine()["probed"]["from_cache"] is False and len(asked) == 8  # a day old: probed again
    path.write_text("{not json")
    assert runner.probe_machine()["probed"]["from_cache"] is False and len(asked) == 10
    assert runner.probe_machine()["probed"]["from_cache"] is True and len(asked) == 10  # rewritten whole
    blocker = kept.parent.parent / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("STACKWARS_CACHE_DIR", str(blocker / "cache"))  # no folder can be made there
    assert runner.probe_machine()["probed"]["from_cache"] is False and len(asked) == 12  # goes on, keeps nothing


@pytest.mark.parametrize("var,value", [("OMP_WAIT_POLICY", "passive"), ("GOMP_SPINCOUNT", "0"),
                                       ("KMP_BLOCKTIME", "0"), ("OMP_PROC_BIND", "close"), ("OMP_PLACES", "cores"),
                                       ("GOMP_CPU_AFFINITY", "0-1"), ("KMP_AFFINITY", "compact"),
                                       ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
                                       ("XLA_PYTHON_CLIENT_ALLOCATOR", "platform")])
def test_how_the_openmp_threads_wait_and_sit_is_in_the_runs_environment(monkeypatch, var, value):
    """Whether a PyTorch process's idle threads spin or sleep between parallel regions, and where they
    sit, changes what it measures (a loop of small matmuls: 1.28 s of CPU spinning, 0.37 s passive), as
    each framework's allocator settings change its memory and speed: a run's fingerprint keeps each such
    variable its user set, and says nothing of one left unset (harness/env.ENV_VARS, the one list)."""
    from stackwars.harness import env as envmod

    monkeypatch.delenv(var, raising=False)
    assert var not in envmod.fingerprint()["env"]
    monkeypatch.setenv(var, value)
    assert envmod.fingerprint()["env"][var] == value
