import numpy as np
import pytest

from stackwars import stats


def test_summary_of_known_samples():
    s = stats.summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s.median == 3.0
    assert s.mean == 22.0  # the straggler drags the mean, not the median
    assert (s.q25, s.q75, s.iqr) == (2.0, 4.0, 2.0)
    assert s.ci_low <= s.median <= s.ci_high
    assert s.n == 5


def test_bootstrap_ci_is_deterministic_and_shrinks_with_n():
    rng = np.random.default_rng(1)
    small = rng.normal(10.0, 1.0, 20)
    large = rng.normal(10.0, 1.0, 2000)
    a, b = stats.bootstrap_median_ci(small), stats.bootstrap_median_ci(small)
    assert a == b
    lo_s, hi_s, _ = a
    lo_l, hi_l, _ = stats.bootstrap_median_ci(large)
    assert hi_l - lo_l < (hi_s - lo_s) / 3
    assert lo_l < 10.0 < hi_l


def test_large_samples_use_order_statistics():
    x = np.random.default_rng(0).normal(5.0, 1.0, stats.BOOTSTRAP_MAX_N + 1)
    lo, hi, method = stats.bootstrap_median_ci(x)
    assert method == "order statistics"
    assert lo < np.median(x) < hi and hi - lo < 0.1


def test_noise_flag():
    assert not stats.summarize([1.0, 1.01, 0.99, 1.0]).noisy
    assert stats.summarize([1.0, 2.0, 1.0, 2.0, 1.5]).noisy
    assert not stats.summarize([1.0, 2.0, 1.0, 2.0, 1.5], noise_threshold=2.0).noisy


def test_compare_detects_real_differences_only():
    rng = np.random.default_rng(2)
    base = rng.normal(1.0, 0.05, 200)
    slower = rng.normal(1.2, 0.05, 200)
    same = rng.normal(1.0, 0.05, 200)
    c = stats.compare(base, slower)
    assert c.significant and c.ci_low > 1.1 and c.ratio == pytest.approx(1.2, rel=0.03)
    assert not stats.compare(base, same).significant
    assert "not significant" in stats.compare(base, same).describe()


def test_rejects_empty_and_non_finite():
    with pytest.raises(ValueError):
        stats.summarize([])
    with pytest.raises(ValueError):
        stats.summarize([1.0, float("nan")])
