"""How often ``bench compare``'s verdict from repeats is right: simulated runs with run-to-run noise.

Each simulated run's samples/s is 1000 x (1 + shift) x exp(N(0, sd)): the lognormal run-to-run spread of
runs on other nodes and at other times. For each number of repeats a side and each spread it prints how
often an A/A pair (no change) is called slower, how often a real 10% slowdown is, and how often that
slowdown's interval is undetermined (unbounded, or reaching 0). docs/RESULTS.md's "How many repeats a verdict
needs" quotes this table, and ``compare_stats.VERDICT_RUNS`` follows it.

    python3 -m bench.benchmarks.compare_calibration [--pairs 2000] [--seed 7]
"""

from __future__ import annotations

import argparse
import math
import random

import bench.results.compare_stats as S


def called_slower(rng: random.Random, n: int, shift: float, sd: float, pairs: int) -> tuple[float, float]:
    """Of ``pairs`` simulated comparisons (``n`` runs a side, B shifted by ``shift``): the share whose interval
    says slower, and the share whose interval is undetermined."""
    def runs(s: float) -> list[float]:
        return [1000.0 * (1 + s) * math.exp(rng.gauss(0, sd)) for _ in range(n)]
    got = [S.compare_throughputs(runs(0.0), runs(shift)) for _ in range(pairs)]
    return sum(c.verdict == S.SLOWER for c in got) / pairs, sum(c.low is None for c in got) / pairs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=2000)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()
    rng = random.Random(args.seed)
    print("repeats a side  run-to-run sd  A/A called slower  10% slowdown called slower  its interval undetermined")
    for n in (2, 3, 5):
        for sd in (0.02, 0.03, 0.05):
            aa, _ = called_slower(rng, n, 0.0, sd, args.pairs)
            real, undetermined = called_slower(rng, n, -0.10, sd, args.pairs)
            print(f"{n:>15}  {sd:>13.0%}  {aa:>17.1%}  {real:>26.1%}  {undetermined:>25.1%}")


if __name__ == "__main__":
    main()
