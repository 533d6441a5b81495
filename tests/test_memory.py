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
