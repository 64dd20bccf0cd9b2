"""The mean of repeated measurements with its confidence interval (Student's t), in pure Python.

``mean_interval([10, 12, 14])`` is the mean 12 with the 95% interval mean +- t(0.975, n-1) x s / sqrt(n),
s the sample standard deviation (n - 1 in the denominator): the interval for the mean of a few
runs whose spread is not known beforehand (Student's t distribution with n - 1 degrees of freedom;
NIST/SEMATECH e-Handbook of Statistical Methods, 1.3.5.2 "Confidence Limits for the Mean").
The t quantile is computed here from the regularized incomplete beta function (its continued
fraction, Numerical Recipes 3rd ed. 6.4), so no SciPy is needed. No I/O, no pandas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

LEVEL = 0.95


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz's method)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, for 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * regularized_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p (0 < p < 1), by bisection on ``t_cdf`` to 1e-12."""
    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError(f"t_quantile(p={p}, df={df}): needs 0 < p < 1 and df > 0")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


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
