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


def test_summaries_and_draws_are_computed_once_per_samples_and_stay_what_a_fresh_computation_gives(monkeypatch):
    """A report, a verdict and each look of a run build the same rows again: the bootstrap of
    samples already seen is read back, not redone; other samples, another noise threshold or
    other process lists are computed; what is read back cannot be changed by a caller."""
    rng = np.random.default_rng(7)
    a, b = rng.normal(1.0, 0.05, 30), rng.normal(1.1, 0.05, 30)
    monkeypatch.setattr(stats, "_SUMMARIES", stats._Memo(4))
    monkeypatch.setattr(stats, "_DRAWS", stats._Memo(4))
    fresh = stats.summarize(a)
    boots, draws = [], []
    real_boot, real_draws = stats.bootstrap_median_ci, stats.hierarchical_draws
    monkeypatch.setattr(stats, "bootstrap_median_ci", lambda *x, **k: boots.append(1) or real_boot(*x, **k))
    monkeypatch.setattr(stats, "hierarchical_draws", lambda *x, **k: draws.append(1) or real_draws(*x, **k))
    assert stats.summarize(list(a)) == fresh and boots == []  # a list of the same values: read back
    assert stats.summarize(a, noise_threshold=0.5).noisy is False and boots == [1]
    stats.summarize(b)
    assert len(boots) == 2
    first = stats.compare([a, b], [b, a])
    assert stats.compare([a, b], [b, a]) == first and len(draws) == 2  # one draw per side, once
    stats.compare([a, b], [b, a, a])
    assert len(draws) == 3  # the other side changed: drawn again
    _, logs = stats._log_draws([a, b], stats.BOOTSTRAP_RESAMPLES, stats.BOOTSTRAP_SEED)
    with pytest.raises(ValueError):
        logs[0] = 0.0
    for i in range(10):  # the memo stays within its size, the oldest going first
        stats.summarize(a + i)
    assert len(stats._SUMMARIES.items) == 4
    monkeypatch.setattr(stats, "_SUMMARIES", stats._Memo(4))
    assert stats.summarize(a) == fresh  # computed again from nothing: the same value


@pytest.mark.parametrize("kind", ["distinct", "ties", "signed"])
def test_resampled_medians_are_numpys_medians_of_the_same_draws_bit_for_bit(kind):
    """The bootstrap's resample medians come from rank counts (stats._resampled_medians), not a
    sort per resample: each must equal np.median of the same resample exactly, for odd and even
    n, ties and negative values, one chunk of draws or many (n = 20,000: 100 resamples a chunk)."""
    from stackwars.stats import _resampled_medians

    g = np.random.default_rng(11)
    for n in (*range(2, 24), 64, 127, 128, 129, 1001, 20_000):
        a = {"distinct": g.lognormal(size=n), "ties": g.integers(0, 3, size=n).astype(float),
             "signed": g.normal(size=n)}[kind]
        draws = 300
        rng = np.random.default_rng(5)
        chunk = max(1, 2_000_000 // n)
        expected = np.concatenate([np.median(a[rng.integers(0, n, size=(min(draws, s + chunk) - s, n))], axis=1)
                                   for s in range(0, draws, chunk)])
        assert np.array_equal(_resampled_medians(a, draws, np.random.default_rng(5)), expected), (kind, n)
