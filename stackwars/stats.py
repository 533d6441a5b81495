"""Statistics over raw timing samples: median, IQR, bootstrap CI, noise, significance.

Pure numpy. Every function takes raw samples (seconds) and is deterministic: the
bootstrap uses a fixed seed so a report rendered twice prints the same interval.
"""

from __future__ import annotations

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
    rng = np.random.default_rng(seed)
    medians = np.empty(resamples)
    chunk = max(1, 2_000_000 // n)  # bound memory: chunk x n indices at a time
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        medians[start:stop] = np.median(a[idx], axis=1)
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
    # Inverse normal CDF by bisection on erf; only used for non-default confidence.
    from math import erf, sqrt
    target = 0.5 + confidence / 2.0
    lo, hi = 0.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if 0.5 * (1.0 + erf(mid / sqrt(2.0))) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def summarize(samples: Sequence[float], noise_threshold: float = 0.10) -> Summary:
    a = _as_array(samples)
    q25, med, q75 = np.quantile(a, [0.25, 0.5, 0.75])
    lo, hi, method = bootstrap_median_ci(a)
    iqr = float(q75 - q25)
    return Summary(
        n=int(a.size), median=float(med), mean=float(a.mean()), q25=float(q25), q75=float(q75),
        iqr=iqr, ci_low=lo, ci_high=hi, ci_method=method,
        noisy=bool(med > 0 and iqr / med > noise_threshold),
    )


@dataclass(frozen=True)
class Comparison:
    """How much slower ``other`` is than ``base``: ratio of medians with its 95% CI."""

    ratio: float  # median(other) / median(base); > 1 means other is slower
    ci_low: float
    ci_high: float
    significant: bool  # the CI excludes 1.0

    def describe(self) -> str:
        if not self.significant:
            return f"{self.ratio:.2f}x (not significant, 95% CI {self.ci_low:.2f}-{self.ci_high:.2f})"
        return f"{self.ratio:.2f}x (95% CI {self.ci_low:.2f}-{self.ci_high:.2f})"


def compare(base: Sequence[float], other: Sequence[float], confidence: float = 0.95,
            resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> Comparison:
    """Bootstrap the ratio of medians of two independent sample sets."""
    a, b = _as_array(base), _as_array(other)
    ratio = float(np.median(b) / np.median(a))
    if a.size == 1 or b.size == 1:
        return Comparison(ratio, ratio, ratio, False)
    rng = np.random.default_rng(seed)
    na, nb = min(a.size, BOOTSTRAP_MAX_N), min(b.size, BOOTSTRAP_MAX_N)
    # Very large sets are subsampled to BOOTSTRAP_MAX_N: the interval is then slightly conservative.
    ratios = np.empty(resamples)
    chunk = max(1, 2_000_000 // max(na, nb))
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        ma = np.median(a[rng.integers(0, a.size, size=(stop - start, na))], axis=1)
        mb = np.median(b[rng.integers(0, b.size, size=(stop - start, nb))], axis=1)
        ratios[start:stop] = mb / ma
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(ratios, [alpha, 1.0 - alpha])
    return Comparison(ratio, float(lo), float(hi), bool(lo > 1.0 or hi < 1.0))
