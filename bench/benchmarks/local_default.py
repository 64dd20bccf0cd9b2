"""Wall time and throughput of the product's first command, ``python -m bench run dev --local``.

``python -m bench.benchmarks.local_default [--repeats 3] [--stack dev]``

Runs the command end to end (etcd start, every experiment, the evaluation step) in a
temporary results root, ``--repeats`` times, and reports each run's wall time plus, per
experiment from its summary.json: samples/s (steady-state steps only), the time from its
launcher's start to its first training step with the phases that make it up, and the
precision and memory format it ran in. The machine line names the CPU and torch's CPU
capability (``torch.backends.cpu.get_cpu_capability()``), which decide those.
"""

from __future__ import annotations

import argparse
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

from core.contract.names import SUMMARY_FILE

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.benchmarks.local_default", description=__doc__.splitlines()[0])
    p.add_argument("--stack", default="dev")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="eksbench-local-bench-"))
    runs = []
    for i in range(args.repeats):
        t0 = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "bench", "run", args.stack, "--local", "--run-id", f"b{i}",
                               "--results-root", str(root)], cwd=ROOT, capture_output=True, text=True)
        wall = time.monotonic() - t0
        experiments = {}
        for summary in sorted((root / args.stack / f"b{i}").glob(f"*/{SUMMARY_FILE}")):
            s = json.loads(summary.read_text())
            tp = s.get("throughput") or {}
            startup = s.get("startup") or {}
            experiments[s["experiment"]] = {"status": s["status"], "wall_s": s["wall_time_s"],
                                            "samples_per_s_total": tp.get("samples_per_s_total"),
                                            "samples_per_s_per_process": tp.get("samples_per_s_per_process"),
                                            "processes": tp.get("processes"),
                                            "time_to_first_step_s": startup.get("time_to_first_step_s"),
                                            "startup_phases_s": startup.get("phases_s"),
                                            "precision": (s.get("config") or {}).get("precision"),
                                            "memory_format": s.get("memory_format")}
        runs.append({"exit_code": done.returncode, "wall_s": round(wall, 2), "experiments": experiments})
        print(f"run {i}: exit {done.returncode}, {wall:.1f}s", file=sys.stderr)
    shutil.rmtree(root, ignore_errors=True)
    walls = [r["wall_s"] for r in runs]
    names = sorted({n for r in runs for n in r["experiments"]})
    per_exp = {n: {k: statistics.median([r["experiments"][n][k] for r in runs if n in r["experiments"]
                                         and r["experiments"][n][k] is not None] or [0])
                   for k in ("samples_per_s_total", "samples_per_s_per_process", "wall_s", "time_to_first_step_s")}
               for n in names}
    print(json.dumps({"benchmark": "local_default", "command": f"python -m bench run {args.stack} --local",
                      "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
                      "machine": machine(),
                      "wall_s": walls, "median_wall_s": statistics.median(walls), "max_wall_s": max(walls),
                      "median_per_experiment": per_exp, "runs": runs}))
    return 0 if all(r["exit_code"] == 0 for r in runs) else 1


def machine() -> str:
    """e.g. "2-core AMD EPYC (AVX2, no bf16 instructions), torch CPU capability AVX2"."""
    from workloads.train.common.cpu_choice import read_cpu_facts

    capability = subprocess.run([sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
                                capture_output=True, text=True).stdout.strip() or "unknown"
    return f"{os.cpu_count()}-core {read_cpu_facts().describe()} ({platform.machine()}), torch CPU capability {capability}"


if __name__ == "__main__":
    raise SystemExit(main())
