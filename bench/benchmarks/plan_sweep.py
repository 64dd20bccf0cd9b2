"""How long the offline plan (and so ``pulumi up``'s program) takes to register a sweep of N runs.

``python -m bench.benchmarks.plan_sweep [--runs 32 64 128 256 512 1024] [--profile N]``

The dev stack (Pulumi.dev.yaml: one p3.16xlarge group, ``execution: sequential``) with its experiments replaced by
node x batch sweeps of its resnet50 experiment: each entry lists ``nodes: [1, 2]`` and 16 batch sizes (32 runs), and
N runs are N / 32 such entries. Each N is planned in a fresh process (``program.offline.evaluate_config``, the
function ``eksbench plan`` calls), timed around the whole evaluation: the program under the mock engine, the
registrations and the estimate. Prints one JSON line per N: runs, resources registered, seconds, and the seconds
per run. ``--profile N`` prints cProfile's top functions of one plan of N runs instead.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RUNS_PER_ENTRY = 32  # nodes [1, 2] x 16 batch sizes


def sweep_config(runs: int) -> dict[str, Any]:
    """The dev stack's config with ``runs`` runs of its first experiment, swept over nodes and batch size."""
    from program.stack_files import read_stack_yaml

    if runs % RUNS_PER_ENTRY:
        raise SystemExit(f"--runs: {runs} is not a multiple of {RUNS_PER_ENTRY}")
    config = read_stack_yaml("dev", ROOT)
    first = dict(config["eksbench:experiments"][0])
    first.pop("name")
    config["eksbench:experiments"] = [
        {**first, "name": f"s{i}", "nodes": [1, 2], "batch_size": list(range(16, 16 * 17, 16))}
        for i in range(runs // RUNS_PER_ENTRY)]
    return config


def plan_once(runs: int) -> dict[str, Any]:
    """One plan of ``runs`` runs in this process: its seconds and what it registered."""
    from program.offline import evaluate_config

    config = sweep_config(runs)
    started = time.perf_counter()
    plan = evaluate_config("dev", config, today="2026-12-07")
    seconds = time.perf_counter() - started
    return {"runs": runs, "resources": len(plan.resources), "seconds": round(seconds, 2),
            "ms_per_run": round(1000 * seconds / runs, 1), "provision_minutes": plan.estimate["provision_minutes"]}


def machine() -> str:
    from bench.benchmarks.local_default import machine as described

    return described()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.benchmarks.plan_sweep", description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, nargs="+", default=[32, 64, 128, 256, 512, 1024])
    p.add_argument("--profile", type=int, metavar="N", help="profile one plan of N runs")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.child:
        print(json.dumps(plan_once(args.child)))
        return 0
    if args.profile:
        import cProfile
        import pstats

        profile = cProfile.Profile()
        profile.runcall(plan_once, args.profile)
        pstats.Stats(profile).sort_stats("cumulative").print_stats(40)
        return 0
    rows = []
    for runs in args.runs:
        done = subprocess.run([sys.executable, "-m", "bench.benchmarks.plan_sweep", "--child", str(runs)], cwd=ROOT,
                              capture_output=True, text=True)
        if done.returncode:
            print(done.stderr, file=sys.stderr)
            return 1
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    print(json.dumps({"benchmark": "plan_sweep", "command": "python -m bench.benchmarks.plan_sweep",
                      "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"), "machine": machine(), "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
