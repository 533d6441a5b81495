"""The verdict's group-sequential design: when a row is read, at what level, and when it stops.

A row's ratio JAX / PyTorch is decided on rounds (one fresh process of each chosen cell, back to
back): the log of each round's ratio is one observation, and the paired t statistic over the
rounds measured so far is read at *looks*: after ``first`` rounds (``run --processes``, 4 by
default), then every ``LOOK_STEP`` rounds more, up to ``cap`` (``run --max-processes``, 16): the
looks 4, 6, 8, ..., 16 (``schedule``). A round with a busy process decides nothing and is
replaced; it never uses up a look, since a look is a count of clean rounds.

* **Where the error is spent** (Jennison & Turnbull, *Group Sequential Methods*, ch. 7): a
  Lan-DeMets spending function of O'Brien-Fleming shape, alpha(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)),
  t = rounds / cap, the error all looks together may spend by t (``spent``). Little goes at the
  early looks, where a t statistic of 3 degrees of freedom is too wide to be worth much, and
  nearly all at the last, which reads close to a single test of ``cap`` rounds; a row with a
  large difference still stops at its first or second look. Each look's critical |t|
  (``critical``) is found by simulating the paired t statistics themselves, not normal ones:
  each look's new rounds are a block whose sum is a normal and whose spread about its own mean is
  an independent chi-square, so the statistics of all looks of one path are exact for normal
  rounds, and each look's variance is estimated again from few rounds (a normal boundary would
  spend more than alpha). ``level`` turns a critical value into the nominal two-sided level at
  which the row's interval is read (stats.compare_paired at 1 - level).
* **Rows read together** (``step_down``): Holm's step-down over a family fixed at the first look
  (every row of the machine with a best on both sides, whatever its rounds), each row on the
  boundary of alpha / (m - r) once r rows are shown to differ (a group-sequential Holm procedure:
  the first true null to be rejected crossed its alpha / m0 boundary, which happens at most
  alpha / m0 of the time for each, so at most alpha for all: the union bound).
* **Same speed** (``equivalence_confidence``): two one-sided tests (Schuirmann's TOST) at a margin
  declared before the run (``run --margin``, +-10% by default): the row is the same speed when
  its interval at 1 - 2 beta lies within 1/(1+x) .. 1+x. Each one-sided test spends
  ``EQUIVALENCE_ALPHA`` (5%) over all looks on the same O'Brien-Fleming shape (read at every look
  with a plain 90% interval, a true ratio on the margin read "same speed" 14% of the time in
  simulation, not 5%); the last of seven looks reads a 94% interval, the earlier ones wider.
* **Futility** (``chances``, ``futile``): from the look whose rounds reach a third of the cap's, a row
  may stop when its chance of deciding, by the cap, a 15% difference (conditional power under a
  true 15% in either direction, the spread as estimated) and of showing the same speed (the
  estimate taken as the truth) are both below 10%. It does not bind: the boundaries are computed
  as if every row went on to the cap, so stopping early only removes chances to name a winner.
* **What a row would need** (``rounds_needed``): with its estimate and spread taken as the truth,
  the first look at which it would decide at least half the time; a run whose budget ran out
  says it, in rounds and seconds.

Quantiles and distributions come from ``scipy.stats``. Everything here is pure numpy and scipy,
deterministic (a fixed seed), and computed once a process for each set of arguments.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from scipy import special
from scipy import stats as sps

from stackwars.stats import LOOK_STEP, MARGIN, VERDICT_ALPHA, Comparison

EQUIVALENCE_ALPHA = 0.05  # each one-sided test of TOST, over all looks
FUTILITY_DIFFERENCE = 0.15  # the difference whose chance of being decided the futility rule reads
FUTILITY_CHANCE = 0.10  # below this chance of deciding either way by the cap, a row may stop
FUTILITY_FROM = 1 / 3  # ... from the look whose rounds reach this share of the cap (3 rounds' spread is too rough)
PATHS = 1_000_000  # simulated paths of each boundary (levels to about 1e-5; the first look is exact)
SEED = 20_241_122


def schedule(first: int, cap: int | None, step: int = LOOK_STEP) -> tuple[int, ...]:
    """The rounds at which a row is read: ``first``, then every ``step`` more, up to ``cap``
    (itself a look where the steps pass it). One look where there is no cap above ``first``."""
    first = max(1, int(first))
    if not cap or cap <= first:
        return (first,)
    out = list(range(first, int(cap) + 1, max(1, int(step))))
    if out[-1] != cap:
        out.append(int(cap))
    return tuple(out)


def look_at(rounds: int, looks: Sequence[int]) -> int:
    """The look a row with ``rounds`` clean rounds is read at: the last whose rounds it has (its
    first ``looks[k]`` rounds decide; a round beyond waits for the next look); -1 before the first."""
    k = -1
    for i, n in enumerate(looks):
        if rounds >= n:
            k = i
    return k


def spent(fraction: float, alpha: float) -> float:
    """The error all looks up to ``fraction`` of the cap's rounds may spend together: the Lan-DeMets
    function of O'Brien-Fleming shape, 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)); alpha at t = 1."""
    if fraction >= 1.0:
        return alpha
    if fraction <= 0.0:
        return 0.0
    return float(2.0 * sps.norm.sf(sps.norm.isf(alpha / 2.0) / math.sqrt(fraction)))


@functools.lru_cache(maxsize=4)
def _paths(looks: tuple[int, ...], paired: bool) -> np.ndarray:
    """|statistic| of every simulated path at every look (PATHS x looks, float32): the paired t over
    the rounds so far where ``paired``, else a normal statistic at the looks' information fractions
    (an unpaired row, from separate runs, is read on a normal statistic)."""
    rng = np.random.default_rng(SEED)
    out = np.empty((PATHS, len(looks)), dtype=np.float32)
    if not paired:
        t = np.asarray(looks, float) / looks[-1]
        w = np.cumsum(rng.standard_normal((PATHS, len(looks))) * np.sqrt(np.diff(t, prepend=0.0)), axis=1)
        out[:] = np.abs(w / np.sqrt(t))
        return out
    total = np.zeros(PATHS)
    squares = np.zeros(PATHS)
    before = 0
    for k, n in enumerate(looks):
        block = n - before  # the rounds this look adds: their sum, and their spread about their own mean
        s = rng.standard_normal(PATHS) * math.sqrt(block)
        within = rng.chisquare(block - 1, PATHS) if block > 1 else 0.0
        total += s
        squares += within + s * s / block
        var = np.maximum(squares - total * total / n, 1e-300) / (n - 1)
        out[:, k] = np.abs(total / n) / np.sqrt(var / n)
        before = n
    return out


@functools.lru_cache(maxsize=1024)
def critical(looks: tuple[int, ...], alpha: float, paired: bool = True) -> tuple[float, ...]:
    """The critical |t| (|z| unpaired) of each look, so that a row read at every look crosses one
    at most ``alpha`` of the time between equal programs, its looks spending ``spent``. The first
    look's is exact (Student's t quantile); the later ones are the simulated paths' quantiles among
    those not stopped before. inf where a look may spend nothing (too few paths to tell)."""
    looks = tuple(int(n) for n in looks)
    if paired and looks[0] < 2:
        raise ValueError(f"a paired statistic needs 2 rounds at its first look, got {looks[0]}")
    if len(looks) == 1:
        q = 1.0 - alpha / 2.0
        return (float(sps.t.ppf(q, looks[0] - 1) if paired else sps.norm.ppf(q)),)
    stat = _paths(looks, paired)
    alive = np.ones(PATHS, bool)
    out, used = [], 0.0
    for k, n in enumerate(looks):
        target = spent(n / looks[-1], alpha)
        if k == 0:
            q = 1.0 - target / 2.0
            c = float(sps.t.ppf(q, n - 1) if paired else sps.norm.ppf(q)) if target > 0 else math.inf
        else:
            need = int(round((target - used) * PATHS))  # the paths this look may stop, falsely
            live = stat[alive, k]
            c = float(np.partition(live, live.size - need)[live.size - need]) if 0 < need <= live.size else math.inf
        hit = alive & (stat[:, k] >= c)
        used += float(hit.mean())
        alive &= ~hit
        out.append(c)
    return tuple(out)


def level(look: int, looks: Sequence[int], alpha: float = VERDICT_ALPHA, paired: bool = True) -> float:
    """The nominal two-sided level a row is read at, at look ``look`` (an index into ``looks``):
    its interval at 1 - level excludes 1 exactly where its statistic reaches the look's critical
    value. 0 where the look may spend nothing."""
    looks = tuple(int(n) for n in looks)
    return _level(min(max(look, 0), len(looks) - 1), looks, float(alpha), paired)


@functools.lru_cache(maxsize=4096)
def _level(look: int, looks: tuple[int, ...], alpha: float, paired: bool) -> float:
    c = critical(looks, alpha, paired)[look]
    if not math.isfinite(c):
        return 0.0
    return float(2.0 * (sps.t.sf(c, looks[look] - 1) if paired else sps.norm.sf(c)))


def forget() -> None:
    """Drop the boundaries worked out so far (a test that changes the spending function)."""
    critical.cache_clear()
    _level.cache_clear()


def confidence(look: int, looks: Sequence[int], alpha: float = VERDICT_ALPHA, paired: bool = True) -> float:
    """The confidence of the interval a row's difference is read on at ``look``."""
    return 1.0 - level(look, looks, alpha, paired)


def equivalence_confidence(look: int, looks: Sequence[int], alpha: float = EQUIVALENCE_ALPHA,
                           paired: bool = True) -> float:
    """The confidence of the interval TOST reads at ``look``: 1 - 2 beta, where beta is the one-sided
    level of a boundary spending ``alpha`` on each side over all looks (the two-sided boundary of
    2 alpha, whose levels are twice the one-sided ones)."""
    return 1.0 - level(look, looks, 2.0 * alpha, paired)


def within(c: Comparison, margin: float) -> bool:
    """The interval lies within 1/(1+margin) .. 1+margin: both one-sided tests pass."""
    return c.ci_low >= 1.0 / (1.0 + margin) and c.ci_high <= 1.0 + margin


@dataclass(frozen=True)
class Read:
    """How one row of a family is read: its look (an index into ``looks``; -1 before its first
    look's rounds: in the family, never shown to differ), the schedule of its run, and whether its
    statistic is the paired t over rounds or a normal one (rows from separate runs)."""

    look: int
    looks: tuple[int, ...]
    paired: bool = True


def step_down(reads: Sequence[Read], compare_at: Callable[[int, float], Comparison | None],
              alpha: float = VERDICT_ALPHA) -> list[tuple[float, Comparison | None, int | None]]:
    """The levels of m rows read together, so that the chance of naming any false winner among
    them, over all their looks, stays within ``alpha``: Holm's step-down, each row on its own
    group-sequential boundary. The family is every row given (m = len(reads), fixed: a row before
    its first look counts, and is never shown to differ). At step r, with r rows shown to differ,
    every row still open is read at the boundary of alpha / (m - r); those whose interval then
    excludes 1 are shown to differ, and the next step reads the rest at the larger share. Returns
    per row its confidence, its interval there (``compare_at(i, confidence)``) and the step it was
    read at (None for a row before its first look: read at its first look's level, for "it would
    read", but no test)."""
    m = len(reads)
    out: list = [None] * m
    open_rows = [i for i, r in enumerate(reads) if r.look >= 0]
    for i, r in enumerate(reads):
        if r.look < 0:
            conf = confidence(0, r.looks, alpha / max(m, 1), r.paired)
            out[i] = (conf, compare_at(i, conf), None)
    shown = 0
    while open_rows:
        share = alpha / (m - shown)
        differ = []
        for i in open_rows:
            r = reads[i]
            conf = confidence(r.look, r.looks, share, r.paired)
            c = compare_at(i, conf)
            out[i] = (conf, c, shown)
            if c is not None and (c.ci_low > 1.0 or c.ci_high < 1.0):
                differ.append(i)
        if not differ:
            break
        shown += len(differ)
        open_rows = [i for i in open_rows if i not in differ]
    return out


def _spread(logs: np.ndarray) -> tuple[int, float, float] | None:
    n = logs.size
    if n < 2:
        return None
    sd = float(logs.std(ddof=1))
    return n, float(logs.mean()), max(sd, 1e-12)


def _phi(x: float) -> float:
    """The standard normal's distribution function (scipy.special.ndtr: what scipy.stats.norm.cdf
    computes, without its argument checking, which the looks call thousands of times a run)."""
    return float(special.ndtr(x))


def _difference_chance(mean: float, n: int, sd: float, n_at: int, c: float, drift: float) -> float:
    """The chance that a row whose ``n`` rounds have ``mean`` reads, after ``n_at`` rounds, a |t| of at
    least ``c``, when its rounds from here on have mean ``drift`` and the estimated spread."""
    if not math.isfinite(c) or n_at <= n:
        return 0.0
    mu = (n * mean + (n_at - n) * drift) / n_at
    sd_mean = sd * math.sqrt(n_at - n) / n_at
    edge = c * sd / math.sqrt(n_at)
    return _phi((mu - edge) / sd_mean) + _phi((-edge - mu) / sd_mean)


def _same_chance(mean: float, n: int, sd: float, n_at: int, half_width: float, margin: float) -> float:
    """The chance that the interval of half-width ``half_width`` (log scale) lies within the margin
    after ``n_at`` rounds, the estimate taken as the truth for the rounds to come."""
    if n_at <= n:
        return 0.0
    room = math.log1p(margin) - half_width
    if room <= 0:
        return 0.0
    sd_mean = sd * math.sqrt(n_at - n) / n_at
    return max(0.0, _phi((room - mean) / sd_mean) - _phi((-room - mean) / sd_mean))


def chances(logs: Sequence[float], looks: Sequence[int], alpha_share: float, margin: float = MARGIN,
            at: int | None = None, difference: float = FUTILITY_DIFFERENCE) -> dict[str, float] | None:
    """A row's chances at look index ``at`` (the cap's, by default) from the log ratios of its rounds
    so far: ``difference``, of naming a winner there were the true difference ``difference`` either
    way (the larger of the two: conditional power under the alternative, Jennison & Turnbull ch.
    10); ``same``, of reading the same speed there were the estimate the truth; ``estimate``, of
    naming a winner there were the estimate the truth. None with fewer than 2 rounds."""
    arr = np.asarray(logs, dtype=np.float64)
    got = _spread(arr)
    if got is None:
        return None
    n, mean, sd = got
    looks = tuple(int(x) for x in looks)
    k = len(looks) - 1 if at is None else min(max(at, 0), len(looks) - 1)
    n_at = looks[k]
    c = critical(looks, alpha_share)[k]
    drift = math.log1p(difference)
    # Student's t quantile by scipy.special.stdtrit (what scipy.stats.t.ppf computes)
    half = float(special.stdtrit(n_at - 1, 1.0 - (1.0 - equivalence_confidence(k, looks)) / 2.0)) * sd / math.sqrt(n_at)
    return {"difference": max(_difference_chance(mean, n, sd, n_at, c, drift),
                              _difference_chance(mean, n, sd, n_at, c, -drift)),
            "same": _same_chance(mean, n, sd, n_at, half, margin),
            "estimate": _difference_chance(mean, n, sd, n_at, c, mean),
            "rounds": n_at}


def futile(ch: dict[str, float] | None, rounds: int | None = None) -> bool:
    """Whether a row read on ``rounds`` rounds may stop: its chance of deciding a 15% difference by the
    cap, and of showing the same speed there, both below FUTILITY_CHANCE (non-binding: the boundaries
    ignore it), once its rounds reach FUTILITY_FROM of the cap's (a spread estimated from the 2 or 3
    degrees of freedom of a first look is too rough to give up on: it is twice the true one one time
    in ten)."""
    if ch is None or (rounds is not None and rounds < FUTILITY_FROM * ch["rounds"]):
        return False
    return ch["difference"] < FUTILITY_CHANCE and ch["same"] < FUTILITY_CHANCE


def decide_chance(logs: Sequence[float], looks: Sequence[int], at: int, alpha_share: float,
                  margin: float = MARGIN) -> float:
    """The chance that a row decides (a winner or the same speed) at look index ``at``, its estimate
    and spread taken as the truth: what the next look is worth, for a budget that must choose."""
    ch = chances(logs, looks, alpha_share, margin, at=at)
    if ch is None:
        return 0.0
    return min(1.0, ch["estimate"] + ch["same"])


def rounds_needed(logs: Sequence[float], looks: Sequence[int], alpha_share: float, margin: float = MARGIN,
                  after: int = -1) -> int | None:
    """The rounds at the first look after index ``after`` at which the row, its estimate and spread
    taken as the truth, would decide at least half the time; None where no look up to the cap
    would."""
    looks = tuple(int(x) for x in looks)
    for k in range(after + 1, len(looks)):
        if decide_chance(logs, looks, k, alpha_share, margin) >= 0.5:
            return looks[k]
    return None
