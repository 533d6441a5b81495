"""Statistics over raw timing samples: median, IQR, bootstrap CI, noise, significance.

numpy, with quantiles from scipy.stats. Every function takes raw samples (seconds) and is deterministic: the
bootstrap uses a fixed seed so a report rendered twice prints the same interval.

Two levels of repetition (Kalibera & Jones, "Rigorous Benchmarking in Reasonable Time"):
a cell measured in several fresh processes has samples *within* each process and a
spread *between* processes, which on a shared machine is often the larger of the two
(the same HLO ran 10% apart in two processes here). ``hierarchical`` and ``compare``
therefore take a list of processes, each a list of samples: the estimate is the geometric
mean of the per-process medians (on the log scale, where its interval is computed and where a
right-skewed spread of process medians is closer to symmetric), and the bootstrap resamples
processes, then the samples within each drawn process. With one process this reduces to the ordinary bootstrap of a median,
whose interval understates the uncertainty between launches; ``decide`` is the one rule
that turns a ratio's interval into "lower", "higher", "tie" or "noisy".
"""

from __future__ import annotations

import functools
import hashlib
import math
import threading
from dataclasses import dataclass
from typing import Sequence

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20_241_122
# Above this many samples the bootstrap is replaced by the distribution-free
# order-statistic interval for the median (same target, no resampling cost).
BOOTSTRAP_MAX_N = 20_000


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    mean: float
    q25: float
    q75: float
    iqr: float
    ci_low: float  # 95% confidence interval of the median
    ci_high: float
    ci_method: str
    noisy: bool  # IQR / median above the threshold

    @property
    def rel_iqr(self) -> float:
        return self.iqr / self.median if self.median > 0 else float("inf")


def _as_array(samples: Sequence[float]) -> np.ndarray:
    a = np.asarray(samples, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError("need a non-empty 1-D sequence of samples")
    if not np.all(np.isfinite(a)):
        raise ValueError("samples must be finite")
    return a


def bootstrap_median_ci(samples: Sequence[float], confidence: float = 0.95,
                        resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> tuple[float, float, str]:
    """Percentile-bootstrap CI of the median (order-statistic interval for very large n)."""
    a = _as_array(samples)
    n = a.size
    alpha = (1.0 - confidence) / 2.0
    if n == 1:
        return float(a[0]), float(a[0]), "single sample"
    if n > BOOTSTRAP_MAX_N:
        return (*_order_statistic_ci(a, confidence), "order statistics")
    medians = _resampled_medians(a, resamples, np.random.default_rng(seed))
    lo, hi = np.quantile(medians, [alpha, 1.0 - alpha])
    return float(lo), float(hi), f"bootstrap ({resamples} resamples)"


def _order_statistic_ci(a: np.ndarray, confidence: float) -> tuple[float, float]:
    # Normal approximation to Binomial(n, 1/2) ranks around the median.
    s = np.sort(a)
    n = s.size
    z = 1.959963984540054 if abs(confidence - 0.95) < 1e-12 else _z(confidence)
    half = z * np.sqrt(n) / 2.0
    lo = int(max(0, np.floor(n / 2.0 - half)))
    hi = int(min(n - 1, np.ceil(n / 2.0 + half)))
    return float(s[lo]), float(s[hi])


def _z(confidence: float) -> float:
    """The two-sided normal quantile of ``confidence`` (0.95 -> 1.96), from scipy.stats."""
    from scipy.stats import norm
    return float(norm.ppf(0.5 + confidence / 2.0))


NOISE_THRESHOLD = 0.10  # an IQR above this fraction of the median flags samples (or process medians) noisy


def _key(a: np.ndarray) -> tuple[int, bytes]:
    """What a memo of a pure function of samples is keyed by: their count and a digest of
    their float64 bytes (a digest, so a cell of 10^5 samples keeps 16 bytes, not 800 KB)."""
    return a.size, hashlib.blake2b(a.tobytes(), digest_size=16).digest()


class _Memo:
    """Results of a deterministic function of samples, the oldest dropped past ``size``.

    A report, a verdict and every look of a run's top-up build the same cells' rows again and
    again, and the bootstrap is the cost of each (an A/A simulation spent 70% of its time
    redoing it); a hit is the value the function would return."""

    def __init__(self, size: int):
        self.size, self.items, self.lock = size, {}, threading.Lock()

    def get(self, key):
        return self.items.get(key)

    def put(self, key, value):
        with self.lock:
            if len(self.items) >= self.size:
                self.items.pop(next(iter(self.items)))
            self.items[key] = value
        return value


def summarize(samples: Sequence[float], noise_threshold: float = NOISE_THRESHOLD) -> Summary:
    a = _as_array(samples)
    key = (_key(a), noise_threshold)
    hit = _SUMMARIES.get(key)
    if hit is not None:
        return hit
    q25, med, q75 = np.quantile(a, [0.25, 0.5, 0.75])
    lo, hi, method = bootstrap_median_ci(a)
    iqr = float(q75 - q25)
    out = Summary(
        n=int(a.size), median=float(med), mean=float(a.mean()), q25=float(q25), q75=float(q75),
        iqr=iqr, ci_low=lo, ci_high=hi, ci_method=method,
        noisy=bool(med > 0 and iqr / med > noise_threshold),
    )
    return _SUMMARIES.put(key, out)


_SUMMARIES = _Memo(8192)  # a Summary each: a few hundred bytes
_DRAWS = _Memo(1024)  # BOOTSTRAP_RESAMPLES floats each: 16 KB


Processes = Sequence[Sequence[float]]  # one list of samples per process


def _processes(data: "Processes | Sequence[float]") -> list[np.ndarray]:
    """A flat sequence of samples is one process; a sequence of sequences is one per process."""
    items = list(data)
    if not items:
        raise ValueError("need at least one process with samples")
    if all(np.ndim(x) == 0 for x in items):
        return [_as_array(items)]
    return [_as_array(x) for x in items]


def _resampled_medians(a: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """The medians of ``draws`` resamples of ``a`` (n of its values drawn with replacement, n
    indices a resample, drawn in chunks of at most 2e6 indices): bit for bit what
    ``np.median(a[idx], axis=1)`` gives for the same draws, 1.5-2x sooner (2,000 resamples of
    20,000 samples: 0.47 s against 0.73 s on the 2-CPU AMD EPYC VM). A resample's median is an order
    statistic of its ranks in ``a``: each resample's rank counts, summed, name the rank at its
    middle (two ranks averaged for even n), without sorting anything per resample."""
    n = a.size
    order = np.argsort(a, kind="stable")
    ordered = a[order]
    rank = np.empty(n, dtype=np.intp)
    rank[order] = np.arange(n)
    low, high = (n - 1) // 2, n // 2  # the middle ranks' places in a sorted resample
    out = np.empty(draws)
    chunk = max(1, 2_000_000 // n)  # bound memory: chunk x n indices at a time
    for start in range(0, draws, chunk):
        stop = min(draws, start + chunk)
        rows = stop - start
        ranks = rank[rng.integers(0, n, size=(rows, n))] + (np.arange(rows) * n)[:, None]
        below = np.bincount(ranks.ravel(), minlength=rows * n).reshape(rows, n).cumsum(axis=1)
        lo = (below > low).argmax(axis=1)  # the first rank with more than ``low`` values at or below it
        out[start:stop] = (ordered[lo] if low == high else
                           (ordered[lo] + ordered[(below > high).argmax(axis=1)]) / 2)
    return out


def _median_draws(a: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """``draws`` bootstrap replicates of the median of ``a``. Up to EXACT_MAX_N samples they
    are exact resamples; above it the replicate's rank is drawn from its normal limit
    (n/2 +- sqrt(n)/2, the order-statistic interval's basis), which costs nothing at 10^5
    samples and differs from the exact bootstrap by less than one rank's width."""
    n = a.size
    if n == 1:
        return np.full(draws, a[0])
    if n <= EXACT_MAX_N:
        return _resampled_medians(a, draws, rng)
    s = np.sort(a)
    ranks = np.clip(np.rint(n / 2.0 - 0.5 + rng.standard_normal(draws) * np.sqrt(n) / 2.0), 0, n - 1)
    return s[ranks.astype(np.int64)]


EXACT_MAX_N = 128  # within-process samples resampled exactly up to this many (see _median_draws)


def hierarchical_draws(processes: "Processes | Sequence[float]", resamples: int = BOOTSTRAP_RESAMPLES,
                       seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """Bootstrap replicates of the geometric mean of per-process medians: each replicate draws as
    many processes as there are, with replacement, and for each drawn process the median of a
    resample of its own samples."""
    procs = _processes(processes)
    rng = np.random.default_rng(seed)
    per = np.stack([_median_draws(a, resamples, rng) for a in procs])  # (P, resamples)
    p = len(procs)
    which = rng.integers(0, p, size=(resamples, p))  # the processes each replicate draws
    col = rng.integers(0, resamples, size=(resamples, p))  # an independent within-process replicate each
    return np.exp(np.log(per[which, col]).mean(axis=1))


@functools.lru_cache(maxsize=1024)
def t_quantile(p: float, df: float) -> float:
    """Student's t quantile (p in (0.5, 1)) for real df >= 1, from scipy.stats."""
    if not 0.5 < p < 1.0 or not df >= 1.0:
        raise ValueError(f"need 0.5 < p < 1 and df >= 1, got p={p}, df={df}")
    from scipy.stats import t
    return float(t.ppf(p, df))


def _t_width(var_target: float, var_boot: float, df: float, confidence: float) -> float:
    """How much to rescale a bootstrap distribution (around its centre) so that its
    percentile interval has the width of Student's t interval for the same estimate.

    With few processes a bootstrap alone misleads in both directions: resampling P
    processes gives (P-1)/P of the variance and uses a normal where t belongs (with three
    processes t is 4.30, not 1.96), while resampling the samples inside each process adds
    their noise a second time (the process medians already carry it). ``var_target`` is
    the unbiased variance of the estimate from the spread of the process medians, on the
    log scale; the bootstrap keeps the interval's shape, t its width."""
    if var_boot <= 0 or var_target <= 0 or not math.isfinite(df):
        return 1.0
    return math.sqrt(var_target / var_boot) * t_quantile(0.5 + confidence / 2, df) / _z(confidence)


def geometric_mean(values: Sequence[float]) -> float:
    """The estimate of a cell over its processes: the geometric mean of their medians."""
    a = np.asarray(values, dtype=np.float64)
    return float(np.exp(np.log(a).mean()))


def _log_var(medians: Sequence[float]) -> float:
    """Unbiased variance of the log of the geometric mean of these process medians: the variance
    of the mean of their logs."""
    m = np.asarray(medians, dtype=np.float64)
    return float(np.log(m).var(ddof=1) / m.size) if m.size > 1 and np.all(m > 0) else 0.0


@dataclass(frozen=True)
class Hierarchical:
    """A cell's steady state over its processes: the geometric mean of the per-process medians with a
    hierarchical-bootstrap 95% CI (its width that of Student's t on the process medians),
    and the spread between them."""

    estimate: float
    ci_low: float
    ci_high: float
    processes: int
    process_medians: tuple[float, ...]
    between_rel: float  # (max - min) / estimate of the process medians; 0 for one process


def _log_draws(procs: list[np.ndarray], resamples: int, seed: int) -> tuple[float, np.ndarray]:
    """log of the estimate and the log bootstrap replicates around it (read-only: memoised)."""
    key = (tuple(_key(a) for a in procs), resamples, seed)
    hit = _DRAWS.get(key)
    if hit is not None:
        return hit
    est = geometric_mean([np.median(a) for a in procs])
    logs = np.log(hierarchical_draws(procs, resamples, seed))
    logs.setflags(write=False)
    return _DRAWS.put(key, (math.log(est), logs))


def hierarchical(processes: "Processes | Sequence[float]", confidence: float = 0.95,
                 resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> Hierarchical:
    procs = _processes(processes)
    medians = tuple(float(np.median(a)) for a in procs)
    est = geometric_mean(medians)
    alpha = (1.0 - confidence) / 2.0
    centre, logs = _log_draws(procs, resamples, seed)
    p = len(procs)
    if p > 1:
        logs = centre + _t_width(_log_var(medians), float(np.var(logs)), p - 1, confidence) * (logs - centre)
    lo, hi = np.exp(np.quantile(logs, [alpha, 1.0 - alpha]))
    spread = (max(medians) - min(medians)) / est if est > 0 else 0.0
    return Hierarchical(est, float(min(lo, est)), float(max(hi, est)), p, medians, float(spread))


@dataclass(frozen=True)
class Comparison:
    """How much slower ``other`` is than ``base``: ratio of the estimates with its 95% CI."""

    ratio: float  # estimate(other) / estimate(base); > 1 means other is slower
    ci_low: float
    ci_high: float
    significant: bool  # the CI excludes 1.0
    processes: tuple[int, int] = (1, 1)  # (base, other)

    def describe(self) -> str:
        if not self.significant:
            return f"{self.ratio:.2f}x (not significant, 95% CI {self.ci_low:.2f}-{self.ci_high:.2f})"
        return f"{self.ratio:.2f}x (95% CI {self.ci_low:.2f}-{self.ci_high:.2f})"


def compare(base: "Processes | Sequence[float]", other: "Processes | Sequence[float]", confidence: float = 0.95,
            resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> Comparison:
    """The ratio other / base of the two estimates (geometric mean of per-process medians; for
    one process, its median), with the percentile interval of the ratio of two independent
    hierarchical bootstraps. With two or more processes on both sides the interval is
    rescaled to the width of Welch's t interval on the log of the two estimates (each
    side's variance and degrees of freedom from the spread of its process medians; see
    ``_t_width``). A flat list of samples is one process."""
    a, b = _processes(base), _processes(other)
    ca, la = _log_draws(a, resamples, seed)
    cb, lb = _log_draws(b, resamples, seed + 1)
    ratio = math.exp(cb - ca)
    if (len(a) == 1 and a[0].size == 1) or (len(b) == 1 and b[0].size == 1):  # nothing to resample
        return Comparison(ratio, ratio, ratio, False, (len(a), len(b)))
    logs = lb - la
    pa, pb = len(a), len(b)
    if pa > 1 and pb > 1:  # Welch: each side's variance from its own process medians
        ua, ub = _log_var([np.median(x) for x in a]), _log_var([np.median(x) for x in b])
        den = ua * ua / (pa - 1) + ub * ub / (pb - 1)
        df = max(1.0, (ua + ub) ** 2 / den) if den > 0 else math.inf
        centre = cb - ca
        logs = centre + _t_width(ua + ub, float(np.var(logs)), df, confidence) * (logs - centre)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.exp(np.quantile(logs, [alpha, 1.0 - alpha]))
    lo, hi = float(min(lo, ratio)), float(max(hi, ratio))
    return Comparison(ratio, lo, hi, bool(lo > 1.0 or hi < 1.0), (pa, pb))


def compare_change(base: tuple, changed: tuple, confidence: float = 0.95,
                   resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> Comparison:
    """How much a change moved a ratio: (B' / A') / (B / A), ``base`` = (A, B) and ``changed`` =
    (A', B') each a cell's processes (the ratio JAX/PyTorch of a verdict row, and of the same row
    with one knob changed), with its interval: the four independent hierarchical bootstraps
    combined on the log scale, rescaled to the width of Welch's t on the four sides' process
    medians (variances summed, degrees of freedom by Welch-Satterthwaite over the four). 1 inside
    the interval: the change moved nothing the measurement can resolve."""
    sides = [_processes(x) for x in (*base, *changed)]
    signs = (1, -1, -1, 1)  # + log A - log B - log A' + log B': log of (B'/A') / (B/A)
    draws = [_log_draws(p, resamples, seed + i) for i, p in enumerate(sides)]
    centre = sum(s * c for s, (c, _) in zip(signs, draws))
    logs = sum(s * d for s, (_, d) in zip(signs, draws))
    if all(len(p) > 1 for p in sides):
        var = [_log_var([np.median(x) for x in p]) for p in sides]
        den = sum(v * v / (len(p) - 1) for v, p in zip(var, sides))
        df = max(1.0, sum(var) ** 2 / den) if den > 0 else math.inf
        logs = centre + _t_width(sum(var), float(np.var(logs)), df, confidence) * (logs - centre)
    alpha = (1.0 - confidence) / 2.0
    ratio = math.exp(centre)
    lo, hi = np.exp(np.quantile(logs, [alpha, 1.0 - alpha]))
    lo, hi = float(min(lo, ratio)), float(max(hi, ratio))
    return Comparison(ratio, lo, hi, bool(lo > 1.0 or hi < 1.0), (len(sides[0]), len(sides[2])))


MIN_PROCESSES = 3  # fresh processes per side before a comparison may name a winner
# screening (verdict/choose.screen): a backend whose fastest sample in its first process is over this
# multiple of its framework's best median is clearly slower; it is measured in no more processes
SCREEN_FACTOR = 1.5
# a memory difference worth a claim: beyond the spread of either side's processes, and at least this
# large (on a host, RSS moves by a few MiB with allocator arenas and thread stacks: +4.0 MiB against
# +4.1 MiB on a GEMM of 6 KB is no difference) and this share of the larger figure
MEMORY_MIN_BYTES = 8 << 20
MEMORY_MIN_FRACTION = 0.10


def memory_difference(base: Sequence[float], other: Sequence[float]) -> dict:
    """Whether two programs' memory figures (one a process, bytes) differ: ``ratio`` other/base
    of the medians, ``differs`` True only where the two sides' process figures do not overlap
    and the difference reaches MEMORY_MIN_BYTES and MEMORY_MIN_FRACTION of the larger, else
    False with ``why``; None where a side has no figure. With one process on a side its spread
    is unknown: the size alone decides, and ``why`` says so. Memory figures repeat exactly on a
    GPU's allocator and spread by a few MiB on a host's RSS."""
    a, b = [float(x) for x in base if x is not None], [float(x) for x in other if x is not None]
    if not a or not b:
        return {"ratio": None, "differs": None, "why": "no memory figure on a side"}
    ma, mb = float(np.median(a)), float(np.median(b))
    out = {"ratio": mb / ma if ma > 0 else None, "difference_bytes": mb - ma}
    big = abs(mb - ma) >= max(MEMORY_MIN_BYTES, MEMORY_MIN_FRACTION * max(ma, mb))
    small = (f"a difference of {abs(mb - ma) / 2**20:.1f} MiB, under {MEMORY_MIN_BYTES >> 20} MiB or "
             f"{MEMORY_MIN_FRACTION:.0%} of the larger figure")
    if min(len(a), len(b)) < 2:
        return {**out, "differs": big, "why": ("one process a side: judged by its size alone" if big
                                               else small + " (one process a side)")}
    apart = min(b) > max(a) or max(b) < min(a)
    if apart and big:
        return {**out, "differs": True, "why": None}
    return {**out, "differs": False, "why": "the two sides' processes overlap" if not apart else small}
CONTENTION_THRESHOLD = 0.05  # others' CPU time above this share of a process's CPUs makes it busy (contention.py)
CONTENTION_MIN_WINDOW_S = 0.25  # a timed window shorter than this cannot be judged (the kernel's 10 ms ticks)
# the host's time to issue a call, as a share of the call's wall time (the same window): under this the
# device's work set the pace (a slower host could not move the figure); at or over HOST_BOUND_SHARE the
# device waited for the host
DEVICE_BOUND_SHARE = 0.5
HOST_BOUND_SHARE = 0.8
TIE_THRESHOLD = 0.05  # a ratio whose whole CI lies within 1/(1+t) .. 1+t is a tie
NOISY_BOUND = 0.20  # a CI that holds 1 but reaches past 1/(1+b) or 1+b cannot decide

# the verdict's group-sequential design (stackwars/verdict/sequential.py): a row is read after FIRST_LOOK clean
# rounds (run --processes), then every LOOK_STEP more, up to MAX_ROUNDS (run --max-processes); 5% of error in all
VERDICT_ALPHA = 0.05  # the chance, all looks and all rows of a machine together, of naming a winner between equal programs
FIRST_LOOK = 4  # rounds of a row's first look: run --processes by default
LOOK_STEP = 2  # rounds between two looks
MAX_ROUNDS = 16  # rounds a row may take: run --max-processes by default
MARGIN = 0.10  # "same speed within +-10%" by default (run --margin), declared before the run

MAX_PROCESSES = 1000  # processes of one cell


def default_max_processes(processes: int) -> int:
    """The cap of rounds a row takes when --max-processes is not given: MAX_ROUNDS (never fewer
    than --processes: then one look)."""
    return min(MAX_PROCESSES, max(processes, MAX_ROUNDS))


def compare_paired(ratios: Sequence[float], confidence: float = 0.95) -> Comparison:
    """The ratio of two programs measured in rounds (a round: one fresh process of each, adjacent in
    time; a verdict's rounds, verdict/decide._deciding), from one figure a round (B's process
    median over A's): their geometric mean, with Student's t interval on the log ratios (n - 1
    degrees of freedom). What the host did during a round (a slow stretch of seconds) falls on
    both of its processes and cancels within its ratio, so the interval holds what remains: how
    the ratio itself varies between rounds."""
    logs = np.log(np.asarray(ratios, dtype=np.float64))
    n = logs.size
    if n == 0:
        raise ValueError("need at least one paired process")
    centre = float(logs.mean())
    if n < 2:
        r = math.exp(centre)
        return Comparison(r, r, r, False, (n, n))
    # a look that may spend nothing reads at 100%: an interval of every ratio (an early look's level can be 1e-12,
    # whose quantile times a wide spread is past what a float's exponent holds: clamped to 1e-300..1e300, which
    # JSON still writes as a number)
    q = t_quantile(0.5 + confidence / 2, n - 1) if confidence < 1.0 else math.inf
    half = q * float(logs.std(ddof=1)) / math.sqrt(n) if q < math.inf else math.inf
    lo, hi = _exp(centre - half), _exp(centre + half)
    return Comparison(math.exp(centre), lo, hi, bool(lo > 1.0 or hi < 1.0), (n, n))


def _exp(x: float) -> float:
    """exp, within 1e-300..1e300 (an interval so wide says nothing either way)."""
    return math.exp(min(max(x, -690.0), 690.0))


def decide(c: Comparison, threshold: float = TIE_THRESHOLD, noisy_bound: float = NOISY_BOUND) -> str:
    """The one rule from a ratio's interval to a decision:

    * ``tie``: the CI lies within [1/(1+threshold), 1+threshold] (the difference, if any, is
      smaller than the threshold), or it holds 1 and stays within [1/(1+noisy_bound),
      1+noisy_bound] (no difference the measurement can resolve; ``tie_bound`` says how close);
    * ``noisy``: the CI holds 1 but reaches past that: it cannot exclude a large difference;
    * ``lower`` / ``higher``: the CI excludes 1 and reaches beyond the threshold (other is
      faster / slower than base)."""
    if not (0 <= threshold < 1 and noisy_bound >= 0):
        raise ValueError(f"threshold {threshold} must be in [0, 1) and noisy_bound {noisy_bound} >= 0")
    noisy_bound = max(noisy_bound, threshold)  # a tie band wider than the noise bound widens it
    if within_band(c, threshold):
        return "tie"
    if c.ci_low <= 1.0 <= c.ci_high:
        return "tie" if tie_bound(c) <= noisy_bound else "noisy"
    return "lower" if c.ci_high < 1.0 else "higher"


def within_band(c: Comparison, threshold: float = TIE_THRESHOLD) -> bool:
    """The CI lies within [1/(1+threshold), 1+threshold]: any difference is under the threshold."""
    return c.ci_low >= 1.0 / (1.0 + threshold) and c.ci_high <= 1.0 + threshold


def tie_bound(c: Comparison) -> float:
    """The largest difference the CI allows either way, as a fraction (0.08: within 8%)."""
    return max(1.0 / c.ci_low - 1.0 if c.ci_low > 0 else math.inf, c.ci_high - 1.0)
