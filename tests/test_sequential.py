"""The verdict's group-sequential design (stackwars/verdict/sequential.py), checked against
independent references: Student's t and the normal from scipy, and paths of normal rounds drawn
here with a generator of their own, read with a plain t statistic (not the module's simulation)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from stackwars import stats
from stackwars.verdict import sequential as sq

LOOKS = sq.schedule(4, 16)


def _t(rounds: np.ndarray) -> np.ndarray:
    """The paired t statistic of each path's rounds so far (a path a row)."""
    n = rounds.shape[1]
    return np.abs(rounds.mean(1)) / (rounds.std(1, ddof=1) / math.sqrt(n))


def test_the_looks_are_the_first_then_every_two_up_to_the_cap():
    assert LOOKS == (4, 6, 8, 10, 12, 14, 16)
    assert sq.schedule(3, 6) == (3, 5, 6) and sq.schedule(4, None) == (4,) and sq.schedule(16, 16) == (16,)
    assert [sq.look_at(n, LOOKS) for n in (3, 4, 5, 9, 16, 20)] == [-1, 0, 0, 2, 6, 6]
    assert stats.default_max_processes(4) == 16 and stats.default_max_processes(20) == 20


def test_the_spending_function_is_obrien_flemings():
    """Lan-DeMets: alpha at the cap, almost nothing at a quarter of it, and always rising."""
    assert sq.spent(1.0, 0.05) == 0.05 and sq.spent(0.0, 0.05) == 0.0
    assert sq.spent(0.25, 0.05) == pytest.approx(2 * sps.norm.sf(1.959964 / 0.5), rel=1e-5)
    assert sq.spent(0.25, 0.05) < 1e-4
    fractions = np.linspace(0.05, 1.0, 20)
    assert all(np.diff([sq.spent(f, 0.05) for f in fractions]) > 0)


@pytest.mark.parametrize("alpha", [stats.VERDICT_ALPHA, stats.VERDICT_ALPHA / 6])
def test_a_row_read_at_every_look_names_a_false_winner_alpha_of_the_time(alpha):
    """200,000 paths of normal rounds with no difference, drawn here: the share whose t statistic
    reaches its look's critical value at any of the seven looks is alpha (the boundary's own paths
    are another generator's); the first look's critical value is Student's t quantile exactly, and
    each look's level is what its interval is read at."""
    c = np.array(sq.critical(LOOKS, alpha))
    assert c[0] == pytest.approx(sps.t.ppf(1 - sq.spent(4 / 16, alpha) / 2, 3))
    assert all(np.diff(c) < 0)  # O'Brien-Fleming: the early looks are the hardest to pass
    rng = np.random.default_rng(12345)
    rounds = rng.standard_normal((200_000, 16))
    crossed = np.zeros(len(rounds), bool)
    for k, n in enumerate(LOOKS):
        crossed |= _t(rounds[:, :n]) >= c[k]
    assert crossed.mean() == pytest.approx(alpha, rel=0.06)
    for k, n in enumerate(LOOKS):  # the interval at 1 - level excludes 1 exactly at the critical value
        assert sq.level(k, LOOKS, alpha) == pytest.approx(2 * sps.t.sf(c[k], n - 1), rel=1e-9) or c[k] == math.inf
    assert sq.level(0, (4,), alpha) == pytest.approx(alpha)  # one look: all of it


def test_same_speed_at_the_margin_is_shown_at_most_five_percent_of_the_time_over_all_looks():
    """Two one-sided tests at the equivalence levels, read at every look: a true ratio on the
    margin itself (+10%) reads "same speed" at most 5% of the time (the plain 90% interval at every
    look: 14% in simulation), and a true ratio of 1 reads it most of the time by the cap."""
    rng = np.random.default_rng(7)
    margin, sd = 0.10, 0.08
    for mean, most in ((math.log1p(margin), False), (0.0, True)):
        rounds = rng.normal(mean, sd, (40_000, 16))
        same = np.zeros(len(rounds), bool)
        for k, n in enumerate(LOOKS):
            x = rounds[:, :n]
            conf = sq.equivalence_confidence(k, LOOKS)
            half = sps.t.ppf(0.5 + conf / 2, n - 1) * x.std(1, ddof=1) / math.sqrt(n)
            same |= (x.mean(1) - half > -math.log1p(margin)) & (x.mean(1) + half < math.log1p(margin))
        if most:
            assert same.mean() > 0.9
        else:
            assert same.mean() <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / len(rounds)), same.mean()
    assert 0.93 < sq.equivalence_confidence(len(LOOKS) - 1, LOOKS) < 0.95  # the last look's: about 94%
    assert sq.within(stats.Comparison(1.0, 0.92, 1.09, False), 0.10)
    assert not sq.within(stats.Comparison(1.0, 0.90, 1.09, False), 0.10)


def test_holm_step_down_over_a_fixed_family_and_a_row_before_its_first_look():
    """Three rows: one far from 1, one barely, one before its first look (in the family, never shown
    to differ). The far one is read at alpha/3 and shown to differ; the next at alpha/2."""
    reads = [sq.Read(3, LOOKS), sq.Read(3, LOOKS), sq.Read(-1, LOOKS)]
    asked = []

    def compare_at(i, confidence):
        asked.append((i, confidence))
        return [stats.Comparison(0.5, 0.4, 0.6, True), stats.Comparison(1.0, 0.9, 1.1, False),
                stats.Comparison(2.0, 1.5, 2.5, True)][i]

    out = sq.step_down(reads, compare_at)
    assert out[0][2] == 0 and out[0][0] == pytest.approx(sq.confidence(3, LOOKS, 0.05 / 3))
    assert out[1][2] == 1 and out[1][0] == pytest.approx(sq.confidence(3, LOOKS, 0.05 / 2))
    assert out[2][2] is None and out[2][0] == pytest.approx(sq.confidence(0, LOOKS, 0.05 / 3))


def test_futility_waits_for_a_third_of_the_cap_and_does_not_stop_a_row_that_may_still_decide():
    rng = np.random.default_rng(3)
    hopeless = list(rng.normal(0.07, 0.30, 8))  # 7% apart, 30% spread: no 15% by 16 rounds, nor the same speed
    ch = sq.chances(hopeless, LOOKS, 0.05)
    assert ch["difference"] < 0.1 and ch["same"] < 0.1 and ch["rounds"] == 16
    assert sq.futile(ch, 8) and not sq.futile(ch, 4)  # 4 rounds: a spread from 3 degrees of freedom
    near = list(rng.normal(0.0, 0.05, 8))  # the same speed, about to be shown
    assert not sq.futile(sq.chances(near, LOOKS, 0.05), 8)
    apart = list(rng.normal(0.14, 0.08, 6))
    assert sq.decide_chance(apart, LOOKS, 2, 0.05) > 0.5 and sq.rounds_needed(apart, LOOKS, 0.05, after=1) == 8
    assert sq.chances([0.1], LOOKS, 0.05) is None


def test_quantiles_come_from_scipy():
    assert stats.t_quantile(0.975, 2) == pytest.approx(4.302653, rel=1e-6)
    assert stats._z(0.95) == pytest.approx(1.959964, rel=1e-6)
    with pytest.raises(ValueError):
        stats.t_quantile(0.4, 3)
