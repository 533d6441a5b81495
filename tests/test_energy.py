"""Energy per call (issue 36): the window on a cumulative counter, with NVML and RAPL replaced
by fakes whose counters step the way the real ones do; the verdict's energy ratio and CI; the
report's column; a real CPU cell's record of why it has (or has no) figure."""

import dataclasses
import sys
import types

import pytest

from stackwars.harness import energy
from stackwars.harness.timer import Timer
from stackwars import verdict as vd
from stackwars.report import verdict as view
from tests.test_verdict import _cell, _store


class Device:
    """A device drawing ``watts`` while it works: each call takes ``call_s`` of a fake clock;
    its counter (joules) shows the energy only at its updates, every ``period_s``."""

    def __init__(self, watts=300.0, call_s=2e-3, period_s=0.05, idle_w=0.0):
        self.t, self.e = 0.0, 0.0
        self.watts, self.call_s, self.period_s = watts, call_s, period_s
        self.shown, self.next_update = 0.0, period_s
        self.calls = 0

    def clock(self):
        return self.t

    def call(self):
        self.t += self.call_s
        self.e += self.watts * self.call_s
        self.calls += 1
        while self.t >= self.next_update:  # the counter publishes the energy at its update times
            self.shown = self.e - self.watts * (self.t - self.next_update)
            self.next_update += self.period_s
        return self.calls

    def counter(self):
        return energy.Counter(lambda: self.shown, "nvml", "the whole GPU (fake)")


def steady_window(d, counter, min_window_s, number=1, sync=lambda outs: None, fn=None, min_time_s=0.0):
    """The steady window of harness/timer.py with the energy readout on ``d``'s fake clock: the
    record, and the timed samples it was read beside."""
    meter = energy.WindowEnergy(counter, min_window_s, clock=d.clock)
    st = Timer(fn or d.call, sync, d.clock).steady(min_samples=1, min_time_s=min_time_s, max_samples=10**6,
                                                   number=number, readouts=[meter])
    return meter.record(), st


def test_joules_per_call_and_power_come_from_the_counter():
    d = Device(watts=300.0, call_s=2e-3, period_s=0.05)
    r, st = steady_window(d, d.counter(), min_window_s=1.0)
    assert r["joules_per_call"] == pytest.approx(300.0 * 2e-3, rel=0.01)
    assert r["mean_power_w"] == pytest.approx(300.0, rel=0.01)
    assert r["update_period_s"] == pytest.approx(0.05, abs=2 * d.call_s)
    assert r["window_s"] >= 1.0 and not r["lengthened"]
    assert r["calls"] * d.call_s == pytest.approx(r["window_s"], rel=0.01)  # the calls between two updates
    assert r["scope"].startswith("the whole GPU")
    # the energy window lies inside the steady window: the same calls, the samples it spans named
    first, last = r["samples"]
    assert r["window"] == "steady" and 1 < first < last == len(st.samples)
    assert r["calls"] == last - first + 1  # one call a sample here
    assert st.total_s >= r["window_s"]  # the steady window went on until the counter's window was long enough


def test_a_block_of_calls_a_step_counts_every_call():
    d = Device(watts=120.0, call_s=1e-4, period_s=0.02)
    synced = []
    r, st = steady_window(d, d.counter(), min_window_s=0.5, number=10, sync=synced.append)
    assert r["joules_per_call"] == pytest.approx(120.0 * 1e-4, rel=0.01)
    assert all(len(outs) == 10 for outs in synced)  # a block synced whole, as the timer does
    assert r["calls"] % 10 == 0


def test_a_window_too_short_for_the_counter_is_lengthened_and_says_so():
    d = Device(watts=200.0, call_s=5e-3, period_s=0.1)
    r, st = steady_window(d, d.counter(), min_window_s=0.2)
    assert r["lengthened"] and r["asked_window_s"] == 0.2
    assert r["window_s"] >= energy.WINDOW_PERIODS * 0.1 * 0.95  # ten updates at least
    assert r["joules_per_call"] == pytest.approx(1.0, rel=0.02)


def test_a_counter_too_coarse_or_stuck_gives_no_figure_and_says_why():
    slow = Device(period_s=1.5, call_s=0.01)
    r, st = steady_window(slow, slow.counter(), min_window_s=1.0)
    assert "joules_per_call" not in r and "did not move in 1 s of calls" in r["why"]
    assert st.total_s < 2.0  # the window gave up the counter, not the cell: it ends
    stuck = Device(period_s=1e9, call_s=0.01)
    r, _ = steady_window(stuck, stuck.counter(), min_window_s=1.0)
    assert "joules_per_call" not in r and "did not move" in r["why"]


def test_the_window_keeps_a_trace_that_shows_calls_slowing_without_the_clock():
    """The H200's resnet50 torch-compile processes ran at two speeds within one process; the
    window's marks say whether the calls slowed with the SM clock or without it."""
    d = Device(watts=300.0, call_s=2e-3, period_s=0.05)
    real = d.call

    def call():  # halfway through the window the host takes twice as long to feed the device
        if d.t > 0.7:
            d.call_s = 4e-3
        return real()

    counter = dataclasses.replace(d.counter(), sm_mhz=lambda: 1980)
    r, _ = steady_window(d, counter, min_window_s=1.0, fn=call)
    trace = r["trace"]
    assert trace["every_s"] == energy.TRACE_EVERY_S
    assert len(trace["t_s"]) >= 0.9 * r["window_s"] / energy.TRACE_EVERY_S - 1
    assert trace["t_s"] == sorted(trace["t_s"]) and trace["calls"] == sorted(trace["calls"])
    assert trace["calls"][-1] <= r["calls"] and trace["joules"][-1] <= r["joules"] + 1e-3  # marks rounded to 0.1 mJ
    low, high = trace["calls_per_s"]
    assert low == pytest.approx(250, rel=0.05) and high == pytest.approx(500, rel=0.05)  # 4 ms, then 2 ms a call
    assert trace["sm_mhz_range"] == [1980, 1980]  # the clock held: the device was not slowed
    # a counter without a clock (RAPL's): the marks without it
    plain = Device(watts=50.0, call_s=1e-3, period_s=0.01)
    r, _ = steady_window(plain, plain.counter(), min_window_s=0.25)
    assert r["trace"]["sm_mhz_range"] is None and set(r["trace"]["sm_mhz"]) == {None}
    assert r["trace"]["calls_per_s"][0] == pytest.approx(1000, rel=0.05)


def test_energy_and_time_come_from_the_same_calls_even_when_the_host_changes_speed():
    """The H100's gpt2 torch-compile processes made 107-189 calls a second in their energy
    window and 186 in their timed one: two windows, two host speeds. Read from the steady
    window, the energy's calls are timed samples: a host that slows halfway slows both."""
    d = Device(watts=300.0, call_s=2e-3, period_s=0.05)
    real = d.call

    def call():
        if d.t > 0.6:
            d.call_s = 5e-3
        return real()

    r, st = steady_window(d, d.counter(), min_window_s=1.0, fn=call)
    first, last = r["samples"]
    timed = sum(st.samples[first - 1:last])  # one call a sample: the timed calls the energy window covers
    assert timed == pytest.approx(r["window_s"], rel=0.02)
    assert r["calls"] / r["window_s"] == pytest.approx(r["calls"] / timed, rel=0.02)


class FakeNVML(types.ModuleType):
    """pynvml with one GPU: its energy counter (millijoules) and its process list."""

    class NVMLError_NotSupported(Exception):
        pass

    def __init__(self, supported=True, pids=()):
        super().__init__("pynvml")
        self.supported, self.pids, self.mj = supported, list(pids), 0

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, i):
        return ("gpu", i)

    def nvmlDeviceGetHandleByUUID(self, u):
        return ("gpu", u)

    NVML_CLOCK_SM = 1

    def nvmlDeviceGetClockInfo(self, handle, which):
        assert which == self.NVML_CLOCK_SM
        return 1755

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if not self.supported:
            raise self.NVMLError_NotSupported("Not Supported")
        self.mj += 7
        return self.mj

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [types.SimpleNamespace(pid=p) for p in self.pids]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle):
        return []


def test_a_gpu_without_the_counter_records_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML(supported=False))
    counter, why = energy.nvml_counter("0")
    assert counter is None and "no total-energy counter in NVML" in why and "Volta" in why
    meter, r = energy.open_window("cuda")
    assert meter is None and r == {"source": "nvml", "why": why}


def test_a_mig_slice_records_that_the_counter_is_the_whole_gpus(monkeypatch):
    """On a MIG slice NVML has no energy counter of its own: the reason says so, not "before Volta"."""
    fake = FakeNVML(supported=False)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-5f3c1a9e-0000-4e2b-9d1c-1234567890ab")
    counter, why = energy.nvml_counter()
    assert counter is None and "MIG slice" in why and "whole GPU" in why and "Volta" not in why
    # a MIG handle named by index, where NVML says what it is
    fake.nvmlDeviceIsMigDeviceHandle = lambda handle: True
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert "MIG slice" in energy.nvml_counter()[1]
    fake.nvmlDeviceIsMigDeviceHandle = lambda handle: False
    assert "Volta" in energy.nvml_counter()[1]


def test_nvml_reads_millijoules_as_joules_and_another_process_voids_the_figure(monkeypatch):
    import os

    fake = FakeNVML(pids=[os.getpid(), 424242])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    counter, why = energy.nvml_counter("0")
    assert why is None and counter.read() == pytest.approx(fake.mj / 1e3)
    assert counter.sm_mhz() == 1755  # the window's marks read the same GPU's SM clock
    assert energy.foreign_gpu_processes("0") == [424242]  # ours is not foreign
    meter, _ = energy.open_window("cuda")
    monkeypatch.setattr(meter, "record", lambda: {"source": "nvml", "scope": "x", "joules_per_call": 0.5,
                                                  "mean_power_w": 250.0, "window_s": 1.0})
    r = energy.close_window("cuda", meter)
    assert r["voided"].startswith("1 other process(es) on the GPU (pids 424242)")
    from stackwars.records import _energy_row

    row = _energy_row(r)
    assert row["energy_j_per_call"] is None and row["energy_why"] == r["voided"]  # voided: decides nothing


def test_a_cpu_cell_without_rapl_records_why_and_with_rapl_reads_it_across_a_wrap(tmp_path):
    counter, why = energy.rapl_counter(str(tmp_path / "intel-rapl:[0-9]*"))
    assert counter is None and "no RAPL powercap zone" in why
    zone = tmp_path / "intel-rapl:0"
    zone.mkdir()
    (zone / "energy_uj").write_text("999000000\n")
    (zone / "max_energy_range_uj").write_text("999999999\n")
    (tmp_path / "intel-rapl:0:0").mkdir()  # a subzone (core): inside the package, not added again
    counter, why = energy.rapl_counter(str(tmp_path / "intel-rapl:[0-9]*"))
    assert why is None and "1 RAPL zone(s)" in counter.scope
    (zone / "energy_uj").write_text("500000\n")  # wrapped past its range: 999999999 -> 500000
    assert counter.read() == pytest.approx((999_999_999 + 1 - 999_000_000 + 500_000) / 1e6)
    assert "no DRAM zone" in counter.scope
    # a server's DRAM zone is beside the package's energy, not inside it: added; the core zone is not
    (tmp_path / "intel-rapl:0:0" / "name").write_text("core\n")
    (tmp_path / "intel-rapl:0:0" / "energy_uj").write_text("7\n")
    dram = tmp_path / "intel-rapl:0:1"
    dram.mkdir()
    (dram / "name").write_text("dram\n")
    (dram / "energy_uj").write_text("1000000\n")
    (dram / "max_energy_range_uj").write_text("999999999\n")
    counter, why = energy.rapl_counter(str(tmp_path / "intel-rapl:[0-9]*"))
    assert why is None and "package(s) and DRAM (2 RAPL zone(s))" in counter.scope
    (zone / "energy_uj").write_text("2500000\n")  # +2 J in the package
    (dram / "energy_uj").write_text("1500000\n")  # +0.5 J in the memory
    (tmp_path / "intel-rapl:0:0" / "energy_uj").write_text("999999\n")  # the core's, inside the package's
    assert counter.read() == pytest.approx(2.5)


def test_a_real_cpu_cell_records_its_energy_or_why_not(plugins_env):
    from stackwars import runner
    from stackwars.records import CellSpec, MeasureConfig

    config = MeasureConfig(warmup=1, min_samples=3, min_time_s=0.05, timeout_s=120)
    m = runner.measure_one(CellSpec("gemm", "tiny", "forward", "torch-eager"), config, {"torch": {"importable": True}},
                           None)
    assert m.status == "ok", m.error
    e = m.settings["energy"]
    assert e["source"] == "rapl"
    row = m.to_row()
    if e.get("joules_per_call"):  # a host whose RAPL this process may read
        assert row["energy_j_per_call"] > 0 and e["window_s"] >= energy.MIN_WINDOW_S["cpu"]
    else:
        assert row["energy_j_per_call"] is None and row["energy_why"] == e["why"] and e["why"]
    off = runner.measure_one(CellSpec("gemm", "tiny", "forward", "torch-eager"),
                             dataclasses.replace(config, energy=False), {"torch": {"importable": True}}, None)
    assert "energy" not in off.settings and off.to_row()["energy_why"].startswith("not measured")


def _with_energy(m, joules):
    settings = dict(m.settings or {})
    settings["energy"] = {"source": "nvml", "scope": "x", "joules_per_call": joules, "mean_power_w": 300.0,
                          "window_s": 1.0}
    return dataclasses.replace(m, settings=settings)


def test_the_verdict_gives_the_energy_ratio_with_its_ci_and_the_report_a_column(tmp_path):
    cells = [_with_energy(_cell("torch-compile", 1.0, p), 0.010 * (1 + 0.01 * p)) for p in range(3)]
    cells += [_with_energy(_cell("jax-jit", 1.2, p), 0.008 * (1 + 0.01 * p)) for p in range(3)]
    _, found = _store(tmp_path / "e.db", cells)
    (v,) = vd.verdicts(found)
    assert v["verdict"] == "PyTorch faster"  # slower, yet it uses less energy a call
    assert v["energy_ratio"] == pytest.approx(0.8, rel=0.01)
    assert v["energy_ci_low"] < v["energy_ratio"] < v["energy_ci_high"] < 1.0
    assert v["energy_verdict"] == "JAX uses less"
    assert v["torch_energy_j"] == pytest.approx(0.0101) and v["jax_energy_j"] == pytest.approx(0.00808)
    column = view.cells(v)[view.COLUMNS.index("energy JAX/PyTorch (CI)")]
    assert column.startswith("0.800 (") and column.endswith("10.1 mJ / 8.08 mJ a call")
    assert "energy JAX/PyTorch (CI)" in view.markdown([v])
    assert view.forest_png([v])[:8] == b"\x89PNG\r\n\x1a\n"


def test_too_few_processes_with_a_figure_give_no_energy_ratio_and_say_why(tmp_path):
    cells = [_with_energy(_cell("torch-compile", 1.0, p), 0.01) for p in range(3)]
    cells += [_cell("jax-jit", 1.2, p) for p in range(3)]  # no energy figure on the JAX side
    _, found = _store(tmp_path / "e.db", cells)
    (v,) = vd.verdicts(found)
    assert v["energy_ratio"] is None and v["verdict"] == "PyTorch faster"  # the time verdict stands
    assert v["energy_why"].startswith("3 PyTorch / 0 JAX process(es) with an energy figure; the ratio needs 3")
    assert view.cells(v)[view.COLUMNS.index("energy JAX/PyTorch (CI)")] == "—"


def test_a_runs_summary_says_what_it_spent(tmp_path):
    from stackwars import orchestrate

    rows = [{"device": "cuda", "wall_s": 1800.0, "energy_j_per_call": 0.01, "energy_power_w": 300.0,
             "energy_window_s": 1.5},
            {"device": "cuda", "wall_s": 1800.0, "energy_j_per_call": None, "energy_power_w": None},
            {"device": "cpu", "wall_s": 36.0}]
    s = orchestrate.spent(rows)
    assert s["device_hours"] == {"cuda": pytest.approx(1.0), "cpu": pytest.approx(0.01)}
    assert s["energy_windows"] == 1 and s["energy_windows_j"] == pytest.approx(450.0)
    text = orchestrate.spent_text(s)
    assert "3 cell-process(es), 60.6 min of worker time (1 cuda-hours, 0.01 cpu-hours)" in text
    assert "energy measured in 1 window(s) of 1.5 s in all: 450 J" in text


def test_the_gpu_checks_power_comparison_lines_windows_up_with_nvidia_smi_samples():
    from datetime import datetime

    from stackwars import gpucheck

    def stamp(t):
        return datetime.fromtimestamp(t).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]

    # power.draw as an Ampere-or-newer GPU reports it, the mean over the last second: the GPU
    # idles at 100 W until 1000.0, then draws 400 W, so the samples climb for a second after.
    def drawn(t):
        return 100.0 + 300.0 * min(1.0, max(0.0, t - 1000.0))

    csv = "\n".join([f"{stamp(999.0 + 0.1 * i)}, {drawn(999.0 + 0.1 * i):.2f}" for i in range(41)]
                    + ["[N/A], [N/A]"])
    cells = [{"cell_key": "a", "energy_power_w": 404.0, "energy_started_unix": 1000.0, "energy_ended_unix": 1002.02},
             {"cell_key": "b", "energy_power_w": None},
             {"cell_key": "c", "energy_power_w": 300.0, "energy_started_unix": 5000.0, "energy_ended_unix": 5001.0},
             {"cell_key": "d", "energy_power_w": 380.0, "energy_started_unix": 1000.0, "energy_ended_unix": 1000.8}]
    a, b, c, d = gpucheck.power_check(cells, csv)
    # only the samples at 1001.0 ... 1002.0 averaged a second wholly inside the window
    assert a["smi_samples"] == 11 and a["smi_w"] == 400.0 and a["ratio"] == pytest.approx(1.01)
    # every sample inside it, the lagging ones too, reads a fifth under the counter
    assert a["smi_samples_any"] == 21 and a["smi_w_any"] == pytest.approx(321.4, abs=0.1)
    assert b["why"] == "no energy window in this cell" and c["why"] == "no nvidia-smi sample inside it"
    assert "ratio" not in d and "1 s average lies inside the 0.80 s window" in d["why"]
    assert "energy" in gpucheck.BY_NAME and not gpucheck.BY_NAME["energy"].proof


def test_the_same_energy_on_both_sides_is_a_tie(tmp_path):
    """A/A for the energy ratio: both bests drawing the same joules a call, with 1% spread
    between processes, come out a tie with 1 inside the CI."""
    cells = [_with_energy(_cell("torch-compile", 1.0, p), 0.010 * (1 + 0.01 * (p - 1))) for p in range(3)]
    cells += [_with_energy(_cell("jax-jit", 1.0, p, seed=1), 0.010 * (1 - 0.01 * (p - 1))) for p in range(3)]
    _, found = _store(tmp_path / "aa.db", cells)
    (v,) = vd.verdicts(found)
    assert v["energy_verdict"] in ("same energy", "no difference found") and v["energy_ci_low"] < 1.0 < v["energy_ci_high"]
