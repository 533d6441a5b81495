"""The machine's canary (stackwars/canary.py): a fixed program timed before and after every cell.

A machine that slows down for part of a run (the host, not the guest: no contention, no
steal) is simulated by a fake clock that makes every program 2x slower in some processes:
the cells' steady state (the real Timer) and the canary (the real reading, its clock
injected) alike. Those processes must be flagged, the verdict must not be drawn from them,
and `compare` of two runs whose canaries differ must say so instead of naming a regression.
"""

from __future__ import annotations

import dataclasses
import re
import threading

import numpy as np
import pytest
from typer.testing import CliRunner

from stackwars import canary
from stackwars.cli import app
from stackwars.harness.timer import Timer
from stackwars.records import Parity
from stackwars.verdict import runs
from stackwars import verdict as vd
from tests.factories import measurement
from stackwars.records import MeasureConfig
from tests.test_verdict import SyntheticMachine, _store

runner = CliRunner()


class FakeClock:
    """Every pass of the canary's program takes ``factor`` ms on this clock, in every thread."""

    def __init__(self, factor: float, rng: np.random.Generator | None = None):
        self.factor, self.rng, self.local = factor, rng, threading.local()

    def __call__(self) -> float:
        t = getattr(self.local, "t", 0.0)
        jitter = 1.0 + (0.01 * float(self.rng.standard_normal()) if self.rng is not None else 0.0)
        self.local.t = t + 1e-3 * self.factor * jitter  # from one reading to the next: a pass of factor ms
        return t


def test_a_reading_runs_on_every_cpu_and_reports_the_slowest():
    r = canary.reading(FakeClock(1.0), lanes=2)
    assert len(r["lanes"]) == 2 and r["s"] == pytest.approx(1e-3) and r["spread"] == pytest.approx(0.0)
    assert all(len(p) == canary.PASSES for p in r["passes"])
    real = canary.reading(lanes=2)  # the real program on the real clock: a few milliseconds, stated in the record
    assert 0 < real["s"] < 0.1 and real["cost_s"] < 2.0 and real["s"] == max(real["lanes"])


def _process(backend: str, proc: int, factor: float, seed: int, centre: float = 1e-3):
    """One process of a cell on a machine running at 1/factor of its speed."""
    rng = np.random.default_rng(seed)
    dev = SyntheticMachine(rng, centre * factor)
    st = Timer(dev.fn, dev.sync, dev.clock).steady(min_samples=30, min_time_s=0.0, max_samples=30)
    m = measurement(backend, samples=st.samples, framework=backend.split("-")[0])
    settings = {"canary": {"before": canary.reading(FakeClock(factor, rng), lanes=2),
                           "after": canary.reading(FakeClock(factor, rng), lanes=2)}}
    return dataclasses.replace(m, spec=dataclasses.replace(m.spec, repeat=proc), settings=settings,
                               parity=Parity(max_rel_err=1e-7, tolerance=2e-4))


def test_processes_of_a_slowed_machine_are_flagged_and_decide_nothing(tmp_path):
    """The same program on both sides, five processes each; two of JAX's ran while the host
    was 2x slower. Taken at face value JAX reads 1.4x slower; the canary flags exactly
    those two, and the verdict, from the three clean ones a side, is a tie."""
    slow = {3, 4}
    cells = [_process("torch-eager", p, 1.0, seed=p) for p in range(5)]
    cells += [_process("jax-jit", p, 2.0 if p in slow else 1.0, seed=100 + p) for p in range(5)]
    # looks at 3 and 5 rounds: the five rounds are read where all five are clean
    _, found = _store(tmp_path / "c.db", cells, config=MeasureConfig(processes=3, max_processes=5))
    flagged = {(r["backend"], r["repeat"]) for r in found if r["slowed"]}
    assert flagged == {("jax-jit", 3), ("jax-jit", 4)}
    assert all(r["canary_ratio"] == pytest.approx(2.0, rel=0.1) for r in found if r["slowed"])
    (v,) = vd.verdicts(found)
    # the rounds both sides have clean (0, 1, 2) decide: the row reads its rounds, a process of each
    assert v["jax_processes"] == 3 and v["jax_processes_busy"] == 2 and v["torch_processes"] == 3
    assert vd.tied(v["verdict"]), v["reason"]
    # without the canary the slowed processes would have decided: JAX slower
    unflagged = [{**r, "slowed": False} for r in found]
    (blind,) = vd.verdicts(unflagged)
    assert blind["ratio"] > 1.3 and not vd.tied(blind["verdict"])
    # the table says which processes were left out, and why
    from stackwars.report.tables import to_text
    assert "2 busy left out (2 slowed (canary))" in to_text(found, width=250)


def test_too_few_unslowed_processes_cannot_say_and_ask_for_more(tmp_path):
    cells = [_process("torch-eager", p, 1.0, seed=p) for p in range(3)]
    cells += [_process("jax-jit", p, 2.0 if p == 2 else 1.0, seed=100 + p) for p in range(3)]
    _, found = _store(tmp_path / "c.db", cells, config=MeasureConfig(processes=3, max_processes=6))
    (v,) = vd.verdicts(found)
    assert v["verdict"] == "cannot say" and v["reason_tag"] == "busy machine"
    # JAX's slowed third process loses its round: one more round, a process of each side
    assert vd.as_cells(vd.wanted([v])) == {"gemm/small/forward/torch-eager/cpu/float32": 1,
                                                       "gemm/small/forward/jax-jit/cpu/float32": 1}


def test_compare_refuses_two_runs_whose_canaries_differ(tmp_path):
    """An A/A pair: the same program in two runs, the second on a host 1.5x slower throughout.
    The cells read 1.5x slower; compare says the machine differs, and by how much."""
    a = [_process(b, p, 1.0, seed=10 * p + i) for i, b in enumerate(("torch-eager", "jax-jit")) for p in range(3)]
    b = [_process(b, p, 1.5, seed=500 + 10 * p + i) for i, b in enumerate(("torch-eager", "jax-jit"))
         for p in range(3)]
    path = tmp_path / "ab.db"
    run_a, rows_a = _store(path, a)
    run_b, rows_b = _store(path, b)
    result = runs.compare_cells(rows_a, rows_b)
    assert {r["verdict"] for r in result} == {"machine differs"}
    assert {r["reading"] for r in result} == {"regression"}  # what it would have said, kept, not acted on
    state = runs.machine_state(rows_a, rows_b)
    assert state["differs"]["ratio"] == pytest.approx(1.5, rel=0.05)
    done = runner.invoke(app, ["compare", run_a, run_b, "--db", str(path), "--fail-on-regression"])
    assert done.exit_code == 0, done.output
    assert re.search(r"canary ran 1\.[45]\dx slower in B than in A", " ".join(done.output.split())), done.output
    assert "the machine itself ran at another speed" in " ".join(done.output.split())
    # the same state of the machine: judged as usual
    c = [_process(b, p, 1.0, seed=900 + 10 * p + i) for i, b in enumerate(("torch-eager", "jax-jit"))
         for p in range(3)]
    _, rows_c = _store(path, c)
    assert runs.machine_state(rows_a, rows_c)["differs"] is None
    assert "machine differs" not in {r["verdict"] for r in runs.compare_cells(rows_a, rows_c)}


def test_a_process_is_flagged_only_when_both_its_readings_are_off():
    """A moment's fluctuation at one end of a cell is not the host's state through it, either way:
    on the 2-CPU Xeon VM 2% of readings ran 1.5x faster for a moment, and the faster of two
    readings flagged gemm processes that ran at the run's speed at their other end."""
    def row(i, before, after):
        return {"run_id": "r", "machine": "m", "canary_before_s": before, "canary_after_s": after,
                "canary_spread": 0.01, "i": i}

    rows = [row(i, 3e-3, 3.1e-3) for i in range(8)]
    rows += [row(8, 2e-3, 3.1e-3), row(9, 3e-3, 4.5e-3), row(10, 2e-3, 2.1e-3), row(11, 4.5e-3, 4.6e-3),
             row(12, 2e-3, 4.5e-3)]
    judged = {r["i"]: r for r in canary.judge(rows)}
    # 12: off at both ends, one each way: the host was in another state at both, flagged too
    assert [i for i, r in judged.items() if r["slowed"]] == [10, 11, 12]
    assert judged[8]["canary_ratio"] == pytest.approx(1.0, abs=0.05)  # the reading nearer the run's
    assert judged[10]["canary_ratio"] == pytest.approx(0.7, abs=0.05)
    assert judged[11]["canary_ratio"] == pytest.approx(1.5, abs=0.05)


def test_rows_without_a_canary_are_never_flagged():
    plain = [dict(measurement("jax-jit", framework="jax").to_row(), run_id="r", machine="m") for _ in range(3)]
    judged = canary.judge(plain)
    assert [r["slowed"] for r in judged] == [False] * 3 and judged[0]["canary_ratio"] is None
    assert canary.run_canary(plain) is None


def test_the_canary_imports_no_framework_and_leaves_no_thread_behind():
    """It runs in the worker before the framework is imported and its device initialised: a
    framework imported (or a thread left running) by it would change the process the cell runs in."""
    import subprocess
    import sys

    code = ("import sys, threading; from stackwars import canary; canary.reading(); canary.reading(); "
            "assert not {'torch', 'jax', 'jaxlib'} & set(sys.modules), sorted(sys.modules); "
            "assert threading.active_count() == 1, threading.enumerate(); print('clean')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "clean", done.stderr
