"""``python -m bench.benchmarks.harness_overhead --sampler``: what the launcher's hardware sampler costs a training run.

The harness_overhead module docstring says what is measured; this module runs it. Each run is a local run's
shape: ``python -m workloads.train.harness.launch ... -- python -m workloads.train.pytorch ...`` as a child
process, one rank on this machine's CPU, with ``--telemetry-interval 1`` (the sampler) or ``0`` (none).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from core.contract.launch_command import launcher_argv, trainer_argv
from core.contract.names import SUMMARY_FILE
from core.contract.train_args import TrainArgs
from workloads.train.harness.telemetry import POWERCAP, Sampler, open_source, rapl_zones

ROOT = Path(__file__).resolve().parents[2]


def powercap_root(tmp: Path) -> tuple[Path, str]:
    """(the powercap tree the sampler reads, what it is): this machine's where RAPL is readable, else a stand-in."""
    zones, why = rapl_zones(POWERCAP)
    if zones:
        return POWERCAP, f"this machine's RAPL counters ({len(zones)} package zone(s))"
    zone = tmp / "powercap" / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "energy_uj").write_text("123456789\n")
    (zone / "max_energy_range_uj").write_text("262143328850\n")
    return zone.parent, f"a stand-in tree of one package counter ({why})"


def sample_cost_us(powercap: Path, tmp: Path, count: int = 2000) -> dict[str, float]:
    """Microseconds one sample takes (read, running totals, one line written), median of ``count``, in this process."""
    source, reason = open_source(None, powercap)
    sampler = Sampler(tmp / "cost", "node-0", source=source, reason=reason)
    sampler.path.parent.mkdir(parents=True, exist_ok=True)
    sampler._file = open(sampler.path, "ab", buffering=0)
    times = []
    for _ in range(count):
        t0 = time.perf_counter()
        sampler.sample()
        times.append(time.perf_counter() - t0)
    sampler.stop()
    return {"source": sampler.kind, "sample_us_median": round(statistics.median(times) * 1e6, 1),
            "sample_us_p95": round(sorted(times)[int(0.95 * len(times))] * 1e6, 1)}


def one_run(args, tmp: Path, tag: str, interval: float, powercap: Path) -> float:
    """The trainer's loop seconds of one launcher-wrapped run."""
    results = tmp / tag
    train = TrainArgs(workload=args.workload, batch_size=args.batch_size, precision=args.precision,
                      steps=args.steps, dataset="synthetic", data_dir=str(tmp / "data"), checkpoint_every=0,
                      image_size=args.image_size, width_per_group=args.width_per_group, warmup_steps=0,
                      results_dir=str(results))
    command = [*launcher_argv(python=sys.executable, results_dir=str(results), node_id="node-0", summary="always"),
               "--telemetry-interval", str(interval), "--powercap", str(powercap),
               "--", sys.executable, *trainer_argv(train)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(args.threads)}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    summary = json.loads((results / SUMMARY_FILE).read_text())
    if done.returncode != 0 or not summary.get("loop_seconds"):
        raise SystemExit(f"{tag}: the run failed (exit {done.returncode}): {done.stdout[-2000:]}")
    shutil.rmtree(results, ignore_errors=True)
    return summary["loop_seconds"]


def measure_sampler(args) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="eksbench-sampler-"))
    try:
        powercap, what = powercap_root(tmp)
        cost = sample_cost_us(powercap, tmp)
        one_run(args, tmp, "warmup", 1.0, powercap)
        times: dict[str, list[float]] = {"bare": [], "sampler": [], "control": []}
        for i in range(args.repeats):
            order = ("bare", "sampler", "control") if i % 2 == 0 else ("control", "sampler", "bare")
            for variant in order:
                times[variant].append(one_run(args, tmp, f"{variant}-{i}", 1.0 if variant == "sampler" else 0,
                                              powercap))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    pair = [s / b for s, b in zip(times["sampler"], times["bare"])]
    control = [c / b for c, b in zip(times["control"], times["bare"])]
    result = {"benchmark": "harness_overhead --sampler", "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
              "machine": f"{os.cpu_count()}-core CPU ({platform.processor() or platform.machine()})",
              "powercap": what, **cost,
              "config": {k: v for k, v in vars(args).items() if k not in ("sampler", "checkpoint_every")},
              "sampler_cpu_share_at_1hz": round(cost["sample_us_median"] / 1e6, 8),
              **{f"loop_s_{k}": [round(t, 3) for t in v] for k, v in times.items()},
              "paired_ratios": [round(r, 4) for r in pair],
              "overhead_ratio_paired_median": round(statistics.median(pair), 4),
              "control_ratio_paired_median": round(statistics.median(control), 4)}
    print(json.dumps(result))
    print(f"sampler overhead: {result['overhead_ratio_paired_median']:.4f}x paired median (A/A control "
          f"{result['control_ratio_paired_median']:.4f}x); one sample {cost['sample_us_median']} us ({what})",
          file=sys.stderr)
    return 0
