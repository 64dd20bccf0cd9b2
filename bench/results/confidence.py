"""The mean of repeated measurements with its confidence interval (Student's t).

``mean_interval([10, 12, 14])`` is the mean 12 with the 95% interval mean +- t(0.975, n-1) x s / sqrt(n),
s the sample standard deviation (n - 1 in the denominator): the interval for the mean of a few
runs whose spread is not known beforehand (Student's t distribution with n - 1 degrees of freedom;
NIST/SEMATECH e-Handbook of Statistical Methods, 1.3.5.2 "Confidence Limits for the Mean").
The t distribution is SciPy's (``scipy.stats.t``, imported where it is used, so loading results stays
light). No I/O, no pandas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

LEVEL = 0.95


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom (SciPy's ``stats.t``)."""
    from scipy import stats

    return float(stats.t.cdf(t, df))


def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p (0 < p < 1), SciPy's ``stats.t.ppf``."""
    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError(f"t_quantile(p={p}, df={df}): needs 0 < p < 1 and df > 0")
    from scipy import stats

    return float(stats.t.ppf(p, df))


@dataclass(frozen=True)
class Interval:
    """The mean of ``n`` values with its two-sided confidence interval at ``level`` (None where n < 2)."""
    n: int
    mean: float
    std: float | None  # sample standard deviation (n - 1)
    low: float | None
    high: float | None
    level: float = LEVEL

    @property
    def half_width(self) -> float | None:
        return None if self.high is None else self.high - self.mean


def mean_interval(values: Iterable[float], level: float = LEVEL) -> Interval:
    """Mean, sample standard deviation and the Student-t interval of the mean. ValueError for no values."""
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("mean_interval: no values")
    n = len(xs)
    mean = sum(xs) / n
    if n < 2:
        return Interval(n=n, mean=mean, std=None, low=None, high=None, level=level)
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = t_quantile(1.0 - (1.0 - level) / 2.0, n - 1) * std / math.sqrt(n)
    return Interval(n=n, mean=mean, std=std, low=mean - half, high=mean + half, level=level)
