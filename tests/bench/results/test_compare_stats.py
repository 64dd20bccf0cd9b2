"""The statistics of ``bench compare`` against hand computations and printed tables."""

from __future__ import annotations

import math

import pytest

from bench.results import compare_stats as S


@pytest.mark.parametrize("df,printed", [(1, 12.706), (2, 4.303), (5, 2.571), (8, 2.306), (10, 2.228), (30, 2.042),
                                        (120, 1.980)])
def test_t_quantile_matches_the_printed_table(df, printed):
    # Two-sided 95% critical values of Student's t (e.g. NIST/SEMATECH e-Handbook, table 1.3.6.7.2).
    assert S.t_quantile(0.975, df) == pytest.approx(printed, abs=5e-4)


def test_t_quantile_for_fractional_degrees_of_freedom_lies_between_its_neighbours():
    assert S.t_quantile(0.975, 8) > S.t_quantile(0.975, 8.5) > S.t_quantile(0.975, 9)
    assert S.t_cdf(S.t_quantile(0.975, 3.7), 3.7) == pytest.approx(0.975, abs=1e-9)


def test_welch_and_fieller_by_hand():
    a, b = [100, 102, 98, 101, 99], [110, 111, 109, 112, 108]
    # By hand: means 100 and 110; variances (0+4+4+1+1)/4 = 2.5 each; variances of the means 2.5/5 = 0.5.
    # t = (110 - 100) / sqrt(0.5 + 0.5) = 10; df = (0.5 + 0.5)^2 / (0.5^2/4 + 0.5^2/4) = 8.
    w = S.welch(a, b)
    assert (w.mean_a, w.mean_b, w.var_mean_a, w.var_mean_b, w.t, w.df) == (100, 110, 0.5, 0.5, 10, 8)
    # Fieller with t(0.975, 8) = 2.306 (table): denominator 100^2 - 2.306^2 x 0.5 = 9997.341;
    # discriminant 100^2 x 0.5 + 110^2 x 0.5 - 2.306^2 x 0.25 = 11048.671, sqrt 105.113, x 2.306 = 242.39;
    # R = (100 x 110 -/+ 242.39) / 9997.341 = 1.0760 .. 1.1245 around 1.1.
    low, high = S.fieller(w)
    assert low == pytest.approx(1.0760, abs=1e-4) and high == pytest.approx(1.1245, abs=1e-4)
    c = S.compare_throughputs(a, b)
    assert c.verdict == S.FASTER and c.ratio == pytest.approx(1.1)
    assert S.compare_throughputs(b, a).verdict == S.SLOWER


def test_the_interval_excludes_one_exactly_when_welchs_test_rejects():
    a = [100.0, 103.0, 97.0, 101.0]
    for shift in (0.0, 2.0, 3.5, 4.0, 5.0, 8.0):
        b = [x + shift for x in a[::-1]]
        w = S.welch(a, b)
        low, high = S.fieller(w)
        assert (w.p_two_sided < 0.05) == (not low <= 1.0 <= high), shift


def test_step_times_twenty_percent_shorter_is_faster_by_a_quarter():
    a = [0.10, 0.11, 0.09, 0.10, 0.105, 0.095]
    b = [t * 0.8 for t in a]
    c = S.compare_step_times(a, b, samples_per_step_a=64, samples_per_step_b=64)
    assert c.ratio == pytest.approx(1.25) and c.low > 1 and c.verdict == S.FASTER
    same = S.compare_step_times(a, a[::-1], samples_per_step_a=64, samples_per_step_b=64)
    assert same.ratio == pytest.approx(1.0) and same.verdict == S.NO_CHANGE
    # A doubled batch at the same step time is twice the throughput: the constant scales the interval too.
    double = S.compare_step_times(a, a, samples_per_step_a=64, samples_per_step_b=128)
    assert double.ratio == pytest.approx(2.0) and double.low > 1.5 and double.p_value is None


def test_no_spread_and_too_few_values():
    exact = S.compare_throughputs([100.0, 100.0], [120.0, 120.0])
    assert exact.ratio == exact.low == exact.high == pytest.approx(1.2) and exact.verdict == S.FASTER
    with pytest.raises(ValueError, match="at least 2"):
        S.welch([1.0], [1.0, 2.0])
    # A mean not significantly different from 0 gives an unbounded interval: no verdict either way.
    wide = S.fieller(S.welch([1.0, -1.0, 0.5], [5.0, 6.0, 7.0]))
    assert wide == (None, None) and S.verdict(*wide) == S.NO_CHANGE
    assert math.isfinite(S.t_quantile(0.975, 0.5))


def test_calibration_of_the_repeats_verdict():
    """Simulated runs with realistic run-to-run shifts (each run's samples/s off by a lognormal 3%, as runs on
    other nodes and at other times are): A/A pairs are called slower at most 5% of the time, and a real 10%
    slowdown with 3 repeats a side is called slower most of the time. Fixed seed: the figures are exact."""
    import math
    import random

    rng = random.Random(7)

    def runs(n: int, shift: float, sd: float = 0.03) -> list[float]:
        return [1000.0 * (1 + shift) * math.exp(rng.gauss(0, sd)) for _ in range(n)]

    for n in (2, 3, 5):
        false_slower = sum(S.compare_throughputs(runs(n, 0), runs(n, 0)).verdict == S.SLOWER for _ in range(1000))
        assert false_slower / 1000 <= 0.05, (n, false_slower)
    detected = sum(S.compare_throughputs(runs(3, 0), runs(3, -0.10)).verdict == S.SLOWER for _ in range(400))
    assert detected / 400 >= 0.7, detected
    # and one run a side is never a verdict (bench.results.compare marks it indicative): nothing to calibrate


def test_a_ratio_of_rates_whose_interval_reaches_zero_or_is_unbounded_is_undetermined():
    """Fieller's set for 2 runs a side (samples/s 100, 102 against 60, 100) is [-1.70, 3.31]: mean_b is not
    significantly above 0 at Welch's ~1 degree of freedom. A ratio of rates is never negative: undetermined."""
    w = S.welch([100.0, 102.0], [60.0, 100.0])
    low, high = S.fieller(w)
    assert low < 0 < high  # Fieller's own answer, kept for what it is
    assert S.rate_ratio_interval(w) == (None, None)
    c = S.compare_throughputs([100.0, 102.0], [60.0, 100.0])
    assert (c.low, c.high, c.verdict) == (None, None, S.NO_CHANGE) and c.ratio == pytest.approx(80 / 101)
    # unbounded (mean_a not significantly different from 0) and exclusive sets are undetermined too
    assert S.rate_ratio_interval(S.welch([1.0, -1.0, 0.5], [5.0, 6.0, 7.0])) == (None, None)
    assert S.rate_ratio_interval(S.welch([100.0, 102.0, 98.0], [110.0, 111.0, 109.0])) == S.fieller(
        S.welch([100.0, 102.0, 98.0], [110.0, 111.0, 109.0]))


def test_the_verdict_needs_the_runs_a_side_the_calibration_supports():
    """VERDICT_RUNS a side find a real 10% slowdown most of the time at 3% run-to-run noise; one fewer a side miss
    it more often than they find it (bench.benchmarks.compare_calibration; BENCHMARKS.md)."""
    import random

    from bench.benchmarks.compare_calibration import called_slower

    rng = random.Random(7)
    found, _ = called_slower(rng, S.VERDICT_RUNS, -0.10, 0.03, 1000)
    fewer, _ = called_slower(rng, S.VERDICT_RUNS - 1, -0.10, 0.03, 1000)
    assert found >= 0.7 and fewer < 0.5, (found, fewer)
