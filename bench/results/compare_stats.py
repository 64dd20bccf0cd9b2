"""Is B faster than A, or is it noise? The statistics of ``bench compare``, as pure functions.

The question is a ratio of two means (throughput of B over throughput of A), each mean from
independent samples of its own run: several repeats' samples/s, or, for one run a side, its
steady-state step times. Two methods, both for independent samples with unequal variances:

- **Welch's t test** for the difference of the means (B. L. Welch, "The generalization of
  'Student's' problem when several different population variances are involved", Biometrika
  34, 1947), with the Welch-Satterthwaite degrees of freedom.
- **Fieller's interval** for the ratio of the means (E. C. Fieller, "Some problems in interval
  estimation", JRSS B 16, 1954), as Kalibera and Jones recommend for benchmark results
  ("Rigorous Benchmarking in Reasonable Time", ISMM 2013, section 4): the set of ratios R for
  which ``mean_b - R * mean_a`` is not significantly different from 0. With the same t quantile
  (Welch's degrees of freedom) the interval excludes 1 exactly when Welch's test rejects "same
  mean" at that level, so the verdict and the test never disagree.

Student's t comes from ``bench.results.confidence`` (the repeats' intervals use it too), computed there
without scipy; the tests check it against printed table values.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

from bench.results.confidence import t_cdf, t_quantile

FASTER, SLOWER, NO_CHANGE = "faster", "slower", "no change at this noise"
CONFIDENCE = 0.95
# The fewest runs a side whose interval is given as a verdict. Simulated runs with 2-5% run-to-run noise
# (bench.benchmarks.compare_calibration, BENCHMARKS.md): A/A pairs are called slower 1-2% of the time with 2, 3 or 5
# runs a side alike, but a real 10% slowdown is found 13-45% of the time with 2 a side, 39-98% with 3, 81-100% with 5:
# with 2 a side a verdict of "no change" hides a real 10% change more often than not, so 2 a side are indicative.
VERDICT_RUNS = 3


# ---- two samples ---------------------------------------------------------------------------

def mean_and_variance(xs: Sequence[float]) -> tuple[float, float]:
    """Sample mean and unbiased sample variance (n - 1)."""
    n = len(xs)
    m = sum(xs) / n
    return m, (sum((x - m) ** 2 for x in xs) / (n - 1) if n > 1 else 0.0)


@dataclass(frozen=True)
class Welch:
    """Welch's t test of mean(b) - mean(a)."""

    mean_a: float
    mean_b: float
    n_a: int
    n_b: int
    var_mean_a: float  # s_a^2 / n_a
    var_mean_b: float
    t: float | None  # None where both variances are 0
    df: float | None
    p_two_sided: float | None


def welch(a: Sequence[float], b: Sequence[float]) -> Welch:
    """Welch's test; each sample needs at least 2 values."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"Welch's test needs at least 2 values a side, got {len(a)} and {len(b)}")
    (ma, sa), (mb, sb) = mean_and_variance(a), mean_and_variance(b)
    return welch_from(ma, sa / len(a), len(a), mb, sb / len(b), len(b))


def welch_from(ma: float, va: float, na: int, mb: float, vb: float, nb: int) -> Welch:
    """Welch's test from each side's mean, variance of the mean and number of (independent) values."""
    if va + vb == 0:
        return Welch(ma, mb, na, nb, va, vb, None, None, None)
    t = (mb - ma) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1))
    return Welch(ma, mb, na, nb, va, vb, t, df, 2.0 * (1.0 - t_cdf(abs(t), df)))


def batch_means(values: Sequence[float], max_batches: int) -> list[float]:
    """Means of ``max_batches`` consecutive batches that cover every value, their sizes differing by at
    most one (the first ``len % max_batches`` one longer), or the values themselves when there are no
    more than ``max_batches``."""
    n = len(values)
    if n <= max_batches:
        return list(values)
    size, longer = divmod(n, max_batches)
    out, start = [], 0
    for i in range(max_batches):
        end = start + size + (i < longer)
        out.append(sum(values[start:end]) / (end - start))
        start = end
    return out


def batched(values: Sequence[float], max_batches: int) -> tuple[float, float, int]:
    """(the mean of every value, the variance of that mean from the batch means, the number of batches):
    the method of batch means for correlated values (Law and Kelton, "Simulation Modeling and
    Analysis", batch means). The mean is of all values, so a ratio of two such means is the ratio
    of the runs' throughputs, whatever the batches."""
    means = batch_means(values, max_batches)
    _, var = mean_and_variance(means)
    return sum(values) / len(values), var / len(means), len(means)


def fieller(w: Welch, confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
    """Fieller's interval for mean_b / mean_a (independent samples), with Welch's df.

    Solves (mean_b - R mean_a)^2 = t^2 (var_mean_b + R^2 var_mean_a) for R:
    R = (ab -/+ t sqrt(a^2 vb + b^2 va - t^2 va vb)) / (a^2 - t^2 va).
    (None, None) where the interval is unbounded: mean_a not significantly different from 0, so the set of R
    is the whole line or the complement of an interval ("exclusive"), no interval at all.
    """
    a, b, va, vb = w.mean_a, w.mean_b, w.var_mean_a, w.var_mean_b
    if w.df is None:  # no spread at all: the ratio is exact
        return (b / a, b / a) if a else (None, None)
    t = t_quantile(0.5 + confidence / 2.0, w.df)
    denom = a * a - t * t * va
    disc = a * a * vb + b * b * va - t * t * va * vb
    if denom <= 0 or disc < 0:
        return None, None
    half = t * math.sqrt(disc)
    return (a * b - half) / denom, (a * b + half) / denom


def rate_ratio_interval(w: Welch, confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
    """Fieller's interval for a ratio of two positive means (rates, step times), or (None, None): undetermined.

    Undetermined where Fieller's set is unbounded (``fieller``), and where it reaches 0 or below: mean_b is then
    not significantly above 0, so the samples bound the ratio from neither side that matters (its lower bound
    would be negative, which a ratio of rates never is; 2 runs a side of identical code gave [-0.724, 2.175]).
    """
    low, high = fieller(w, confidence)
    if low is None or high is None or low <= 0:
        return None, None
    return low, high


@dataclass(frozen=True)
class Comparison:
    """B against A for one experiment: ratio (> 1: B is faster) with its interval, and the verdict."""

    ratio: float
    low: float | None
    high: float | None
    verdict: str
    method: str
    n_a: int
    n_b: int
    p_value: float | None
    df: float | None
    confidence: float = CONFIDENCE

    def to_dict(self) -> dict:
        return asdict(self)


def _mean_var_of_mean(xs: Sequence[float]) -> tuple[float, float]:
    m, v = mean_and_variance(xs)
    return m, v / len(xs)


def verdict(low: float | None, high: float | None) -> str:
    if low is not None and low > 1.0:
        return FASTER
    if high is not None and high < 1.0:
        return SLOWER
    return NO_CHANGE


def compare_throughputs(a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE) -> Comparison:
    """Repeats: each value is one run's samples/s. Ratio mean(b) / mean(a)."""
    w = welch(a, b)
    low, high = rate_ratio_interval(w, confidence)
    return Comparison(w.mean_b / w.mean_a, low, high, verdict(low, high),
                      "repeats: Welch's t, Fieller's interval on mean samples/s", len(a), len(b),
                      w.p_two_sided, w.df, confidence)


def compare_step_times(a: Sequence[float], b: Sequence[float], *, samples_per_step_a: float,
                       samples_per_step_b: float, max_batches: int | None = None,
                       confidence: float = CONFIDENCE) -> Comparison:
    """One run a side: ``a`` and ``b`` are steady step times in order (s per step).

    Throughput is samples per step / mean step time, so B over A is
    (samples_per_step_b / samples_per_step_a) x mean(a) / mean(b): Fieller's interval for the
    ratio of mean step times (A's over B's), scaled by the constant batch ratio. With
    ``max_batches``, each side's variance comes from that many batch means (``batched``).
    """
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"need at least 2 step times a side, got {len(a)} and {len(b)}")
    sa, sb = (batched(x, max_batches) if max_batches else (*_mean_var_of_mean(x), len(x)) for x in (a, b))
    w = welch_from(*sb, *sa)  # "mean_b / mean_a" of this test is mean(a) / mean(b)
    scale = samples_per_step_b / samples_per_step_a
    low, high = rate_ratio_interval(w, confidence)
    low, high = (low * scale if low is not None else None), (high * scale if high is not None else None)
    return Comparison(scale * w.mean_b / w.mean_a, low, high, verdict(low, high),
                      "steady step times: Welch's t, Fieller's interval on mean step time", sa[2], sb[2],
                      w.p_two_sided if scale == 1 else None, w.df, confidence)  # the test is of step times
