import numpy as np

from stackwars.harness.memory import PeakRSS, current_rss


def test_peak_rss_sees_a_transient_allocation():
    rss = PeakRSS()
    base = current_rss()
    rss.reset()
    a = np.ones(50 * 2**20 // 8 * 4)  # 200 MiB, touched
    del a
    peak = rss.peak()
    rss.stop()
    assert peak - base >= 150 * 2**20
    assert current_rss() < peak  # it was freed: only a peak counter can have seen it


def test_reset_opens_a_new_window():
    rss = PeakRSS()
    a = np.ones(25 * 2**20)  # 200 MiB
    del a
    rss.reset()
    peak = rss.peak()
    rss.stop()
    assert peak < current_rss() + 100 * 2**20


def test_a_device_peak_reached_before_the_first_call_is_no_memory_figure():
    """XLA's peak cannot be reset: on the H200 llama3-8b's jax-jit peak (33.4 GB) was already
    reached while its weights were placed, before the first call, and the verdict read it as
    the program's. Such a peak gives no memory figure; PyTorch's, reset before the first
    call, and an XLA peak that grew in the window, still do."""
    from stackwars.records import MemoryStats, _peak_before_first_call
    from stackwars.verdict.figures import added_memory

    mem = MemoryStats(peak_device_bytes=33_401_872_384)
    xla = {"peak_before_first_call_bytes": 33_401_872_384, "resets": False}
    old_xla = {"peak_before_first_call_bytes": 33_401_872_384, "how": "no reset in XLA's allocator: ..."}
    assert _peak_before_first_call(mem, xla) and _peak_before_first_call(mem, old_xla)
    assert not _peak_before_first_call(mem, {**xla, "peak_before_first_call_bytes": 16 * 2**30})
    assert not _peak_before_first_call(mem, {"peak_before_first_call_bytes": 40 * 2**30, "resets": True})
    assert not _peak_before_first_call(mem, {}) and not _peak_before_first_call(None, xla)
    row = {"peak_device_bytes": mem.peak_device_bytes, "peak_rss_bytes": 5 * 2**30, "baseline_rss_bytes": 2**30}
    assert added_memory(row) == mem.peak_device_bytes
    assert added_memory({**row, "device_peak_before_first_call": True}) is None  # not the host's RSS instead


def test_a_compiled_cells_memory_is_its_warm_processes_compile_left_out():
    """Issue 65: the cold process (its compile cache empty) held what compiling left behind, 25-57 MiB
    more than the warm ones of every compiled cell, against the promise "compile left out". The
    figure is the warm processes'; an eager cell's processes (all "cold": nothing to cache) all count."""
    from stackwars.report import tables
    from stackwars.verdict import figures

    mib = 2**20

    def proc(cache, added_mib):
        return {"status": "ok", "cache": cache, "baseline_rss_bytes": 500 * mib,
                "peak_rss_bytes": (500 + added_mib) * mib}

    compiled = figures._figures([proc("cold", 155), proc("warm", 98), proc("warm", 97)], 0.1)
    assert compiled["memory_added_bytes"] == 97.5 * mib and compiled["memory_cache"] == "warm"
    assert sorted(compiled["process_memory_bytes"]) == [97 * mib, 98 * mib]
    assert compiled["first_call_cache"] == "cold"  # the first call is still the cold process's
    eager = figures._figures([proc("cold", 40), proc("cold", 42), proc("cold", 41)], 0.1)
    assert eager["memory_added_bytes"] == 41 * mib and eager["memory_cache"] == "cold"
    assert len(eager["process_memory_bytes"]) == 3
